import Foundation
import Testing
import LoopbackServer
import Digests

/// `bgtransfer timeline`, drawn from a real run (an extension's download answered 503, retried,
/// its daemon killed mid-transfer and restarted, the host relaunched for the event) and
/// rendered by a real headless browser: the checks are on what the browser drew, as measured
/// by the page's own script (`#render-summary`), not on the HTML text.
@Suite(.timeLimit(.minutes(20)))
struct TimelineTests {
    static let browser = "/usr/bin/chromium-headless-shell"
    static let fetchSession = "com.example.host.fetch.background"

    @Test("A retry, a daemon killed mid-transfer and a relaunch, drawn and measured in chromium-headless-shell")
    func timelineOfARealRun() throws {
        try Self.requireBrowser()
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        var busy = RouteOptions()
        busy.status = 503
        busy.retryAfter = 1
        server.serve("/files/report.bin", data: Data("busy".utf8), options: busy)
        let info = ["BGTRANSFER_LOG_LEVEL": "info"] // creations, transfer starts, acknowledgements
        let first = try DaemonUnderTest.start(container, environment: info)

        // The extension creates its task and exits; the server answers 503 + Retry-After.
        let fetch = try Executable.fetchExtension.start(["download", server.url(for: "/files/report.bin").absoluteString], in: container, environment: info)
        let fetched = fetch.wait(timeout: 30)
        try #require(fetched.status == 0, "fetch-extension: \(fetched.stderr)")
        try #require(container.waitForLog { $0.pid == first.pid && $0.retry?.attempt == 1 && $0.retry?.cause == .serverAskedToWait(status: 503, seconds: 1) } != nil, "the 503 was not retried")
        let payload = testPayload(size: 4 << 20, seed: 21)
        var slow = RouteOptions()
        slow.bytesPerSecond = 2 << 20 // about two seconds: the daemon dies in the middle
        server.serve("/files/report.bin", data: payload, options: slow)

        // The retry starts; the daemon is killed mid-transfer, and another one takes over.
        let starts = { container.logEntries(process: "transferd").filter { $0.pid == first.pid && $0.message.hasPrefix("started at offset") }.count }
        try #require(waitUntil(timeout: 20) { starts() >= 2 }, "the retry did not start")
        // Mid-transfer: a quarter of the body is on its way.
        try #require(waitUntil(timeout: 20) { server.bytesSent >= Int64(payload.count / 4) }, "the body did not flow")
        first.process.kill()
        _ = first.process.wait(timeout: 10)
        let second = try DaemonUnderTest.start(container, environment: info)
        let acknowledged = container.waitForCompletionHandler(of: "host-app", timeout: 40)
        try #require(acknowledged != nil, "the host was not relaunched, or did not acknowledge")
        #expect(try SHA256.hexDigest(ofFile: container.downloads.appendingPathComponent("report.bin").path) == SHA256.hexDigest(of: payload))

        let page = container.layout.root.appendingPathComponent("timeline.html")
        let made = try Executable.bgtransfer.run(["timeline", "--output", page.path], in: container)
        try #require(made.status == 0, "bgtransfer timeline: \(made.stderr)")
        #expect(made.stdout.isEmpty, "--output writes the page to the file only")
        let html = try String(contentsOf: page, encoding: .utf8)
        #expect(!html.contains("<link") && !html.contains("<script src") && !html.contains("@import") && !html.contains("url(http"), "self-contained: no external script, style or font")

        let drawn = try Self.render(page, in: container)
        try #require(drawn.svg, "no SVG drawn")
        let task = "\(Self.fetchSession)#1"

        // Lanes: the extension, both daemon incarnations in order, the relaunched host.
        let lanes = drawn.lanes
        #expect(lanes.allSatisfy { $0.drawn && $0.width > 0 }, "every lane is drawn inside the picture: \(lanes)")
        #expect(lanes.contains { $0.kind == "extension" && $0.process == "fetch-extension" && $0.pid == fetch.pid }, "\(lanes)")
        let daemons = lanes.filter { $0.kind == "daemon" }.sorted { $0.x < $1.x }
        #expect(daemons.map(\.pid) == [first.pid, second.pid], "one lane per daemon incarnation, in order: \(lanes)")
        #expect(lanes.contains { $0.kind == "relaunched-app" && $0.process == "host-app" && $0.pid == acknowledged!.pid }, "\(lanes)")

        // The task's bar, with its waits and their reasons.
        let bar = try #require(drawn.bars.first { $0.task == task }, "no bar for \(task): \(drawn.bars.map(\.task))")
        #expect(bar.drawn && bar.width > 100, "the bar spans seconds of the picture: \(bar)")
        #expect(!bar.open)
        let retryWait = bar.waits.first { $0.kind == "retry-after" }
        #expect(retryWait.map { $0.width > 10 && $0.reason.contains("503") } == true, "the Retry-After wait is drawn with its reason: \(bar.waits)")
        let down = bar.waits.first { $0.kind == "daemon-down" }
        #expect(down.map { $0.width > 0 && $0.reason.contains("killed") } == true, "the time without a daemon is drawn: \(bar.waits)")

        // The marks on the task's bar, drawn, in the order things happened.
        let marks = drawn.marks.filter { $0.task == task }
        #expect(marks.allSatisfy { $0.drawn }, "every mark is inside the picture: \(marks.filter { !$0.drawn })")
        func x(_ kind: String) -> Double? { marks.first { $0.kind == kind }?.x }
        let order = ["created", "retry", "killed", "finished", "relaunch", "acknowledged"]
        let xs = order.map(x)
        #expect(xs.allSatisfy { $0 != nil }, "marks missing: \(zip(order, xs).filter { $0.1 == nil }.map(\.0)) of \(marks.map(\.kind))")
        let found = xs.compactMap { $0 }
        #expect(found == found.sorted(), "marks out of order: \(zip(order, xs).map { "\($0.0) \($0.1 ?? -1)" })")
        #expect((x("relaunch") ?? 0) < (x("acknowledged") ?? 0), "the acknowledgement comes after the relaunch")
        #expect(marks.filter { $0.kind == "started" }.count >= 3, "first try, the retry, the resume after the restart: \(marks.map(\.kind))")
        #expect(marks.filter { $0.kind == "delegate" }.count >= 2, "didFinishDownloadingTo and didCompleteWithError: \(marks.map(\.kind))")
        #expect(drawn.marks.contains { $0.kind == "killed" && $0.task == nil && $0.lane == "transferd-\(first.pid)" }, "the first daemon's lane ends killed")
        #expect(drawn.marks.contains { $0.kind == "acknowledged" && $0.lane == "host-app-\(acknowledged!.pid)" }, "the acknowledgement on the host's lane")

        // Readable: labels inside the picture and not on top of each other.
        #expect(drawn.labels.visible > 10)
        #expect(drawn.labels.clipped == 0, "labels cut off at the edges: \(drawn.labels)")
        #expect(drawn.labels.overlapping == 0, "labels drawn over each other: \(drawn.labels)")

        // --session keeps one session; stdout by default.
        let one = try Executable.bgtransfer.run(["timeline", "--session", Self.fetchSession], in: container)
        #expect(one.status == 0, "\(one.stderr)")
        #expect(one.stdout.hasPrefix("<!DOCTYPE html>") && one.stdout.contains("data-task=\"\(task)\""))
    }

