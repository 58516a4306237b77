#if canImport(Glibc)
import Glibc
#endif
import CPOSIX
import Foundation

/// Empty files made ahead of need, on a thread of its own, in a folder of the daemon's: a
/// download then starts by renaming a spare to its partial file instead of creating one.
/// Creating a file is the costly part on some file systems (ext4 without a journal looks
/// past every inode freed in the last minute for each new one), and it would otherwise hold
/// up the daemon's loop, which may have thousands of small downloads to start.
///
/// `want`, `take` and `stop` are called from the daemon's loop; the worker thread makes and
/// removes the files. What they share is behind one lock. A daemon killed with spares made
/// finds them again (they are named `.spare-<random>` in `directory`).
public final class SpareFiles: @unchecked Sendable {
    public let directory: String
    private let condition = NSCondition()
    private var ready: [String] = []
    private var wanted = 0
    private var scanned = false
    private var stopping = false
    private var started = false

    public init(directory: String) {
        self.directory = directory
    }

    /// Asks for `count` spares to be kept ready (0: the ones made are removed).
    public func want(_ count: Int) {
        condition.lock()
        defer { condition.unlock() }
        guard count != wanted else { return }
        wanted = count
        if !started {
            started = true
            let thread = Thread { [self] in work() }
            thread.name = "spare files"
            thread.qualityOfService = .utility
            thread.start()
        }
        condition.signal()
    }

    /// Spares made and not yet taken.
    public var readyCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return ready.count
    }

    /// Moves a spare to `path`, which must not exist yet. False when no spare is ready or
    /// `path` exists: the caller then opens or creates the file itself.
    public func take(to path: String) -> Bool {
        condition.lock()
        let spare = ready.popLast()
        if spare != nil { condition.signal() } // make another
        condition.unlock()
        guard let spare else { return false }
        if cposix_rename_noreplace(spare, path) == 0 { return true }
        if errno == EEXIST {
            condition.lock()
            ready.append(spare) // still a spare
            condition.unlock()
        }
        return false
    }

    /// Stops the worker; spares made stay for the next daemon.
    public func stop() {
        condition.lock()
        stopping = true
        condition.signal()
        condition.unlock()
    }

    private func work() {
        condition.lock()
        defer { condition.unlock() }
        while !stopping {
            if !scanned {
                condition.unlock()
                let found = Self.leftovers(in: directory)
                condition.lock()
                ready += found
                scanned = true
            } else if ready.count > wanted {
                let surplus = ready.removeLast()
                condition.unlock()
                unlink(surplus)
                condition.lock()
            } else if ready.count < wanted {
                condition.unlock()
                let made = Self.make(in: directory)
                condition.lock()
                if let made { ready.append(made) } else { wanted = ready.count } // cannot now (full, gone): until asked again
            } else {
                condition.wait()
            }
        }
    }

    private static func leftovers(in directory: String) -> [String] {
        try? DurableFile.makeDirectory(directory)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix(".spare-") }.map { directory + "/" + $0 }
    }

    private static func make(in directory: String) -> String? {
        let path = directory + "/.spare-" + UUID().uuidString
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        close(fd)
        return path
    }
}
