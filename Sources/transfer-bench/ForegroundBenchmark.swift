import BackgroundTransfer
import LoopbackServer

/// This library's default session, as the same client (`ForegroundClients.swift` holds
/// corelibs' one). Owned by the benchmark's thread.
struct LibraryClient: ForegroundClient {
    let session = URLSession(configuration: .default)

    func upload(file: URL, to url: URL, timeout: TimeInterval) throws -> Int {
        var request = URLRequest(url: url)
        request.httpMethod = "PUT"
        return try waitFor(timeout) { done in
            session.uploadTask(with: request, fromFile: file) { _, response, error in done((response as? HTTPURLResponse)?.statusCode, error) }.resume()
        }
    }

    func get(_ url: URL, count: Int, timeout: TimeInterval) throws -> Int {
        var bytes = 0
        for _ in 0..<count {
            bytes += try waitFor(timeout) { done in
                session.dataTask(with: url) { data, _, error in done(data?.count, error) }.resume()
            }
        }
        return bytes
    }
}

/// Default sessions against FoundationNetworking's and curl, in the same run, alternating
/// (issue 27): an upload from a file, and many small GETs over keep-alive one after another.
/// Target: a default session is not slower than FoundationNetworking's.
struct ForegroundBenchmark {
    let size: Int64
    let count: Int
    let runs: Int
    let entitlements: String

    func run(into report: Report) throws {
        let container = try BenchContainer()
        defer { container.tearDown() }
        _ = try BackgroundApplication(entitlements: entitlements, arguments: ["--container", container.layout.root.path])
        let server = container.server
        server.acceptUploads(at: "/upload", options: UploadOptions(storage: .countOnly))
        server.serve("/small", data: Data(repeating: 7, count: 1024))
        let source = container.parent.appendingPathComponent("payload.bin")
        try makePayloadFile(at: source.path, size: size)
        let upload = server.url(for: "/upload"), small = server.url(for: "/small")
        let timeout = max(120, Double(size >> 20) / 4)
        let clients: [(name: String, client: ForegroundClient)] = [("FoundationNetworking", CorelibsClient()), ("default session", LibraryClient())]
        var uploads: [String: [Double]] = [:], gets: [String: [Double]] = [:], cpuPerGET: [String: [Double]] = [:]
        /// Times `count` GETs of `name`'s: the wall clock, and this process's CPU per GET (less
        /// swayed by other work on the machine; the server's share is the same for each client).
        func timeGETs(_ name: String, _ get: () throws -> Int) throws {
            let begun = monotonicNow(), cpu = ProcessCPU.ofSelf()
            _ = try get()
            gets[name, default: []].append(monotonicNow() - begun)
            cpuPerGET[name, default: []].append((ProcessCPU.ofSelf() - cpu).cpuSeconds / Double(count) * 1e6)
        }
        // The floor of a bridge that needs FoundationNetworking's delegate calls: GETs only.
        let throughDelegate = CorelibsDelegateClient()
        defer { throughDelegate.invalidate() }
        let timeDelegateGETs = { try timeGETs("FoundationNetworking through a delegate") { try throughDelegate.get(small, count: self.count, timeout: 30) } }

        print("foreground: \(size >> 20) MiB upload from a file and \(count) GETs of 1 KiB, \(runs) runs each, alternating")
        for run in 1...runs {
            uploads["curl", default: []].append(try container.timedCurl(["-o", "/dev/null", "-H", "Expect:", "-T", source.path, upload.absoluteString], timeout: timeout))
            gets["curl", default: []].append(try container.timedCurl(["-o", "/dev/null", small.absoluteString + "?[1-\(count)]"], timeout: timeout))
            if run % 2 == 0 { try timeDelegateGETs() }
            for (name, client) in run % 2 == 1 ? clients : clients.reversed() {
                let started = monotonicNow()
                let status = try client.upload(file: source, to: upload, timeout: timeout)
                guard (200..<300).contains(status) else { throw BenchError("\(name): upload answered \(status)") }
                uploads[name, default: []].append(monotonicNow() - started)
                try timeGETs(name) { try client.get(small, count: count, timeout: 30) }
            }
            if run % 2 == 1 { try timeDelegateGETs() }
            print(String(format: "  run %d: upload curl %.2f s, corelibs %.2f s, ours %.2f s; %d GETs curl %.2f s, corelibs %.2f s, corelibs through a delegate %.2f s, ours %.2f s", run,
                         uploads["curl"]!.last!, uploads["FoundationNetworking"]!.last!, uploads["default session"]!.last!, count,
                         gets["curl"]!.last!, gets["FoundationNetworking"]!.last!, gets["FoundationNetworking through a delegate"]!.last!, gets["default session"]!.last!))
        }
        for (id, title, times) in [("foreground.upload", "\(size >> 20) MiB upload from a file in a default session", uploads),
                                   ("foreground.gets", "\(count) GETs of 1 KiB over keep-alive, one after another, in a default session", gets)] {
            let ours = times["default session"] ?? [], corelibs = times["FoundationNetworking"] ?? [], curl = times["curl"] ?? []
            let delegated = times["FoundationNetworking through a delegate"] ?? []
            let floor = delegated.isEmpty ? [] : [Measure("FoundationNetworking through a delegate", unit: "s", delegated),
                                                  Measure("FoundationNetworking through a delegate ÷ FoundationNetworking (what a bridge pays at least)", unit: "", zip(delegated, corelibs).map { $0 / $1 }),
                                                  Measure("default session ÷ FoundationNetworking through a delegate (the bridge's own cost)", unit: "", zip(ours, delegated).map { $0 / $1 })]
                + ["FoundationNetworking", "FoundationNetworking through a delegate", "default session"].map { Measure("CPU of the benchmark's process per GET, \($0)", unit: "µs", cpuPerGET[$0] ?? []) }
            report.add(Figure(id: id, title: title + ", time ÷ FoundationNetworking's",
                              result: Measure("default session ÷ FoundationNetworking", unit: "", zip(ours, corelibs).map { $0 / $1 }),
                              reference: Measure("FoundationNetworking", unit: "s", corelibs),
                              target: .atMost(1.0),
                              details: [Measure("default session", unit: "s", ours), Measure("curl", unit: "s", curl),
                                        Measure("FoundationNetworking ÷ curl", unit: "", zip(corelibs, curl).map { $0 / $1 })] + floor,
                              notes: ["Data and upload tasks of default sessions are carried out by FoundationNetworking behind this library's objects (ForegroundBridge.swift)."]))
        }
    }
}
