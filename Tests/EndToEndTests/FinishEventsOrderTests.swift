import Foundation
import TestPeers
import Testing
import TransferLogging
import BackgroundTransferTesting

/// S3.2 with held challenges: an app relaunched for tasks held on server-trust challenges
/// answers them, and the tasks it ends that way are events of the same launch:
/// `urlSessionDidFinishEvents` comes once, after their `didCompleteWithError`. Tasks it lets go
/// on end later, in a new batch: a new launch, or a wake of the app that stayed, each with its
/// own `urlSessionDidFinishEvents` after the events.
@Suite(.timeLimit(.minutes(20)))
struct FinishEventsOrderTests {
    static let fetchSession = "com.example.host.fetch.background"

    @Test("Two tasks held on server-trust challenges, their extension killed: host-app is relaunched, refuses both (-1202), and hears urlSessionDidFinishEvents once, after both didCompleteWithError")
    func finishEventsAfterAnsweredChallenges() async throws {
        try await onOwnThread {
            // The private CA's chain: no system store trusts it, nor the host's empty keychain.
            let stage = try HeldOnTrustStage(files: ["one.bin", "two.bin"], keychainTrustsCA: false)
            defer { stage.stop() }
            let container = stage.container
            let acknowledged = container.waitForCompletionHandler(of: "host-app", session: Self.fetchSession, timeout: 60)
            try #require(acknowledged != nil, "host-app was not relaunched, or did not call its completion handler")
            #expect(waitUntil { container.pendingEvents(Self.fetchSession).isEmpty }, "the completion handler acknowledged both events")

            let calls = container.logEntries(process: "host-app").filter { $0.isDidCompleteWithError || $0.isDidFinishEvents }
            let completions = calls.filter(\.isDidCompleteWithError)
            #expect(completions.compactMap(\.task).sorted() == [1, 2], "\(calls.map(\.message))")
            #expect(completions.allSatisfy { $0.completionCode == -1202 }, "\(completions.map(\.message))")
            #expect(calls.filter(\.isDidFinishEvents).count == 1, "once: \(calls.map(\.message))")
            #expect(calls.last?.isDidFinishEvents == true, "after every didCompleteWithError: \(calls.map(\.message))")
            #expect(stage.nginx.requests.isEmpty, "no request reached a server nobody trusts")
        }
    }

    /// Downloads from a server whose CA the device does not trust (nginx with the private CA),
    /// held on server-trust challenges with nobody attached: the extension that started them
    /// was killed with the questions unanswered, and the host is launched for them. With
    /// `keychainTrustsCA`, the CA is in the host's keychain and the host accepts the chains.
    struct HeldOnTrustStage {
        let nginx: Nginx
        let container: TestContainer
        let payloads: [String: Data]

        init(files: [String], keychainTrustsCA: Bool, daemonEnvironment: [String: String] = [:]) throws {
            let certificates = try TestCertificates.shared.get()
            nginx = try Nginx.start(sites: [Nginx.Site(name: "private", certificate: certificates.certificateFile(.trusted), key: certificates.keyFile(.trusted))])
            var payloads: [String: Data] = [:]
            for (index, name) in files.enumerated() {
                payloads[name] = try nginx.serve(name, bytes: 10_000 + index, seed: UInt32(index + 1))
            }
            self.payloads = payloads
            container = try TestContainer()
            try FileManager.default.createDirectory(at: container.layout.root.appendingPathComponent(DelegateEventRecorder.folder), withIntermediateDirectories: true)
            _ = try DaemonUnderTest.start(container, environment: daemonEnvironment)
            if keychainTrustsCA {
                #expect(try Executable.hostApp.run(["trust-certificate", certificates.caFile.path], in: container).status == 0)
            }

            // Offline, the tasks wait; the last extension holds the session, stopped, while the
            // tasks meet the server and are held on their challenges (asked of it, unanswered).
            #expect(try Executable.bgtransfer.run(["conditions", "--network", "offline"], in: container).status == 0)
            for name in files.dropLast() {
                let started = try Executable.fetchExtension.run(["download", nginx.url("private", name)], in: container)
                #expect(started.status == 0, "\(started.stderr)")
            }
            let holder = try Executable.fetchExtension.start(["download", nginx.url("private", files.last ?? ""), "--wait"], in: container)
            defer { holder.kill() }
            try #require(container.waitForStartedDownload(pid: holder.pid) != nil, "\(holder.stderr)")
            holder.kill(signal: SIGSTOP)
            #expect(try Executable.bgtransfer.run(["conditions", "--network", "wifi"], in: container).status == 0)
            let held = waitUntil(timeout: 30) { [container] in
                (1...files.count).allSatisfy { container.task($0, in: FinishEventsOrderTests.fetchSession)?.pendingChallenge?.serverTrust != nil }
            }
            try #require(held, "every task held on a server-trust challenge: \(container.logEntries().suffix(20).map(\.message))")
            // The extension dies with the questions unanswered: its app is launched for them.
            holder.kill(signal: SIGKILL)
            _ = holder.wait(timeout: 10)
        }

        func stop() {
            container.tearDown()
            nginx.stop()
        }

        /// Waits until every file is in Downloads/, byte for byte, and no event waits.
        func waitForEverything() -> Bool {
            waitUntil(timeout: 90) {
                payloads.allSatisfy { FileManager.default.contents(atPath: container.downloads.appendingPathComponent($0.key).path) == $0.value }
                    && container.pendingEvents(FinishEventsOrderTests.fetchSession).isEmpty
            }
        }

