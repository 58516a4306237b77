import Foundation
import TransferContainer
import TransferCoding
import TransferLogging
import TransferPOSIX

/// The credentials apps gave in answer to challenges, by persistence: `.none` for one task,
/// `.forSession` for a session while the daemon runs (memory only), `.permanent` for every
/// task of the app family, kept in its private container
/// (`Apps/<family>/Library/BackgroundTransfer/credentials.json`, 0600). Never logged; never
/// in task records, events, inspection or resume data. Owned by the daemon's loop thread.
final class CredentialStore {
    struct Entry: Codable {
        var space: ProtectionSpaceRecord
        var credential: CredentialRecord
    }

    private let layout: ContainerLayout
    /// The container's root: the file is in an app's folder, reached without following a symlink.
    private let root: RootDirectory
    private let log: TransferLog
    private var forTask: [TaskKey: Entry] = [:]
    private var forSession: [SessionKey: [Entry]] = [:]
    private var permanent: [BundleIdentifier: [Entry]] = [:]

    init(layout: ContainerLayout, root: RootDirectory, log: TransferLog) {
        self.layout = layout
        self.root = root
        self.log = log
    }

    /// Keeps a credential the app gave for `space`, as long as its persistence says.
    func remember(_ credential: CredentialRecord, for space: ProtectionSpaceRecord, task: TaskKey) {
        let entry = Entry(space: space, credential: credential)
        switch credential.persistence {
        case .none:
            forTask[task] = entry
        case .forSession:
            forSession[task.session, default: []].removeAll { $0.space == space }
            forSession[task.session, default: []].append(entry)
        case .permanent:
            var entries = permanentEntries(task.session.family)
            entries.removeAll { $0.space == space }
            entries.append(entry)
            permanent[task.session.family] = entries
            save(entries, family: task.session.family)
        }
    }

    /// The credential to send to `host`:`port` (or to the proxy there) for a task: its own,
    /// else its session's, else its app's; the latest given first.
    func credential(host: String, port: Int, isProxy: Bool, task: TaskKey) -> Entry? {
        let candidates = [forTask[task]].compactMap { $0 } + (forSession[task.session] ?? []).reversed() + permanentEntries(task.session.family).reversed()
        return candidates.first { $0.space.covers(host: host, port: port, isProxy: isProxy) }
    }

    /// Whether any credential could be sent for `task` (its own, its session's, its app's):
    /// when none, there is no URL to parse for one (the usual case, every transfer's start).
    func holdsAny(for task: TaskKey) -> Bool {
        forTask[task] != nil || forSession[task.session]?.isEmpty == false || !permanentEntries(task.session.family).isEmpty
    }

    /// A task ended: its own credential goes.
    func taskEnded(_ task: TaskKey) {
        forTask[task] = nil
    }

    private func file(_ family: BundleIdentifier) -> URL {
        layout.privateContainer(family).appendingPathComponent("Library/BackgroundTransfer/credentials.json")
    }

    private func permanentEntries(_ family: BundleIdentifier) -> [Entry] {
        if let entries = permanent[family] { return entries }
        let path = file(family).path
        var entries: [Entry] = []
        if (try? root.status(path)) != nil {
            do { entries = try RecordCoding.decoder().decode([Entry].self, from: root.read(path, limit: 4 << 20)) } catch {
                log.error("credentials", "cannot read the stored credentials of \(family): \(error); none used")
            }
        }
        permanent[family] = entries
        return entries
    }

    private func save(_ entries: [Entry], family: BundleIdentifier) {
        let path = file(family)
        do {
            try root.makeDirectory(path.deletingLastPathComponent().path)
            try root.write(RecordCoding.encoder().encode(entries), to: path.path)
        } catch {
            log.error("credentials", "cannot store a permanent credential for \(family): \(error); kept for this run only")
        }
    }
}
