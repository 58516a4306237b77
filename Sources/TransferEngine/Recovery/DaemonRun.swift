import Digests
import Foundation
import TransferPOSIX

/// Which process a daemon was: its pid, the boot it ran in and its start time since boot (in
/// clock ticks, `/proc/<pid>/stat`), together naming one process for good, as a pid alone
/// (reused) does not. Each daemon records its own in `Daemon/transferd.run` when it starts,
/// with the seal of its `RunSecret`, and a crash mark (`CrashGuard`) names it and holds the
/// secret, so the next daemon counts only a mark the daemon that ran before it wrote as it
/// died. A plain value; any thread.
struct DaemonRun: Equatable, Sendable {
    var pid: Int32
    var boot: String
    var startTicks: UInt64

    /// This process, or nil where `/proc` cannot tell.
    static func current() -> DaemonRun? { of(pid: getpid()) }

    /// The process `pid` is now, or nil when there is none (a zombie, dead but not yet
    /// reaped, counts as none), or `/proc` cannot tell.
    static func of(pid: Int32) -> DaemonRun? {
        guard let boot = try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8),
              let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces and parentheses): state is
        // field 3, the start time field 22.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        guard fields.count > 19, fields[0] != "Z", fields[0] != "X", let start = UInt64(fields[19]) else { return nil }
        return DaemonRun(pid: pid, boot: boot.trimmingCharacters(in: .whitespacesAndNewlines), startTicks: start)
    }

    /// "pid boot start", as the run record and crash marks hold it.
    var text: String { "\(pid) \(boot) \(startTicks)" }

    init(pid: Int32, boot: String, startTicks: UInt64) {
        self.pid = pid
        self.boot = boot
        self.startTicks = startTicks
    }

    /// Parses `text`; nil for anything else (the file may hold anything).
    init?(text: Substring) {
        let parts = text.split(separator: " ")
        guard parts.count == 3, let pid = Int32(parts[0]), pid > 0, let start = UInt64(parts[2]),
              parts[1].count == 36, parts[1].allSatisfy({ $0.isHexDigit || $0 == "-" }) else { return nil }
        self.init(pid: pid, boot: String(parts[1]), startTicks: start)
    }

    /// Whether this process still runs.
    var isRunning: Bool { Self.of(pid: pid) == self }

    /// The run recorded at `path` (the last daemon's) and its seal, or nil.
    static func recorded(at path: String, in root: RootDirectory) -> (run: DaemonRun, seal: String)? {
        guard let data = try? root.read(path, limit: StateFileLimits.run) else { return nil }
        let line = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let space = line.lastIndex(of: " "), let run = DaemonRun(text: line[..<space]) else { return nil }
        let seal = String(line[line.index(after: space)...])
        guard seal.utf8.count == 64, seal.allSatisfy(\.isHexDigit) else { return nil }
        return (run, seal)
    }

    /// Records this run at `path` with the seal of `secret` (`RunSecret.seal`), durably and
    /// through `root` (a symlink there is replaced): a crash mark is checked against both
    /// after the crash.
    func record(at path: String, sealing secret: RunSecret, in root: RootDirectory) throws(Errno) {
        try root.write(Data((text + " " + secret.seal + "\n").utf8), to: path)
    }
}

/// A secret of one daemon run, 32 random bytes that live only in the daemon's memory: its
/// crash handler writes them into the crash mark, and the run record holds only their
/// SHA-256 (the seal). So a crash mark proves the daemon wrote it, which a file written by
/// another program of the user cannot, though it can read every file the daemon leaves.
struct RunSecret: Sendable {
    /// The secret, in hex.
    let text: String

    init() {
        var generator = SystemRandomNumberGenerator()
        text = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    /// SHA-256 of the secret's text, in hex: what the run record holds.
    var seal: String { Self.seal(of: text) }

    static func seal(of text: String) -> String { SHA256.hexDigest(of: Data(text.utf8)) }
}