        /// host-app's launches and wakes, in order: each one's lines, from its
        /// `launchedForEvents` or `wokenForEvents` line on, with the process's pid.
        var hostBatches: [(pid: Int32, lines: [LogEntry])] {
            var batches: [(pid: Int32, lines: [LogEntry])] = []
            for entry in container.logEntries(process: "host-app") {
                if entry.isLaunchedForEvents || entry.isWokenForEvents {
                    batches.append((entry.pid, []))
                } else if let last = batches.indices.last(where: { batches[$0].pid == entry.pid }) {
                    batches[last].lines.append(entry)
                }
            }
            return batches
        }

        /// S3.2 in each batch of host-app's delegate lines: every finished download and completion
        /// comes before a `urlSessionDidFinishEvents` of the same batch, and none after the last.
        func checkBatches() {
            for batch in hostBatches {
                let calls = batch.lines.filter { $0.category == "delegate" }
                guard let lastFinish = calls.lastIndex(where: \.isDidFinishEvents) else {
                    #expect(!calls.contains { $0.isDidFinishDownloading || $0.isDidCompleteWithError }, "events with no urlSessionDidFinishEvents after them in host-app[\(batch.pid)]: \(calls.map(\.message))")
                    continue
                }
                #expect(lastFinish == calls.count - 1, "a delegate call after the last urlSessionDidFinishEvents of host-app[\(batch.pid)]'s batch: \(calls.map(\.message))")
                #expect(calls.filter(\.isDidFinishEvents).count == 1, "one urlSessionDidFinishEvents a batch: \(calls.map(\.message))")
            }
            // Each task once, its file before its completion.
            let calls = container.logEntries(process: "host-app", category: "delegate")
            for task in 1...payloads.count {
                let finished = calls.filter { $0.isDidFinishDownloading(task: task) }
                let completed = calls.filter { $0.isDidCompleteWithoutError(task: task, status: 200) }
                #expect(finished.count == 1 && completed.count == 1, "task \(task): \(calls.map(\.message))")
            }
        }

        /// What the delegates recorded: Apple's order in each launch and wake, nothing twice; and
        /// the session's delivery record names every event, with no call under way.
        func checkRecord() throws {
            let events = DelegateEventLog(folder: container.layout.root.appendingPathComponent(DelegateEventRecorder.folder))
            try events.checkAppleOrder()
            try events.checkNothingDeliveredTwice()
            let record = container.sessionDirectory(FinishEventsOrderTests.fetchSession).appendingPathComponent("delivered.json")
            let delivered = try JSONSerialization.jsonObject(with: Data(contentsOf: record)) as? [String: Any]
            #expect((delivered?["deliveredThrough"] as? NSNumber)?.intValue == payloads.count && delivered?["inProgress"] == nil, "\(String(describing: delivered))")
        }
    }

    @Test("Three downloads held on server-trust challenges, their extension killed: the relaunched host-app accepts them; their files and completions come in a later launch, before its own urlSessionDidFinishEvents, never after one (issue 46)")
    func acceptedTransfersEndInANewLaunch() async throws {
        try await onOwnThread {
            let stage = try HeldOnTrustStage(files: ["one.bin", "two.bin", "three.bin"], keychainTrustsCA: true)
            defer { stage.stop() }
            #expect(stage.waitForEverything(), "\(stage.container.logEntries().suffix(30).map(\.message))")
            #expect(stage.container.logEntries(process: "host-app").filter(\.isAcceptedServerTrustChallenge).count >= 1)
            let launches = Set(stage.hostBatches.map(\.pid))
            #expect(launches.count >= 2, "launched for the challenges, then for the events of the transfers they let go on")
            let woken = stage.container.logEntries(process: "host-app").filter(\.isWokenForEvents)
            #expect(woken.isEmpty, "a host that exits is never woken in place")
            stage.checkBatches()
            try stage.checkRecord()
            #expect(stage.nginx.requests.filter { $0.status == 200 }.count == 3, "\(stage.nginx.requests)")
        }
    }

    @Test("The same, with a host that stays running after it called its completion handler: it is woken in place, handleEventsForBackgroundURLSession again, the three files and completions, a second urlSessionDidFinishEvents, a second completion handler")
    func acceptedTransfersWakeAStayingApp() async throws {
        try await onOwnThread {
            let stage = try HeldOnTrustStage(files: ["one.bin", "two.bin", "three.bin"], keychainTrustsCA: true,
                                             daemonEnvironment: ["HOST_APP_STAYS_AFTER_EVENTS": "1"])
            defer { stage.stop() }
            #expect(stage.waitForEverything(), "\(stage.container.logEntries().suffix(30).map(\.message))")
            let launched = stage.container.logEntries(process: "transferd").compactMap { $0.launched("com.example.host") }
            defer { for pid in launched { kill(pid, SIGKILL) } }
            #expect(launched.count == 1, "one launch, woken in place: \(launched)")
            let batches = stage.hostBatches
            #expect(batches.count >= 2 && Set(batches.map(\.pid)).count == 1, "\(batches.map { ($0.pid, $0.lines.map(\.message)) })")
            let handled = waitUntil { stage.hostBatches.dropFirst().allSatisfy { $0.lines.contains { $0.isCompletionHandlerCall } } }
            #expect(handled, "each wake ends with its completion handler")
            stage.checkBatches()
            try stage.checkRecord()
        }
    }
}
