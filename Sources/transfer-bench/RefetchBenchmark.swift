import Foundation
import LoopbackServer
import TransferContainer

/// How much a SIGKILL of `transferd` costs: a download of `size` bytes, the daemon killed at
/// 50 %, restarted; the bytes the server sent beyond the file's size were fetched twice.
struct RefetchBenchmark {
    let size: Int64
    let runs: Int

    func run() -> Int32 {
        print("refetch: \(size >> 20) MiB download, transferd SIGKILLed at 50 %, \(runs) runs")
        var figures: [Int64] = []
        for run in 1...runs {
            do {
                let refetched = try once()
                figures.append(refetched)
                print(String(format: "  run %d: re-fetched %lld bytes (%.2f MiB)", run, refetched, Double(refetched) / 1048576))
            } catch {
                print("  run \(run) failed: \(error)")
                return 1
            }
        }
        let sorted = figures.sorted()
        print(String(format: "refetch per kill: median %.2f MiB, max %.2f MiB (target ≤ 16 MiB)", Double(sorted[sorted.count / 2]) / 1048576, Double(sorted.last!) / 1048576))
        return 0
    }

    private func once() throws -> Int64 {
        var container = try BenchContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        let source = container.parent.appendingPathComponent("payload.bin").path
        try makePayloadFile(at: source, size: size)
        // Full speed: bytes counted as sent but still in socket buffers at the kill are what
        // a restart must fetch again, besides what the daemon had not written.
        server.serve("/payload.bin", file: URL(fileURLWithPath: source))
        let daemon = try container.startDaemon()
        guard try container.run("fetch-extension", ["download", server.url(for: "/payload.bin").absoluteString]) == 0 else { throw BenchError("fetch-extension failed") }

        let partial = container.layout.appGroup(try BundleIdentifier("group.com.example.transfers")).appendingPathComponent("Library/Caches/BackgroundTransfer/com.example.host.fetch.background/task-1.partial").path
        let deadline = Date().addingTimeInterval(120)
        while fileSize(partial) < size / 2 && Date() < deadline { usleep(500) }
        kill(daemon, SIGKILL)
        var status: Int32 = 0
        waitpid(daemon, &status, 0)
        let onDisk = fileSize(partial)
        _ = try container.startDaemon()
        guard container.waitForLog(timeout: 300, { $0.process == "host-app" && $0.message.hasPrefix("completion handler called") }) else {
            throw BenchError("the download did not finish after the restart")
        }
        let delivered = container.layout.appGroup(try BundleIdentifier("group.com.example.transfers")).appendingPathComponent("Downloads/payload.bin").path
        guard fileSize(delivered) == size else { throw BenchError("delivered \(fileSize(delivered)) bytes, not \(size)") }
        let resumedAt = server.requests.last.flatMap { $0.header("Range") }.flatMap { Int64($0.dropFirst("bytes=".count).dropLast()) } ?? 0
        print(String(format: "         killed with %.1f MiB on disk; resumed with Range from byte %lld (%lld bytes on disk lost); server sent %lld bytes for a %lld-byte file", Double(onDisk) / 1048576, resumedAt, onDisk - resumedAt, server.bytesSent, size))
        return server.bytesSent - size
    }
}
