import Foundation
import TransferContainer

/// A scratch container and the built executables beside this one.
struct BenchContainer {
    let parent: URL
    let layout: ContainerLayout
    var pids: [Int32] = []

    init() throws {
        parent = URL(fileURLWithPath: "/tmp/bgt-bench-\(getpid())-\(UUID().uuidString.prefix(6))")
        layout = ContainerLayout(root: parent.appendingPathComponent("container"))
        try layout.prepare()
    }

    static func executable(_ name: String) -> String {
        ((ProcessSpawner.currentExecutable as NSString).deletingLastPathComponent as NSString).appendingPathComponent(name)
    }

    /// Starts `transferd` and waits until its socket answers.
    mutating func startDaemon() throws -> Int32 {
        let pid = try ProcessSpawner.spawn(Self.executable("transferd"), arguments: ["--container", layout.root.path, "--quiet", "--relaunch-delay", "0.05"], newSession: true, outputPath: parent.appendingPathComponent("transferd.out").path)
        pids.append(pid)
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let fd = try? UnixSocket.connect(to: layout.daemonSocket.path) { fd.close(); return pid }
            usleep(5_000)
        }
        throw BenchError("transferd did not answer")
    }

    /// Runs one of the project's executables on this container to its end; returns its status.
    func run(_ name: String, _ arguments: [String]) throws -> Int32 {
        try runCommand(Self.executable(name), ["--container", layout.root.path] + arguments)
    }

    /// Runs any command to its end, output discarded; returns its status.
    func runCommand(_ path: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
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

    func tearDown() {
        for pid in pids { kill(pid, SIGKILL) }
        if let pid = FileLock.holderPID(layout.daemonLock.path), FileLock.isHeld(layout.daemonLock.path) { kill(pid, SIGKILL) }
        try? FileManager.default.removeItem(at: parent)
    }
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
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
