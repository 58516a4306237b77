import BackgroundTransfer
import Foundation
import Digests

/// CPU time per GiB downloaded from Debian's nginx, the daemon against curl, runs alternating:
/// the daemon's user + system time (`/proc/PID/stat`, every thread, before and after each
/// download of the benchmark's own session) ÷ curl's (`curl -o FILE` as a child of this
/// process, its rusage from `wait4`). Over plain HTTP/1.1 (bytes moved, nothing else) and
/// over TLS with HTTP/2 (the same file, the test CA trusted by the device and by curl).
/// The client's side (this process, getrusage) is reported apart; every file is checked.
struct CPUBenchmark {
    let size: Int64
    let runs: Int
    let entitlements: String

    func run(into report: Report) throws {
        try BenchNginx.withTrustingDaemon(entitlements: entitlements) { container, nginx, daemon, app in
            let curl = try ChildUsage.which("curl"), sync = try ChildUsage.which("sync")
            try makePayloadFile(at: nginx.path(of: "payload.bin"), size: size)
            let digest = try SHA256.hexDigest(ofFile: nginx.path(of: "payload.bin"))
            for secure in [false, true] {
                try measure(secure: secure, url: secure ? nginx.httpsURL("payload.bin") : nginx.httpURL("payload.bin"), digest: digest,
                            daemon: daemon, app: app, container: container, nginx: nginx, curl: curl, sync: sync, into: report)
            }
        }
    }

