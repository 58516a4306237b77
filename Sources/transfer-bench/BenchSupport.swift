import Foundation
import LoopbackServer
import TransferContainer
import ContainerInspection
import TransferLogging
import TransferPOSIX

/// A scratch container, a loopback server, and the built executables beside this one.
struct BenchContainer {
    let parent: URL
    let layout: ContainerLayout
    let server: LoopbackServer
    /// Processes this container's benchmark started (daemons), ended by pid in `tearDown`.
    var pids: [Int32] = []

    init() throws {
        parent = URL(fileURLWithPath: "/tmp/bgt-bench-\(getpid())-\(UUID().uuidString.prefix(6))")
        layout = ContainerLayout(root: parent.appendingPathComponent("container"))
        try layout.prepare()
        server = try LoopbackServer()
    }

    /// Serves `size` bytes of fresh data at `/payload.bin`; returns its URL.
    func servePayload(size: Int64) throws -> String {
        let source = parent.appendingPathComponent("payload.bin").path
        try makePayloadFile(at: source, size: size)
        server.serve("/payload.bin", file: URL(fileURLWithPath: source))
        return server.url(for: "/payload.bin").absoluteString
    }

    static func executable(_ name: String) -> String {
        ((ProcessSpawner.currentExecutable as NSString).deletingLastPathComponent as NSString).appendingPathComponent(name)
    }

    /// The app group every stand-in shares.
    var standInGroup: URL { layout.appGroup(try! BundleIdentifier("group.com.example.transfers")) }

    /// Starts `transferd` (with `options` besides ours) and waits until its socket answers,
    /// at most `timeout` seconds. `environment` is added to ours (e.g. `BGTRANSFER_LOG_LEVEL`).
    mutating func startDaemon(environment extra: [String: String] = [:], options: [String] = [], timeout: TimeInterval = 20) throws -> Int32 {
        let environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }
        let pid = try ProcessSpawner.spawn(Self.executable("transferd"), arguments: ["--container", layout.root.path, "--quiet", "--relaunch-delay", "0.05"] + options, environment: environment, newSession: true, outputPath: parent.appendingPathComponent("transferd.out").path)
        pids.append(pid)
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let fd = try? UnixSocket.connect(to: layout.daemonSocket.path) { fd.close(); return pid }
            usleep(5_000)
        }
        throw BenchError("transferd did not answer")
    }

    /// Runs one of the project's executables on this container to its end; returns its status.
    func run(_ name: String, _ arguments: [String], timeout: TimeInterval = 600) throws -> Int32 {
        try runCommand(Self.executable(name), ["--container", layout.root.path] + arguments, timeout: timeout)
    }

    /// Runs any command to its end, output discarded; returns its status.
    func runCommand(_ path: String, _ arguments: [String], timeout: TimeInterval = 600) throws -> Int32 {
        try runProcess(path, arguments, timeout: timeout).status
    }

    /// Runs the command and returns how long it took, in seconds; a failure status is an error.
    func timedRun(_ name: String, _ arguments: [String], timeout: TimeInterval = 600) throws -> Double {
        try timed { try run(name, arguments, timeout: timeout) }
    }

    /// `curl` with these arguments, timed; a failure status is an error.
    func timedCurl(_ arguments: [String], timeout: TimeInterval = 600) throws -> Double {
        // --no-progress-meter as well: curl 7.88 draws its --parallel meter despite -s.
        try timed { try runCommand("/usr/bin/env", ["curl", "-sS", "--no-progress-meter"] + arguments, timeout: timeout) }
    }

    /// Waits until the stand-ins' sessions have no undelivered event and every `host-app`
    /// the daemon launched (as `follower` reads in the log) has exited; returns how many it
    /// launched. A stand-in run with `--wait` exits on `didCompleteWithError`, which can be
    /// before its acknowledgement reaches the daemon: the daemon then relaunches the host
    /// app for that event, and the next timed run must not share the machine with it.
    func settleStandIns(_ follower: inout LogFollower, timeout: TimeInterval = 30) throws -> Int {
        let family = layout.sessionsDirectory.appendingPathComponent("com.example.host")
        var launched: [Int32] = []
        let settled = poll(timeout: timeout) {
            for entry in follower.next() where entry.process == "transferd" {
                if let event = entry.event, event.kind == .launched, event.app == "com.example.host", let pid = event.pid { launched.append(pid) }
            }
            let sessions = (try? FileManager.default.contentsOfDirectory(atPath: family.path)) ?? []
            let undelivered = sessions.contains { JournalContents.hasUndeliveredEvents(session: family.appendingPathComponent($0)) }
            return !undelivered && launched.allSatisfy { !isRunning($0) }
        }
        guard settled else { throw BenchError("the stand-ins' events were not all delivered within \(Int(timeout)) s") }
        return launched.count
    }

    func waitForLog(timeout: TimeInterval, _ matches: (LogEntry) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        var follower = LogFollower(layout: layout, fromStart: true)
        while Date() < deadline {
            if follower.next().contains(where: matches) { return true }
            usleep(20_000)
        }
        return false
    }

    /// Stops the server, ends every daemon of this container and removes it. The daemon's
    /// directory goes first, so that a client in this process that loses the daemon cannot
    /// start another.
    func tearDown() {
        server.stop()
        var daemons = pids
        if let pid = FileLock.holderPID(layout.daemonLock.path), FileLock.isHeld(layout.daemonLock.path), !daemons.contains(pid) { daemons.append(pid) }
        try? FileManager.default.removeItem(at: layout.daemonDirectory)
        for pid in daemons {
            kill(pid, SIGKILL)
            if pids.contains(pid) { reap(pid) }
        }
        RetiredScratch.retire(parent)
    }
}