    @Test("What is still pending, and why the app has not been woken: the rate limiter, the network, a begin date")
    func pendingAndWhyNotWoken() throws {
        try Self.requireBrowser()
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        // a and b take a second each, so that the extension that starts them has exited when
        // they end and their events go to the host (under CI load a faster one was seen to end
        // while the extension still held the session, which then took the event itself).
        for name in ["a", "b"] { server.serve("/\(name).bin", data: testPayload(size: 64 << 10), options: RouteOptions(bytesPerSecond: 64 << 10)) }
        for name in ["c", "d"] { server.serve("/\(name).bin", data: testPayload(size: 64 << 10)) }
        let info = ["BGTRANSFER_LOG_LEVEL": "info"]
        _ = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "60"], environment: info)
        func download(_ name: String, _ options: [String] = []) throws {
            // A host launched for an earlier event may still hold the session (-996 otherwise).
            try #require(container.waitUntilSessionIsFree("com.example.host.fetch.background"), "the host still holds the extension's session")
            let outcome = try Executable.fetchExtension.start(["download", server.url(for: "/\(name).bin").absoluteString] + options, in: container, environment: info).wait(timeout: 30)
            try #require(outcome.status == 0, "fetch-extension: \(outcome.stderr)")
        }
        // The first relaunch comes at once; the second event waits for the resume rate limiter.
        try download("a")
        try #require(container.waitForCompletionHandler(of: "host-app") != nil, "no first relaunch")
        try download("b")
        try #require(container.waitForLog { $0.task == 2 && $0.message.hasPrefix("finished") } != nil, "task 2 did not finish")
        let offline = try Executable.bgtransfer.run(["conditions", "--network", "offline"], in: container)
        try #require(offline.status == 0, "\(offline.stderr)")
        // Two more in a session of their own (opening the first again would take its event).
        let waiting = "com.example.host.fetch.waiting"
        try download("c", ["--session", waiting])
        try download("d", ["--session", waiting, "--begin-after", "600"])

        let page = container.layout.root.appendingPathComponent("pending.html")
        let made = try Executable.bgtransfer.run(["timeline", "--output", page.path], in: container)
        try #require(made.status == 0, "bgtransfer timeline: \(made.stderr)")
        let drawn = try Self.render(page, in: container)
        try #require(drawn.svg)

        let why = drawn.findings.joined(separator: "\n")
        #expect(why.contains(Self.fetchSession) && why.contains("resume rate limiter holds the next relaunch of com.example.host until"), "the findings name the rate limiter: \(why)")
        #expect(!why.contains(waiting), "the other session has no event waiting: \(why)")
        let now = try #require(drawn.now, "a line marks now")
        func bar(_ task: Int) -> Drawn.Bar? {
            drawn.bars.first { $0.task == (task <= 2 ? "\(Self.fetchSession)#\(task)" : "\(waiting)#\(task - 2)") }
        }
        #expect(bar(1).map { !$0.open } == true, "task 1 was delivered and acknowledged")
        #expect(drawn.marks.contains { $0.task == "\(Self.fetchSession)#1" && $0.kind == "acknowledged" })
        for (task, kinds) in [(2, ["delivery", "unacknowledged"]), (3, ["conditions"]), (4, ["earliestBeginDate"])] {
            let drawnBar = bar(task)
            #expect(drawnBar?.open == true && drawnBar.map { $0.drawn && $0.width > 0 } == true, "task \(task) is drawn as pending: \(String(describing: drawnBar))")
            let wait = drawnBar?.waits.last { kinds.contains($0.kind) }
            #expect(wait.map { $0.width > 0 && abs($0.x + $0.width - now) < 2 } == true, "task \(task) waits (\(kinds)) up to now (\(now)): \(String(describing: drawnBar?.waits))")
        }
        #expect(bar(3)?.waits.contains { $0.reason.contains("no network") } == true, "the reason is the one inspect gives: \(String(describing: bar(3)?.waits))")
    }

    @Test("A container without a log gives a page that says so; bad arguments and paths exit non-zero naming them")
    func emptyContainerAndErrors() throws {
        try Self.requireBrowser()
        let container = try TestContainer()
        defer { container.tearDown() }
        let page = container.layout.root.appendingPathComponent("empty.html")
        let made = try Executable.bgtransfer.run(["timeline", "--output", page.path], in: container)
        #expect(made.status == 0, "\(made.stderr)")
        let drawn = try Self.render(page, in: container)
        #expect(drawn.noLog && !drawn.svg, "the page says there is no log: \(drawn)")

        let unwritable = container.parent.appendingPathComponent("no-such-folder/page.html").path
        let refused = try Executable.bgtransfer.run(["timeline", "--output", unwritable], in: container)
        #expect(refused.status == 73 && refused.stderr.contains(unwritable), "\(refused)")
        let unknown = try Executable.bgtransfer.run(["timeline", "--session", "com.example.nope"], in: container)
        #expect(unknown.status == 1 && unknown.stderr.contains("com.example.nope"), "\(unknown)")
        let option = try Executable.bgtransfer.run(["timeline", "--frobnicate"], in: container)
        #expect(option.status == 64 && option.stderr.contains("--frobnicate"), "\(option)")
        let missing = container.parent.appendingPathComponent("missing").path
        let noContainer = try Executable.bgtransfer.start(["--container", missing, "timeline"], in: container, passContainer: false).wait(timeout: 30)
        #expect(noContainer.status == 66 && noContainer.stderr.contains(missing), "\(noContainer)")
    }

    // MARK: The browser

    /// What the page's script measured in the browser (see `TimelineRenderer.measuringScript`).
    struct Drawn: Decodable, CustomStringConvertible {
        struct Lane: Decodable { var id: String; var kind: String; var process: String; var pid: Int32; var x: Double; var width: Double; var drawn: Bool }
        struct Wait: Decodable { var kind: String; var x: Double; var width: Double; var reason: String }
        struct Bar: Decodable { var task: String; var open: Bool; var x: Double; var width: Double; var drawn: Bool; var waits: [Wait] }
        struct Mark: Decodable { var kind: String; var task: String?; var lane: String?; var time: String; var x: Double; var drawn: Bool }
        struct Labels: Decodable { var visible: Int; var clipped: Int; var overlapping: Int }
        var svg: Bool
        var noLog: Bool
        var lanes: [Lane]
        var bars: [Bar]
        var marks: [Mark]
        var labels: Labels
        var now: Double?
        var findings: [String]
        var description: String { "svg \(svg), noLog \(noLog), \(lanes.count) lanes, \(bars.count) bars, \(marks.count) marks, labels \(labels)" }
    }

    static func requireBrowser() throws {
        try #require(FileManager.default.isExecutableFile(atPath: browser),
                     "\(browser) is missing: the timeline is checked in a real browser; .ci/run installs it (apt-get install -y chromium-headless-shell)")
    }

    /// Loads the page in chromium-headless-shell, lets its script measure the drawing, and
    /// reads the measurements back from the DOM it dumps. Also leaves a screenshot beside the
    /// page (kept with BGTRANSFER_KEEP_TEST_CONTAINERS=1).
    static func render(_ page: URL, in container: TestContainer) throws -> Drawn {
        try decodeSummary(of: try renderedDOM(page, in: container))
    }

    /// The DOM chromium-headless-shell holds once the page has loaded and its scripts have run,
    /// serialised (`--dump-dom`); a screenshot is left beside the page.
    static func renderedDOM(_ page: URL, in container: TestContainer) throws -> String {
        // Everything the browser is given lies in the container, so that its command line names
        // the container: a browser past its deadline is then ended like the test's other processes.
        let profile = container.layout.root.appendingPathComponent("browser-profile").path
        let common = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run", "--user-data-dir=\(profile)", "--window-size=1400,900"]
        let browser = Executable(name: "chromium-headless-shell", path: browser)
        let dump = try browser.start(common + ["--dump-dom", page.absoluteString], in: container, passContainer: false).wait(timeout: 30)
        try #require(dump.status == 0, "chromium-headless-shell failed (\(dump.status.map(String.init) ?? "timed out")): \(dump.stderr.suffix(2000))")
        _ = try? browser.start(common + ["--screenshot=\(page.deletingPathExtension().path).png", page.absoluteString], in: container, passContainer: false).wait(timeout: 30)
        return dump.stdout
    }

    /// What the page's script measured, read from the dumped DOM.
    static func decodeSummary(of dom: String) throws -> Drawn {
        try #require(dom.contains("data-rendered=\"yes\""), "the page's script did not run: \(dom.prefix(500))")
        guard let open = dom.range(of: "<pre id=\"render-summary\" hidden=\"\">"), let close = dom.range(of: "</pre>", range: open.upperBound..<dom.endIndex) else {
            throw TestFailure("no render summary in the dumped DOM")
        }
        let json = dom[open.upperBound..<close.lowerBound].replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&nbsp;", with: "\u{A0}").replacingOccurrences(of: "&amp;", with: "&")
        return try JSONDecoder().decode(Drawn.self, from: Data(json.utf8))
    }
}
