import CPOSIX
internal import Glibc
import Foundation
import TransferContainer
import TransferPOSIX

/// Remembers across a crash which task the daemon was working on, so that no input can put
/// the daemon into a crash loop: the loop notes the task before each piece of work for it
/// (libcurl's callbacks, a transfer's end, a start); a fatal signal (a Swift trap, a fault)
/// writes the note to `Daemon/crashed-on` before the process dies, after the crashing
/// daemon's run (`DaemonRun`); the next daemon reads it and counts the crash in the task's
/// record (`TransferDaemon.guardAgainstCrashLoops`) only if it names the daemon that ran
/// before it (its run record), holds that daemon's `RunSecret` (which only its memory held:
/// the record has the seal), and that process is gone: a file any program of the user
/// writes does not count as a crash by itself. Owned by the loop thread; the note itself
/// lives in C, where the signal handler can read it.
enum CrashGuard {
    /// Crashes on one task after which it fails instead of being tried again.
    static let crashesBeforeFailing = 2

    /// Installs the signal handler; the note goes to `path`, after `run`'s text, `secret` and tabs,
    /// when the daemon crashes: in its folder, opened now through `root` (no symlink on the
    /// way), and not through a symlink in its place.
    static func install(path: String, run: DaemonRun, secret: RunSecret, in root: RootDirectory) throws(Errno) {
        let folder = try root.openDirectory((path as NSString).deletingLastPathComponent)
        let prefix = run.text + "\t" + secret.text + "\t"
        guard cposix_crash_guard_install(folder.rawValue, (path as NSString).lastPathComponent, prefix) == 0 else {
            let error = Errno.current("sigaction", path: path)
            folder.close()
            throw error
        }
    }

    /// The note for a task: `family TAB identifier TAB task` (the mark is `run TAB secret TAB note`).
    static func note(for key: TaskKey) -> [UInt8] {
        Array("\(key.session.family.rawValue)\t\(key.session.identifier.rawValue)\t\(key.task)\n".utf8)
    }

    /// The daemon is working on the task whose note this is.
    static func working(on note: [UInt8]) {
        note.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { cposix_crash_guard_note($0.baseAddress, $0.count) }
        }
    }

    /// The daemon is working on no task in particular.
    static func idle() {
        cposix_crash_guard_note(nil, 0)
    }

    /// What a crash mark says.
    enum Mark: Equatable {
        /// The last daemon crashed while working on this task.
        case crashed(on: TaskKey)
        /// A mark that does not name the last daemon's run, or names one still running: not
        /// written by the daemon's crash, so not counted (the reason is logged).
        case notCounted(String)
    }

    /// The crash mark at `path`, which is removed, checked against the last daemon's run;
    /// nil when there is none.
    static func takeCrash(at path: String, lastRun: (run: DaemonRun, seal: String)?, in root: RootDirectory) -> Mark? {
        let data: Data
        do { data = try root.read(path, limit: StateFileLimits.crashMark) } catch {
            if error.code == ENOENT { return nil }
            try? root.remove(path)
            return .notCounted("\(error)") // too big, a symlink, not a file
        }
        try? root.remove(path)
        let fields = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines).split(separator: "\t", omittingEmptySubsequences: false)
        guard fields.count == 5, let run = DaemonRun(text: fields[0]),
              let family = try? BundleIdentifier(String(fields[2])),
              let identifier = try? SessionIdentifier(String(fields[3])),
              let task = Int(fields[4]), CheckedNumbers.taskIdentifiers.contains(task) else {
            return .notCounted("not a mark the daemon writes")
        }
        guard let lastRun, run == lastRun.run else {
            let last = lastRun?.run.text ?? "none recorded"
            return .notCounted("it names transferd \(run.text), not the last daemon (\(last))")
        }
        // Only the daemon named knew the secret whose seal it recorded: anything else that
        // names it (a copy of its run record, say) was written by another program.
        guard RunSecret.seal(of: String(fields[1])) == lastRun.seal else {
            return .notCounted("it does not hold the secret of transferd \(run.pid), so that daemon did not write it")
        }
        guard !run.isRunning else { return .notCounted("transferd \(run.pid) it names is still running") }
        return .crashed(on: TaskKey(session: SessionKey(family: family, identifier: identifier), task: task))
    }
}