/// Scratch folders whose many small files are removed only when the benchmark ends. On this
/// machine's ext4 (no journal) creating a file skips every inode deleted in the last 60 to
/// 300 s (`recently_deleted()`), reading its inode table block each time: deleting one
/// figure's 10,000 files made each file the next figure created, curl's or the daemon's, cost
/// up to ten times as much (curl's 1,000 downloads took 0.07 s or 0.9 s depending on what was
/// deleted just before). Large files go at once: they are few inodes and much disk.
enum RetiredScratch {
    static let folder = URL(fileURLWithPath: "/tmp/bgt-bench-retired-\(getpid())")

    /// Removes the large files under `directory` and moves the rest aside (a rename).
    static func retire(_ directory: URL) {
        let manager = FileManager.default
        if let walk = manager.enumerator(at: directory, includingPropertiesForKeys: [.fileSizeKey, .isRegularFileKey]) {
            for case let file as URL in walk {
                guard let values = try? file.resourceValues(forKeys: [.fileSizeKey, .isRegularFileKey]),
                      values.isRegularFile == true, (values.fileSize ?? 0) >= 1 << 20 else { continue }
                try? manager.removeItem(at: file)
            }
        }
        try? manager.createDirectory(at: folder, withIntermediateDirectories: true)
        if (try? manager.moveItem(at: directory, to: folder.appendingPathComponent(directory.lastPathComponent))) == nil {
            try? manager.removeItem(at: directory)
        }
    }

    /// Removes everything retired; called once every figure is measured.
    static func removeAll() {
        try? FileManager.default.removeItem(at: folder)
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs a command to its end and returns its status and (with `capture`) its standard
/// output, which must fit in a pipe's buffer. Killed (by its pid) and reported as an error
/// when it outlives `timeout`.
func runProcess(_ path: String, _ arguments: [String], timeout: TimeInterval, capture: Bool = false) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: path)
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = capture ? pipe : FileHandle.nullDevice
    let ended = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in ended.signal() }
    try process.run()
    guard ended.wait(timeout: .now() + timeout) == .success else {
        kill(process.processIdentifier, SIGKILL)
        _ = ended.wait(timeout: .now() + 10)
        throw BenchError("\((path as NSString).lastPathComponent) \(arguments.joined(separator: " ")) did not finish within \(Int(timeout)) s; killed")
    }
    let output = capture ? String(decoding: pipe.fileHandleForReading.availableData, as: UTF8.self) : ""
    return (process.terminationStatus, output)
}

