internal import Glibc
import Foundation
import TransferContainer
import TransferPOSIX
import TransferLogging

/// At start-up, once the journals are read: removes from the sessions' cache folders the
/// files the daemon makes for tasks (partial data and its error page, an upload's body and
/// the server's answer, a download's request body, a finished download) that no unfinished task and no undelivered
/// event names. Power cuts leave them: an unlink after an acknowledgement that the cut undid
/// is done again by nobody, and a task whose creation the cut took leaves its partial data.
/// Runs once, on the daemon's loop thread, before the daemon listens, with the sessions the
/// daemon loaded.
enum CacheSweep {
    static func removeOrphans(of sessions: [SessionKey: DaemonSession], layout: ContainerLayout, root: RootDirectory, log: TransferLog) {
        // Sessions skipped at start (their record unusable) are taken up again later with
        // their journals, which may name files in a folder of the same name: left alone.
        var skipped = Set<String>()
        let families = (try? FileManager.default.contentsOfDirectory(atPath: layout.sessionsDirectory.path)) ?? []
        for family in families {
            let identifiers = (try? FileManager.default.contentsOfDirectory(atPath: layout.sessionsDirectory.appendingPathComponent(family).path)) ?? []
            let loaded = Set(sessions.keys.filter { $0.family.rawValue == family }.map(\.identifier.rawValue))
            skipped.formUnion(identifiers.filter { !loaded.contains($0) })
        }
        var byFolder: [String: [DaemonSession]] = [:] // sessions of two app families may share one
        for session in sessions.values { byFolder[session.downloadsDirectory, default: []].append(session) }

        var removed = 0
        var failures: [String] = []
        for (folder, sharing) in byFolder where !skipped.contains((folder as NSString).lastPathComponent) {
            // From the container's root: a cache folder (or one on the way) swapped for a
            // symlink is not swept, so no file elsewhere is removed.
            guard let names = try? root.names(in: folder) else { continue }
            let liveTasks = Set(sharing.flatMap { $0.tasks.keys })
            let named = Set(sharing.flatMap { session in
                (session.events.values.compactMap(\.downloadedFile) + session.tasks.values.compactMap(\.uploadFile)).compactMap(session.resolvedPath)
            })
            var removedHere = 0
            for name in names {
                // Anything else is kept: above all `resume-…` files, which resume data handed
                // to an app names (the daemon keeps no record of it), and files not the daemon's.
                guard let task = taskIdentifier(inDaemonFile: name), !liveTasks.contains(task), !named.contains(folder + "/" + name) else { continue }
                do { try root.remove(folder + "/" + name); removedHere += 1 } catch { failures.append("\(error)") }
            }
            guard removedHere > 0 else { continue }
            removed += removedHere
            do { try DurableFile.syncDirectory(folder) } catch { failures.append("\(error)") }
        }
        guard removed > 0 || !failures.isEmpty else { return }
        log.notice("store", "removed \(removed) files from the sessions' caches that no task or event names"
                          + (failures.isEmpty ? "" : "; \(failures.count) could not be removed or synced, e.g. \(failures[0])"))
    }

    /// The task a file the daemon makes is named after (`task-N.partial`, `task-N.partial.response`,
    /// `task-N.upload`, `task-N.upload-response`, `task-N.body`, `task-N.new-body`, `CFNetworkDownload_N.tmp`); nil for any other name.
    static func taskIdentifier(inDaemonFile name: String) -> Int? {
        let forms: [(prefix: String, suffixes: [String])] = [("task-", [".partial", ".partial.response", ".upload", ".upload-response", ".body", ".new-body"]), ("CFNetworkDownload_", [".tmp"])]
        for form in forms where name.hasPrefix(form.prefix) {
            for suffix in form.suffixes where name.hasSuffix(suffix) && name.count > form.prefix.count + suffix.count {
                let digits = name.dropFirst(form.prefix.count).dropLast(suffix.count)
                guard digits.count <= 10, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber), let number = Int(digits),
                      CheckedNumbers.taskIdentifiers.contains(number) else { continue }
                return number
            }
        }
        return nil
    }
}
