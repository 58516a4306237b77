import Foundation
import Testing
import LoopbackServer
@testable import bgtransfer
import TransferLogging

/// The timeline shows text that other processes of the container wrote: an app's task
/// descriptions and URLs, process names and messages in the shared log. A page made from a
/// hostile container must show that text as text and run none of it, in a real browser.
@Suite(.timeLimit(.minutes(20)))
struct TimelineHostileTextTests {
    /// Markup that runs a script when it is not escaped: in an element, in an attribute
    /// (single- or double-quoted), in the title, and at once (`<script>`) or on an event.
    static func hostile(_ field: String) -> String {
        #"\#(field) <img src=x onerror="document.title='pwned by \#(field)'"> & "quoted" 'single' "#
            + #"</title></text></script><script>document.title='pwned by \#(field)'</script><svg onload="document.title='pwned'"></svg>' onmouseover='x'"#
    }

    @Test("escape quotes <, >, &, \" and ' (a value is safe in text and in either kind of attribute)")
    func escape() {
        #expect(TimelineRenderer.escape(#"<a href='x' title="y">&amp;</a>"#) == "&lt;a href=&#39;x&#39; title=&quot;y&quot;&gt;&amp;amp;&lt;/a&gt;")
        #expect(TimelineRenderer.escape("plain text, naïve ✓") == "plain text, naïve ✓")
    }

    @Test("A hostile task description, URL, process name and log message are drawn as text: chromium runs none of them and the page's own script still does")
    func hostileContainer() throws {
        try TimelineTests.requireBrowser()
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        server.serve("/report.bin", data: testPayload(size: 4 << 10))
        _ = try DaemonUnderTest.start(container, environment: ["BGTRANSFER_LOG_LEVEL": "info"])
        let url = server.url(for: "/report.bin").absoluteString + "?a=1&b='2'&c=%22%3Cscript%3E"
        let fetched = try Executable.fetchExtension.start(["download", url, "--description", Self.hostile("description")], in: container).wait(timeout: 30)
        try #require(fetched.status == 0, "fetch-extension: \(fetched.stderr)")
        try #require(container.waitForLog { $0.task == 1 && $0.message.hasPrefix("finished") } != nil, "the download did not finish")
        // Any process of the container may write the shared log, under any name.
        let log = TransferLog(layout: container.layout, process: Self.hostile("process"), subsystem: "com.example.hostile")
        log.error("relaunch", Self.hostile("message"), session: TimelineTests.fetchSession, task: 1)
        log.error("relaunch", Self.hostile("lane"))

        let page = container.layout.root.appendingPathComponent("hostile.html")
        let made = try Executable.bgtransfer.run(["timeline", "--output", page.path], in: container)
        try #require(made.status == 0, "bgtransfer timeline: \(made.stderr)")
        let dom = try TimelineTests.renderedDOM(page, in: container)

        let title = dom.range(of: "<title>").flatMap { open in dom.range(of: "</title>", range: open.upperBound..<dom.endIndex).map { dom[open.upperBound..<$0.lowerBound] } }
        #expect(title == "Background transfer timeline", "no script of theirs ran: the title is \(String(describing: title))")
        // Markup of theirs, outside attribute values (which the serialiser always double-quotes).
        let markup = dom.replacingOccurrences(of: #"="[^"]*""#, with: "=\"\"", options: .regularExpression)
        for element in ["<img", "<script>document", "<svg onload", " onmouseover=\"\""] {
            #expect(!markup.contains(element), "no \(element) element or attribute of theirs in the page")
        }
        for field in ["description", "process", "message"] {
            #expect(dom.contains("\(field) &lt;img src=x onerror="), "the \(field) is shown, as text")
        }
        #expect(dom.contains("?a=1&amp;b='2'&amp;c=%22%3Cscript%3E"), "the URL is shown, as text")
        let drawn = try TimelineTests.decodeSummary(of: dom)
        #expect(drawn.svg, "the page's own script ran and measured the drawing: \(drawn)")
    }
}