/// What `settleStandIns` saw, for a figure's notes.
func relaunchNote(_ relaunches: Int, runs: Int, standIn: String) -> String {
    "In \(relaunches) of \(runs) runs `\(standIn) --wait` exited before the daemon had its acknowledgement, and the daemon relaunched host-app for the event; each time the benchmark waited for that app to finish, outside the timed runs."
}

/// Whether a process exists and has not exited (a zombie waiting to be reaped has).
func isRunning(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return false }
    return !stat[stat.index(after: close)...].hasPrefix(" Z")
}

/// Waits (at most 10 s) for a child this process started and killed.
func reap(_ pid: Int32) {
    let deadline = Date().addingTimeInterval(10)
    var status: Int32 = 0
    while waitpid(pid, &status, WNOHANG) == 0 && Date() < deadline { usleep(1_000) }
}

func fileSize(_ path: String) -> Int64 {
    ((try? FileManager.default.attributesOfItem(atPath: path)[.size]) as? NSNumber)?.int64Value ?? 0
}

/// Writes `size` bytes of non-repeating data to a file, 1 MiB at a time.
func makePayloadFile(at path: String, size: Int64) throws {
    _ = FileManager.default.createFile(atPath: path, contents: nil)
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
    defer { try? handle.close() }
    var state: UInt64 = 0x9E3779B97F4A7C15
    var block = [UInt64](repeating: 0, count: 1 << 17)
    var written: Int64 = 0
    while written < size {
        for i in 0..<block.count {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            block[i] = state
        }
        let data = block.withUnsafeBytes { Data($0.prefix(Int(min(Int64($0.count), size - written)))) }
        handle.write(data)
        written += Int64(data.count)
    }
}

// MARK: Clocks

/// Seconds on a clock that never jumps (for durations inside this process).
func monotonicNow() -> Double {
    Double(DispatchTime.now().uptimeNanoseconds) / 1e9
}

/// Seconds since 1970 on CLOCK_REALTIME: the clock the daemon's log timestamps come from,
/// so that times taken in different processes can be compared.
func realtimeNow() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}

/// How long `body` takes, in seconds; a non-zero status it returns is an error.
func timed(_ body: () throws -> Int32) throws -> Double {
    let start = monotonicNow()
    let status = try body()
    guard status == 0 else { throw BenchError("a run exited with status \(status)") }
    return monotonicNow() - start
}

/// Waits for `condition` by polling every millisecond until `timeout`; returns whether it held.
func poll(timeout: TimeInterval, _ condition: () -> Bool) -> Bool {
    let deadline = monotonicNow() + timeout
    while !condition() {
        if monotonicNow() > deadline { return false }
        usleep(1_000)
    }
    return true
}

// MARK: Memory of a process

/// Resident memory of a process from `/proc/PID/status`, in MiB.
struct ResidentMemory {
    /// VmRSS: resident now.
    var current: Double
    /// VmHWM: the peak since the process started or since `resetPeak`.
    var peak: Double

    init(pid: Int32) throws {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { throw BenchError("cannot read /proc/\(pid)/status") }
        func kibibytes(_ field: String) -> Double? {
            guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return nil }
            return line.split(separator: " ").dropFirst().first.flatMap { Double($0) }
        }
        guard let rss = kibibytes("VmRSS"), let hwm = kibibytes("VmHWM") else { throw BenchError("no VmRSS/VmHWM in /proc/\(pid)/status") }
        current = rss / 1024
        peak = hwm / 1024
    }

    /// Resets VmHWM to the current VmRSS (`echo 5 > /proc/PID/clear_refs`); false when the kernel refuses.
    static func resetPeak(pid: Int32) -> Bool {
        let fd = open("/proc/\(pid)/clear_refs", O_WRONLY)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return write(fd, "5", 1) == 1
    }
}
