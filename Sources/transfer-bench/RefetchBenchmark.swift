import Foundation
import LoopbackServer

/// How much a SIGKILL of `transferd` costs: a download of `size` bytes, the daemon killed at
/// 50 %, restarted; the bytes the server sent beyond the file's size were fetched twice.
struct RefetchBenchmark {
    let size: Int64
    let runs: Int

    func run(into report: Report) throws {
        print("refetch: \(size >> 20) MiB download, transferd SIGKILLed at 50 %, \(runs) runs")
        var figures: [Double] = []
        var notes: [String] = []
        for run in 1...runs {
            let (refetched, note) = try once()
            figures.append(Double(refetched) / 1048576)
            notes.append("run \(run): \(note)")
            print(String(format: "  run %d: re-fetched %lld bytes (%.2f MiB); ", run, refetched, Double(refetched) / 1048576) + note)
        }
        report.add(Figure(id: "refetch", title: "bytes fetched again after a SIGKILL of transferd at 50 % of a \(size >> 20) MiB download",
                          result: Measure("re-fetched", unit: "MiB", figures), target: .atMost(16), notes: notes))
    }

    private func once() throws -> (refetched: Int64, note: String) {
        var container = try BenchContainer()
        defer { container.tearDown() }
        let server = container.server
        // Full speed: bytes counted as sent but still in socket buffers at the kill are what
        // a restart must fetch again, besides what the daemon had not written.
        let url = try container.servePayload(size: size)
        let daemon = try container.startDaemon()
        guard try container.run("fetch-extension", ["download", url]) == 0 else { throw BenchError("fetch-extension failed") }

        let partial = container.standInGroup.appendingPathComponent("Library/Caches/BackgroundTransfer/com.example.host.fetch.background/task-1.partial").path
        let deadline = Date().addingTimeInterval(120)
        while fileSize(partial) < size / 2 && Date() < deadline { usleep(500) }
        kill(daemon, SIGKILL)
        reap(daemon)
        let onDisk = fileSize(partial)
        _ = try container.startDaemon()
        guard container.waitForLog(timeout: 300, { $0.process == "host-app" && $0.message.hasPrefix("completion handler called") }) else {
            throw BenchError("the download did not finish after the restart")
        }
        let delivered = container.standInGroup.appendingPathComponent("Downloads/payload.bin").path
        guard fileSize(delivered) == size else { throw BenchError("delivered \(fileSize(delivered)) bytes, not \(size)") }
        let resumedAt = server.requests.last.flatMap { $0.header("Range") }.flatMap { Int64($0.dropFirst("bytes=".count).dropLast()) } ?? 0
        let note = String(format: "killed with %.1f MiB on disk; resumed with Range from byte %lld (%lld bytes on disk lost); the server sent %lld bytes for a %lld-byte file", Double(onDisk) / 1048576, resumedAt, onDisk - resumedAt, server.bytesSent, size)
        return (server.bytesSent - size, note)
    }
}
