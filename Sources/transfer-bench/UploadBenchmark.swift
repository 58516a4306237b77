import Foundation
import LoopbackServer
import ContainerInspection
import TransferPOSIX

/// What an upload through the daemon costs against `curl -T` of the same file to the same
/// server, runs alternating; then the bytes sent again after a SIGKILL of `transferd` at 50 %.
struct UploadBenchmark {
    let size: Int64
    let runs: Int

    func run(into report: Report) throws {
        var container = try BenchContainer()
        defer { container.tearDown() }
        let server = container.server
        // The file lies in the app group already, as an app's own file would: no copy is timed.
        let group = container.standInGroup
        try FileManager.default.createDirectory(at: group.appendingPathComponent("Outbox"), withIntermediateDirectories: true)
        let source = group.appendingPathComponent("Outbox/payload.bin").path
        try makePayloadFile(at: source, size: size)
        server.acceptUploads(at: "/upload", options: UploadOptions(storage: .countOnly, resumable: [3, 5, 6]))
        let url = server.url(for: "/upload").absoluteString
        _ = try container.startDaemon()
        let mebibytes = Double(size) / 1048576
        let timeout = max(120, mebibytes / 4)

        print("upload: \(size >> 20) MiB from a file, \(runs) runs each, alternating; server counts bytes only")
        var curlTimes: [Double] = [], daemonTimes: [Double] = []
        var follower = LogFollower(layout: container.layout)
        var relaunches = 0
        for run in 1...runs {
            var curl = 0.0, daemon = 0.0
            for first in run % 2 == 1 ? [true, false] : [false, true] {
                if first {
                    curl = try container.timedCurl(["-o", "/dev/null", "-H", "Expect:", "-T", source, url], timeout: timeout)
                } else {
                    daemon = try container.timedRun("share-extension", ["upload", source, url, "--wait"], timeout: timeout)
                    relaunches += try container.settleStandIns(&follower)
                }
            }
            curlTimes.append(curl)
            daemonTimes.append(daemon)
            print(String(format: "  run %d: curl -T %.3f s (%.0f MiB/s), daemon %.3f s (%.0f MiB/s), ratio %.3f", run, curl, mebibytes / curl, daemon, mebibytes / daemon, daemon / curl))
        }
        let rate = { (times: [Double]) in times.map { mebibytes / $0 } }
        report.add(Figure(id: "upload.ratio", title: "\(size >> 20) MiB upload from a file through the daemon, time ÷ `curl -T FILE`",
                          result: Measure("daemon ÷ curl", unit: "", zip(daemonTimes, curlTimes).map { $0 / $1 }),
                          reference: Measure("curl -T FILE", unit: "s", curlTimes),
                          target: .atMost(1.10),
                          details: [Measure("daemon (`share-extension upload FILE URL --wait`, process start to exit)", unit: "s", daemonTimes),
                                    Measure("daemon throughput", unit: "MiB/s", rate(daemonTimes)),
                                    Measure("curl -T throughput", unit: "MiB/s", rate(curlTimes))],
                          notes: ["libcurl in the daemon reads the file 2 MiB at a time, the curl tool 64 KiB.",
                                  relaunchNote(relaunches, runs: runs, standIn: "share-extension")]))
        let (atKill, sentAgain) = try sentAgainAfterKill(&container, server: server, source: source)
        report.add(Figure(id: "upload.resume", title: "bytes sent again after a SIGKILL of transferd at 50 % of a \(size >> 20) MiB resumable upload",
                          result: Measure("sent again", unit: "MiB", [Double(sentAgain) / 1048576]),
                          notes: [String(format: "Killed with %.1f MiB received by the server; the restarted daemon asked for `Upload-Offset` and sent the rest with PATCH.", Double(atKill) / 1048576)]))
    }

    /// One more upload, throttled so that the kill lands mid-way, against a resumable route.
    private func sentAgainAfterKill(_ container: inout BenchContainer, server: LoopbackServer, source: String) throws -> (atKill: Int64, sentAgain: Int64) {
        server.acceptUploads(at: "/killed", options: UploadOptions(storage: .countOnly, resumable: [6], bytesPerSecond: Int(size / 4)))
        guard let daemon = FileLock.holderPID(container.layout.daemonLock.path) else { throw BenchError("no daemon") }
        let before = server.uploadBytesReceived
        guard try container.run("share-extension", ["upload", source, server.url(for: "/killed").absoluteString]) == 0 else { throw BenchError("share-extension failed") }
        let deadline = Date().addingTimeInterval(120)
        while server.uploadBytesReceived - before < size / 2 && Date() < deadline { usleep(1_000) }
        kill(daemon, SIGKILL)
        reap(daemon)
        let atKill = server.uploadBytesReceived - before
        server.acceptUploads(at: "/killed", options: UploadOptions(storage: .countOnly, resumable: [6]))
        _ = try container.startDaemon()
        guard server.waitForUploads(at: "/killed", count: 1, timeout: 120) else { throw BenchError("the upload did not finish after the restart") }
        return (atKill, server.uploadBytesReceived - before - size)
    }
}
