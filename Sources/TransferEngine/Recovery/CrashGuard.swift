import CPOSIX
internal import Glibc
import Foundation
import TransferContainer

/// Remembers across a crash which task the daemon was working on, so that no input can put
/// the daemon into a crash loop: the loop notes the task before each piece of work for it
/// (libcurl's callbacks, a transfer's end, a start); a fatal signal (a Swift trap, a fault)
/// writes the note to `Daemon/crashed-on` before the process dies; the next daemon reads it
/// and counts the crash in the task's record (`TransferDaemon.guardAgainstCrashLoops`). Owned by the loop thread;
/// the note itself lives in C, where the signal handler can read it.
enum CrashGuard {
    /// Crashes on one task after which it fails instead of being tried again.
    static let crashesBeforeFailing = 2

    /// Installs the signal handler; the note goes to `path` when the daemon crashes.
    static func install(path: String) throws(Errno) {
        guard cposix_crash_guard_install(path) == 0 else { throw Errno.current("sigaction", path: path) }
    }

    /// The note for a task: `family TAB identifier TAB task`.
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

    /// The task the last daemon crashed on, from the note at `path`, which is removed; nil if
    /// it did not crash on a task (or the note cannot be read, which is logged by the caller
    /// as nothing to do).
    static func takeCrash(at path: String) -> TaskKey? {
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        unlink(path)
        let fields = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .newlines).split(separator: "\t", omittingEmptySubsequences: false)
        guard fields.count == 3,
              let family = try? BundleIdentifier(String(fields[0])),
              let identifier = try? SessionIdentifier(String(fields[1])),
              let task = Int(fields[2]), CheckedNumbers.taskIdentifiers.contains(task) else { return nil }
        return TaskKey(session: SessionKey(family: family, identifier: identifier), task: task)
    }
}