    private func measure(secure: Bool, url: String, digest: String, daemon: Int32, app: BenchApp, container: BenchContainer, nginx: BenchNginx, curl: String, sync: String, into report: Report) throws {
        guard let requestURL = URL(string: url) else { throw BenchError("not a URL: \(url)") }
        let name = secure ? "HTTPS (HTTP/2)" : "HTTP/1.1"
        let curlFile = container.parent.appendingPathComponent("curl-payload.bin").path
        let daemonDirectory = container.parent.appendingPathComponent("daemon-payload")
        let delivered = daemonDirectory.appendingPathComponent("payload.bin").path
        let gibibytes = Double(size) / Double(1 << 30)
        let timeout = max(120, Double(size >> 20) / 4)
        var curlArguments = ["-sS", "--no-progress-meter", "-o", curlFile, url]
        if secure { curlArguments += ["--cacert", nginx.caFile] }

        print("cpu: \(size >> 20) MiB over \(name) from nginx, CPU seconds per GiB, \(runs) runs each, alternating with curl -o FILE")
        var daemonCPU: [ProcessCPU] = [], clientCPU: [ProcessCPU] = [], curlCPU: [ChildUsage] = [], syncCPU: [ChildUsage] = [], daemonTimes: [Double] = []
        var protocols: [String] = []
        for run in 0...runs {
            var daemonUsage: ProcessCPU?, clientUsage: ProcessCPU?, curlUsage: ChildUsage?, syncUsage: ChildUsage?, daemonTime = 0.0
            for curlFirst in run % 2 == 1 ? [true, false] : [false, true] {
                if curlFirst {
                    curlUsage = try ChildUsage.run(curl, curlArguments, timeout: timeout)
                    // What the daemon does and curl does not: make the file durable. The
                    // writeback it starts runs in its own context, so its CPU is counted.
                    syncUsage = try ChildUsage.run(sync, [curlFile], timeout: timeout)
                    try check(curlFile, digest: digest, side: "curl")
                    unlink(curlFile)
                } else {
                    let logged = nginx.requests.count
                    let before = try ProcessCPU(pid: daemon), selfBefore = ProcessCPU.ofSelf()
                    daemonTime = try app.download([requestURL], into: daemonDirectory, timeout: timeout)
                    daemonUsage = try ProcessCPU(pid: daemon) - before
                    clientUsage = ProcessCPU.ofSelf() - selfBefore
                    try check(delivered, digest: digest, side: "the daemon")
                    unlink(delivered)
                    protocols += nginx.requests.dropFirst(logged).map(\.protocolName)
                }
            }
            guard let daemonUsage, let clientUsage, let curlUsage, let syncUsage else { continue }
            let line = String(format: "daemon %.2f s CPU (user %.2f, sys %.2f) in %.2f s, curl %.2f s CPU (user %.2f, sys %.2f) in %.2f s, then sync %.2f s CPU, client %.2f s CPU; ratio %.2f",
                              daemonUsage.cpuSeconds, daemonUsage.userSeconds, daemonUsage.systemSeconds, daemonTime,
                              curlUsage.cpuSeconds, curlUsage.userSeconds, curlUsage.systemSeconds, curlUsage.seconds,
                              syncUsage.cpuSeconds, clientUsage.cpuSeconds, daemonUsage.cpuSeconds / curlUsage.cpuSeconds)
            guard run > 0 else {
                print("  warm-up (not counted): " + line)
                continue
            }
            daemonCPU.append(daemonUsage)
            clientCPU.append(clientUsage)
            curlCPU.append(curlUsage)
            syncCPU.append(syncUsage)
            daemonTimes.append(daemonTime)
            print("  run \(run): " + line)
        }
        let perGiB = { (seconds: [Double]) in seconds.map { $0 / gibibytes } }
        let id = secure ? "cpu.https" : "cpu.http"
        report.add(Figure(id: id, title: "transferd CPU time per GiB downloaded from nginx over \(name) ÷ curl's (`curl -o FILE`)",
                          result: Measure("daemon ÷ curl, CPU", unit: "", zip(daemonCPU, curlCPU).map { $0.cpuSeconds / $1.cpuSeconds }),
                          reference: Measure("curl user + sys", unit: "s/GiB", perGiB(curlCPU.map(\.cpuSeconds))),
                          target: .atMost(secure ? 0.6 : 0.4), // issue 32
                          details: [Measure("transferd user + sys", unit: "s/GiB", perGiB(daemonCPU.map(\.cpuSeconds))),
                                    Measure("transferd user", unit: "s/GiB", perGiB(daemonCPU.map(\.userSeconds))),
                                    Measure("transferd sys", unit: "s/GiB", perGiB(daemonCPU.map(\.systemSeconds))),
                                    Measure("curl user", unit: "s/GiB", perGiB(curlCPU.map(\.userSeconds))),
                                    Measure("curl sys", unit: "s/GiB", perGiB(curlCPU.map(\.systemSeconds))),
                                    Measure("`sync FILE` right after curl (not in curl's figure)", unit: "s/GiB", perGiB(syncCPU.map(\.cpuSeconds))),
                                    Measure("daemon ÷ (curl + sync FILE), CPU", unit: "", zip(daemonCPU, zip(curlCPU, syncCPU)).map { $0.cpuSeconds / ($1.0.cpuSeconds + $1.1.cpuSeconds) }),
                                    Measure("client (this process: the session and its delegate) user + sys", unit: "s/GiB", perGiB(clientCPU.map(\.cpuSeconds))),
                                    Measure("daemon wall time (task created to didCompleteWithError)", unit: "s", daemonTimes),
                                    Measure("curl wall time", unit: "s", curlCPU.map(\.seconds))],
                          notes: ["\(size >> 20) MiB a download; the daemon's time from `/proc/PID/stat` (10 ms ticks), curl's from `wait4`. Protocols nginx logged for the daemon: \(HTTPSBenchmark.tally(protocols)).",
                                  "The daemon also makes the file durable and keeps the task's records: it writes the body to the disk itself (O_DIRECT, in 1 MiB writes on a thread of its own) and fsyncs it at the end, all in its own context, so counted; curl only writes into the page cache, whose writeback the kernel's flusher threads do later, counted to nobody. `sync FILE` after curl shows that share. The split of either side's time into user and system follows where each 10 ms tick lands: only the sum is a figure.",
                                  "One round of each side comes first and is not counted."]))
    }

    private func check(_ path: String, digest: String, side: String) throws {
        guard fileSize(path) == size else { throw BenchError("\(side) wrote \(fileSize(path)) bytes, not \(size)") }
        guard try SHA256.hexDigest(ofFile: path) == digest else { throw BenchError("\(side)'s file differs from the served one (SHA-256)") }
    }
}
