import Foundation
import Testing
import LoopbackServer

/// At start-up the daemon removes the files in its sessions' caches that no unfinished task
/// and no undelivered event names (what power cuts and kills leave behind), and nothing else.
@Suite(.timeLimit(.minutes(20)))
struct CacheSweepTests {
    static let fetchSession = "com.example.host.fetch.background"
    static let hostSession = "com.example.host.background"

    @Test("Files named by no task or event are gone once a restarted transferd answers; unfinished downloads, an undelivered file and resume data stay, and every download arrives whole")
    func sweepsOrphansKeepsLiveFiles() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let server = try LoopbackServer()
        defer { server.stop() }
        var slow = RouteOptions()
        slow.bytesPerSecond = 1 << 20
        let payloads = ["event.bin": testPayload(size: 300_000, seed: 61), "a.bin": testPayload(size: 4 << 20, seed: 62), "b.bin": testPayload(size: 3 << 20, seed: 63)]
        for (name, data) in payloads { server.serve("/\(name)", data: data, options: slow) }
        let daemon = try DaemonUnderTest.start(container)

        // An undelivered event: the extension holds its session but is stopped, so it never acknowledges.
        let holder = try Executable.fetchExtension.start(["download", server.url(for: "/event.bin").absoluteString, "--wait"], in: container)
        defer { holder.kill() }
        try #require(container.waitForStartedDownload(pid: holder.pid) != nil, "the extension did not start its download: \(holder.stderr)")
        sendSignal(holder.pid, SIGSTOP)
        let fetchCache = cache(container, Self.fetchSession), hostCache = cache(container, Self.hostSession)
        // The body takes its final name right after its event's line is on disk (before anyone
        // is told of the event): the journal can say so a moment before the name is there.
        let finished = fetchCache.appendingPathComponent("CFNetworkDownload_1.tmp")
        try #require(waitUntil(timeout: 30) { container.pendingEvents(Self.fetchSession) == [1] && FileManager.default.fileExists(atPath: finished.path) },
                     "the download's event is not pending with its file: events \(container.pendingEvents(Self.fetchSession))")

        // Two downloads part-way in the host's session, then a SIGKILL.
        for name in ["a.bin", "b.bin"] {
            #expect(try Executable.hostApp.run(["download", server.url(for: "/\(name)").absoluteString], in: container).status == 0)
        }
        let partials = [hostCache.appendingPathComponent("task-1.partial"), hostCache.appendingPathComponent("task-2.partial")]
        try #require(waitUntil(timeout: 30) { partials.allSatisfy { size($0) > 256 << 10 } }, "the downloads did not start")
        daemon.process.kill(signal: SIGKILL)
        _ = daemon.process.wait(timeout: 10)
        holder.kill()
        _ = holder.wait(timeout: 10)

        // What earlier cuts and kills would have left: files of tasks and events long gone.
        let orphans = ["task-7.partial", "task-7.partial.response", "task-8.upload", "task-8.upload-response", "CFNetworkDownload_9.tmp"].flatMap { name in
            [fetchCache.appendingPathComponent(name), hostCache.appendingPathComponent(name)]
        } + [hostCache.appendingPathComponent("CFNetworkDownload_3.tmp"), fetchCache.appendingPathComponent("task-1.partial")]
        for orphan in orphans { try Data("left over".utf8).write(to: orphan) }
        // Not the daemon's to judge: resume data handed to an app names its file; a file of someone else's.
        let kept = [hostCache.appendingPathComponent("resume-\(UUID().uuidString).partial"), hostCache.appendingPathComponent("notes.txt")]
        for file in kept { try Data("keep".utf8).write(to: file) }

        _ = try DaemonUnderTest.start(container)
        let left = orphans.filter { FileManager.default.fileExists(atPath: $0.path) }
        #expect(left.isEmpty, "files named by no task or event are still there: \(left.map(\.lastPathComponent))")
        #expect(kept.allSatisfy { FileManager.default.fileExists(atPath: $0.path) }, "resume data's file or a file not the daemon's was removed")
        #expect(FileManager.default.fileExists(atPath: finished.path), "the undelivered event's file was removed")
        #expect(partials.allSatisfy { FileManager.default.fileExists(atPath: $0.path) }, "an unfinished download's partial data was removed")

        let whole = waitUntil(timeout: 60) {
            payloads.allSatisfy { FileManager.default.contents(atPath: container.downloads.appendingPathComponent($0.key).path) == $0.value }
        }
        #expect(whole, "not every download arrived whole: \((try? FileManager.default.contentsOfDirectory(atPath: container.downloads.path)) ?? [])")
        for name in ["a.bin", "b.bin"] {
            let range = server.requests.last { $0.path == "/\(name)" }?.header("Range")
            #expect(range != nil && range != "bytes=0-", "\(name) was fetched again from zero, not resumed from its partial data: Range \(range ?? "none")")
        }
        #expect(server.requests.filter { $0.path == "/event.bin" }.count == 1, "the finished download was fetched again")
    }

    private func cache(_ container: TestContainer, _ session: String) -> URL {
        container.appGroup.appendingPathComponent("Library/Caches/BackgroundTransfer/\(session)")
    }

    private func size(_ file: URL) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: file.path))?[.size] as? NSNumber)?.intValue ?? 0
    }
}
