#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import ContainerInspection
import TransferCoding
import TransferLogging

/// Appends raw bytes to a file (as another writer would).
func appendRaw(_ bytes: Data, to path: String) throws {
    if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
    let handle = try #require(FileHandle(forWritingAtPath: path))
    defer { try? handle.close() }
    try handle.seekToEnd()
    try handle.write(contentsOf: bytes)
}

@Suite("TransferLog and LogFollower")
struct TransferLogTests {
    static var defaultLevel: Bool { ProcessInfo.processInfo.environment["BGTRANSFER_LOG_LEVEL"] == nil }

    @Test("a line's typed event (kind, app, pid, code) is written as an `event` member and read back; a line without one reads as nil")
    func eventRoundTrip() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let log = TransferLog(layout: layout, process: "unit-test", subsystem: "com.example.tests")
        log.notice("relaunch", "launched com.example.host (pid 42)", session: "com.example.s", event: LogEvent(.launched, app: "com.example.host", pid: 42))
        log.error("session", "cancelTask failed", event: LogEvent(.requestFailed, code: -1011))
        log.notice("scheduler", "no event here")
        let entries = TransferLog.entries(layout: layout)
        try #require(entries.count == 3)
        #expect(entries[0].event == LogEvent(.launched, app: "com.example.host", pid: 42))
        #expect(entries[1].event == LogEvent(.requestFailed, code: -1011))
        #expect(entries[2].event == nil)
        // What a script reading the file finds: the README names the member and its kinds.
        let first = try String(contentsOfFile: layout.logFile.path, encoding: .utf8).split(separator: "\n")[0]
        let object = try #require(try JSONSerialization.jsonObject(with: Data(first.utf8)) as? [String: Any])
        let event = try #require(object["event"] as? [String: Any])
        #expect(event["kind"] as? String == "launched" && event["app"] as? String == "com.example.host" && event["pid"] as? Int == 42)
    }

    @Test("entries written at notice and error are read back with process, pid, category, session and task")
    func writeAndRead() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let log = TransferLog(layout: layout, process: "unit-test", subsystem: "com.example.tests")
        log.notice("scheduler", "task started", session: "com.example.s", task: 3)
        log.error("transport", "connection lost\nsecond line \"quoted\"")
        let entries = TransferLog.entries(layout: layout)
        #expect(entries.count == 2)
        guard entries.count == 2 else { return }
        #expect(entries[0].process == "unit-test")
        #expect(entries[0].pid == getpid())
        #expect(entries[0].subsystem == "com.example.tests")
        #expect(entries[0].category == "scheduler")
        #expect(entries[0].level == .notice)
        #expect(entries[0].message == "task started")
        #expect(entries[0].session == "com.example.s")
        #expect(entries[0].task == 3)
        #expect(abs(entries[0].time.timeIntervalSinceNow) < 60)
        #expect(entries[1].level == .error)
        #expect(entries[1].category == "transport")
        #expect(entries[1].message == "connection lost\nsecond line \"quoted\"")
        #expect(entries[1].session == nil)
        #expect(entries[1].task == nil)
        // One JSON object per line.
        let text = try String(contentsOfFile: layout.logFile.path, encoding: .utf8)
        #expect(text.split(separator: "\n").count == 2)
        #expect(text.hasSuffix("\n"))
    }

    @Test("debug and info are not written by default", .enabled(if: TransferLogTests.defaultLevel, "BGTRANSFER_LOG_LEVEL is set"))
    func defaultLevelFilters() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let log = TransferLog(layout: layout, process: "unit-test", subsystem: "s")
        log.debug("c", "debug line")
        log.info("c", "info line")
        #expect(TransferLog.entries(layout: layout).isEmpty)
        log.notice("c", "notice line")
        #expect(TransferLog.entries(layout: layout).map(\.message) == ["notice line"])
    }

    @Test("a line written by hand reads back exactly, whatever the message holds (quotes, backslashes, newlines, control characters, slashes, emoji)")
    func handWrittenLine() throws {
        let message = "say \"hi\" \\ path/to/file\nnext\tline\r\u{1}\u{1f} ✓ 🚀"
        for (session, task) in [(String?.some("com.example.s"), Int?.some(42)), (nil, nil)] {
            let entry = LogEntry(time: Date(timeIntervalSince1970: 1_795_000_000.123), process: "transferd", pid: 77, subsystem: "com.example.transferd",
                                 category: "tasks", level: .notice, message: message, session: session, task: task)
            let line = entry.jsonLine
            #expect(!line.contains(UInt8(ascii: "\n")), "one line")
            let read = try RecordCoding.decoder().decode(LogEntry.self, from: line)
            #expect(read.message == message)
            #expect(read.session == session && read.task == task && read.pid == 77 && read.level == .notice && read.category == "tasks")
            #expect(read.time == entry.time)
            let keys = try #require(JSONSerialization.jsonObject(with: line) as? [String: Any]).keys.sorted()
            var expected = ["category", "level", "message", "pid", "process", "session", "subsystem", "task", "time"]
            if session == nil { expected.removeAll { $0 == "session" } }
            if task == nil { expected.removeAll { $0 == "task" } }
            #expect(keys == expected)
        }
    }

    @Test("log levels order from debug to fault")
    func levelOrder() {
        #expect(LogLevel.allCases == [.debug, .info, .notice, .error, .fault])
        #expect(LogLevel.allCases == LogLevel.allCases.sorted())
        #expect(LogLevel.debug < .notice && LogLevel.error < .fault)
    }

    @Test("many threads logging at once leave only whole lines")
    func concurrentWriters() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let logs = (0..<4).map { TransferLog(layout: layout, process: "writer\($0)", subsystem: "s") }
        await withTaskGroup(of: Void.self) { group in
            for (index, log) in logs.enumerated() {
                group.addTask {
                    for line in 0..<100 { log.notice("c", String(repeating: "\(index)", count: 500) + " \(line)", task: line) }
                }
            }
        }
        let entries = TransferLog.entries(layout: layout)
        #expect(entries.count == 400)
        for index in 0..<4 {
            #expect(entries.filter { $0.process == "writer\(index)" }.count == 100)
        }
        let text = try String(contentsOfFile: layout.logFile.path, encoding: .utf8)
        #expect(text.split(separator: "\n").count == 400)
    }

    @Test("LogFollower returns only the lines written since it started, each once")
    func followerNewLines() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let log = TransferLog(layout: layout, process: "unit-test", subsystem: "s")
        log.notice("c", "before")
        var follower = LogFollower(layout: layout)
        #expect(follower.next().isEmpty)
        log.notice("c", "after 1")
        log.notice("c", "after 2")
        #expect(follower.next().map(\.message) == ["after 1", "after 2"])
        #expect(follower.next().isEmpty)
        log.notice("c", "after 3")
        #expect(follower.next().map(\.message) == ["after 3"])

        var fromStart = LogFollower(layout: layout, fromStart: true)
        #expect(fromStart.next().map(\.message) == ["before", "after 1", "after 2", "after 3"])
    }

    @Test("LogFollower on a log that does not exist yet picks it up when it appears")
    func followerMissingLog() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        var follower = LogFollower(layout: layout)
        #expect(follower.next().isEmpty)
        TransferLog(layout: layout, process: "unit-test", subsystem: "s").notice("c", "first")
        #expect(follower.next().map(\.message) == ["first"])
    }

    @Test("LogFollower holds back a partial line until its end is written")
    func followerPartialLine() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let path = layout.logFile.path
        var follower = LogFollower(layout: layout)
        let line = Data(#"{"category":"split","level":"notice","message":"half and half","pid":42,"process":"raw","subsystem":"s","time":"2023-11-14T22:13:20.125Z"}"#.utf8) + Data([0x0A])
        let cut = 37
        try appendRaw(line.prefix(cut), to: path)
        #expect(follower.next().isEmpty)
        #expect(follower.next().isEmpty)
        try appendRaw(line.dropFirst(cut), to: path)
        let entries = follower.next()
        #expect(entries.count == 1)
        #expect(entries.first?.message == "half and half")
        #expect(entries.first?.pid == 42)
        #expect(entries.first?.process == "raw")
        #expect(entries.first?.time == exactDate)
        #expect(follower.next().isEmpty)

        // A garbage line is skipped; the good line after it is returned.
        try appendRaw(Data("not json\n".utf8) + line, to: path)
        #expect(follower.next().map(\.message) == ["half and half"])
    }
}
