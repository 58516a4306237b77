import Foundation
import TestPeers
import Testing
import TransferPOSIX

/// A `transferd` started by a test on its container, ready when its socket answers.
struct DaemonUnderTest {
    let process: RunningProcess

    /// - Parameter fileSizeLimit: run under `prlimit --fsize` (writes past it fail: a full disk).
    /// - Parameter openFileLimit: run under `prlimit --nofile=N:N` (soft and hard: the daemon cannot raise it).
    /// - Parameter readyWithin: how long it may take to answer (it loads every session first).
    /// - Parameter trustedRoots: a PEM file of roots every app trusts (`--trusted-roots`): the
    ///   test's own file works whoever runs the tests, where `Daemon/trusted-roots.pem` needs root.
    static func start(_ container: TestContainer, extraArguments: [String] = ["--relaunch-delay", "0.1"],
                      environment: [String: String] = [:], fileSizeLimit: Int? = nil, openFileLimit: Int? = nil,
                      readyWithin: TimeInterval = 20, trustedRoots: URL? = nil) throws -> DaemonUnderTest {
        let extraArguments = extraArguments + (trustedRoots.map { ["--trusted-roots", $0.path] } ?? [])
        let process: RunningProcess
        let limits = (fileSizeLimit.map { ["--fsize=\($0)"] } ?? []) + (openFileLimit.map { ["--nofile=\($0):\($0)"] } ?? [])
        if !limits.isEmpty {
            process = try Executable(name: "prlimit", path: "/usr/bin/prlimit").start(limits + [Executable.transferd.path, "--container", container.root, "--quiet"] + extraArguments, in: container, environment: environment, passContainer: false)
        } else {
            process = try Executable.transferd.start(["--quiet"] + extraArguments, in: container, environment: environment)
        }
        let answers = waitUntil(timeout: readyWithin) {
            guard let fd = try? UnixSocket.connect(to: container.layout.daemonSocket.path) else { return false }
            fd.close()
            return true
        }
        if answers { return DaemonUnderTest(process: process) }
        throw TestFailure("transferd did not answer within \(Int(readyWithin)) s: \(process.stderr)")
    }

    var pid: Int32 { process.pid }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Deterministic bytes for served files.
func testPayload(size: Int, seed: UInt64 = 0x9E3779B97F4A7C15) -> Data {
    var state = seed | 1
    var data = Data(count: size)
    data.withUnsafeMutableBytes { raw in
        let bytes = raw.bindMemory(to: UInt8.self)
        var i = 0
        while i < size {
            state ^= state << 13; state ^= state >> 7; state ^= state << 17
            var word = state
            for _ in 0..<8 where i < size {
                bytes[i] = UInt8(truncatingIfNeeded: word)
                word >>= 8
                i += 1
            }
        }
    }
    return data
}

/// Waits (polling, with a deadline) until `condition` holds. The tests' one polling loop:
/// the pause between looks is its interval, never the synchronisation itself.
func waitUntil(timeout: TimeInterval = 20, _ condition: () -> Bool) -> Bool {
    PeerProcess.wait(until: Date().addingTimeInterval(timeout), condition) || condition()
}

/// The fetch extension's task 1's partial file in `container`.
func fetchTask1PartialFile(in container: TestContainer) -> URL {
    container.appGroup.appendingPathComponent(
        "Library/Caches/BackgroundTransfer/com.example.host.fetch.background/task-1.partial")
}

/// SIGKILLs the daemon once the fetch extension's task 1 has more than `bytes` on disk and, for
/// a resource with a validator, once its journal holds it (without it a restart cannot resume,
/// and starts over); returns that task's partial file.
@discardableResult
func killDaemon(_ daemon: DaemonUnderTest, in container: TestContainer, onceTask1Has bytes: Int,
                resourceHasValidator: Bool = true) throws -> URL {
    let partial = fetchTask1PartialFile(in: container)
    let size = { ((try? FileManager.default.attributesOfItem(atPath: partial.path)[.size]) as? NSNumber)?.intValue ?? 0 }
    try #require(waitUntil { size() > bytes }, "the download did not start")
    if resourceHasValidator {
        try #require(waitForJournaledValidator(ofTask1In: container), "the response's validator was never journaled")
    }
    daemon.process.kill(signal: SIGKILL)
    _ = daemon.process.wait(timeout: 10)
    return partial
}

/// Waits until the fetch extension's task 1, as its journal on disk has it, holds a validator.
func waitForJournaledValidator(ofTask1In container: TestContainer, timeout: TimeInterval = 30) -> Bool {
    waitUntil(timeout: timeout) { container.task(1, in: "com.example.host.fetch.background")?.validator != nil }
}
