import Foundation
import LoopbackServer
import TransferContainer

/// What an upload through the daemon costs against `curl -T` of the same file to the same
/// server, runs alternating; then the bytes sent again after a SIGKILL of `transferd` at 50 %.
struct UploadBenchmark {
    let size: Int64
    let runs: Int

    func run() -> Int32 {
        do {
            try measure()
            return 0
        } catch {
            print("upload benchmark failed: \(error)")
            return 1
        }
    }

    private func measure() throws {
        var container = try BenchContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        // The file lies in the app group already, as an app's own file would: no copy is timed.
        let group = container.layout.appGroup(try BundleIdentifier("group.com.example.transfers"))
        try FileManager.default.createDirectory(at: group.appendingPathComponent("Outbox"), withIntermediateDirectories: true)
        let source = group.appendingPathComponent("Outbox/payload.bin").path
        try makePayloadFile(at: source, size: size)
        server.acceptUploads(at: "/upload", options: UploadOptions(storage: .countOnly, resumable: [3, 5, 6]))
        let url = server.url(for: "/upload").absoluteString
        _ = try container.startDaemon()

        print("upload: \(size >> 20) MiB from a file, \(runs) runs each, alternating; server counts bytes only")
        var curlTimes: [Double] = [], daemonTimes: [Double] = []
        for run in 1...runs {
            let curl = try timed { try container.runCommand("/usr/bin/env", ["curl", "-sS", "-o", "/dev/null", "-H", "Expect:", "-T", source, url]) }
            let daemon = try timed { try container.run("share-extension", ["upload", source, url, "--wait"]) }
            curlTimes.append(curl)
            daemonTimes.append(daemon)
            print(String(format: "  run %d: curl -T %.3f s (%.0f MiB/s), daemon %.3f s (%.0f MiB/s), ratio %.3f", run, curl, Double(size) / 1048576 / curl, daemon, Double(size) / 1048576 / daemon, daemon / curl))
        }
        let ratios = zip(daemonTimes, curlTimes).map { $0 / $1 }.sorted()
        print(String(format: "daemon ÷ curl -T: median %.3f (min %.3f, max %.3f); curl median %.0f MiB/s, daemon median %.0f MiB/s",
                     median(ratios), ratios.first!, ratios.last!, Double(size) / 1048576 / median(curlTimes), Double(size) / 1048576 / median(daemonTimes)))
        try sentAgainAfterKill(&container, server: server, source: source)
    }

    /// One more upload, throttled so that the kill lands mid-way, against a resumable route.
    private func sentAgainAfterKill(_ container: inout BenchContainer, server: LoopbackServer, source: String) throws {
        server.acceptUploads(at: "/killed", options: UploadOptions(storage: .countOnly, resumable: [6], bytesPerSecond: Int(size / 4)))
        guard let daemon = FileLock.holderPID(container.layout.daemonLock.path) else { throw BenchError("no daemon") }
        let before = server.uploadBytesReceived
        guard try container.run("share-extension", ["upload", source, server.url(for: "/killed").absoluteString]) == 0 else { throw BenchError("share-extension failed") }
        let deadline = Date().addingTimeInterval(120)
        while server.uploadBytesReceived - before < size / 2 && Date() < deadline { usleep(1_000) }
        kill(daemon, SIGKILL)
        let atKill = server.uploadBytesReceived - before
        server.acceptUploads(at: "/killed", options: UploadOptions(storage: .countOnly, resumable: [6]))
        _ = try container.startDaemon()
        guard server.waitForUploads(at: "/killed", count: 1, timeout: 120) else { throw BenchError("the upload did not finish after the restart") }
        let sentAgain = server.uploadBytesReceived - before - size
        print(String(format: "transferd SIGKILLed with %.1f MiB received by the server; after the restart the server received %lld bytes more than the file's size (sent again)", Double(atKill) / 1048576, sentAgain))
    }

    private func timed(_ body: () throws -> Int32) throws -> Double {
        let start = Date()
        let status = try body()
        guard status == 0 else { throw BenchError("a run exited with status \(status)") }
        return Date().timeIntervalSince(start)
    }

    private func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }
}
