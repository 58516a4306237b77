import Foundation
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer
import ContainerInspection
import Digests

/// Device conditions, discretionary work, delayed requests, priorities and coalescing, with
/// the conditions changed by the real `bgtransfer conditions` against the running daemon (S5).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class SchedulingTests: InProcessSuite, @unchecked Sendable {

    /// `bgtransfer conditions …`; returns once the daemon has applied them.
    func setConditions(_ arguments: String...) throws {
        try setConditions(arguments)
    }

    func setConditions(_ arguments: [String]) throws {
        let outcome = try Executable.bgtransfer.run(["conditions"] + arguments, in: container)
        #expect(outcome.status == 0, "bgtransfer conditions \(arguments): \(outcome.stderr)")
    }

    /// What holds a task back, as `bgtransfer inspect` shows it.
    func waitingReason(_ task: URLSessionTask, in session: String) -> String? {
        ContainerSnapshot.read(container.layout, sessionFilter: session).sessions.first?.waiting[String(task.taskIdentifier)]
    }

    func requests(to path: String) -> [RecordedRequest] {
        server.requests.filter { $0.path == path }
    }

    @Test("Offline: a resumed task waits, gets taskIsWaitingForConnectivity once, sends nothing, and runs when a network returns (S5.2, S5.3)")
    func offlineTaskWaits() throws {
        server.serve("/offline.bin", data: testPayload(size: 256 << 10))
        try setConditions("--network", "offline")
        let delegate = RecordingDelegate()
        let session = fixture.session("offline", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/offline.bin"))
        task.resume()
        #expect(delegate.wait { $0 == .waitingForConnectivity(task: task.taskIdentifier) })
        #expect(waitingReason(task, in: "offline") == "waiting for connectivity: no network")
        #expect(requests(to: "/offline.bin").isEmpty, "nothing reaches the server while offline")
        #expect(!delegate.calls.contains { if case .completed = $0 { return true } else { return false } }, "background tasks never fail for lack of network")

        try setConditions("--network", "cellular") // cellular access is allowed by default
        #expect(delegate.wait(for: completed(task, status: 200)), "\(delegate.calls)")
        #expect(delegate.calls.filter { $0 == .waitingForConnectivity(task: task.taskIdentifier) }.count == 1, "told once per task")
        #expect(requests(to: "/offline.bin").count == 1)
        session.invalidateAndCancel()
    }

    @Test("Going offline mid-transfer pauses it; when the network returns it resumes from its offset, the file whole")
    func offlineMidTransferResumes() throws {
        let payload = testPayload(size: 4 << 20, seed: 9)
        var slow = RouteOptions()
        slow.bytesPerSecond = 2 << 20
        server.serve("/paused.bin", data: payload, options: slow)
        let delegate = RecordingDelegate()
        let session = fixture.session("paused", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/paused.bin"))
        task.resume()
        #expect(delegate.wait { if case .wroteData(task.taskIdentifier, let total, _) = $0 { return total >= 512 << 10 } else { return false } })
        try setConditions("--network", "offline")
        #expect(container.waitForLog { $0.process == "transferd" && $0.message == "paused: waiting for connectivity: no network" } != nil)
        #expect(waitingReason(task, in: "paused") == "waiting for connectivity: no network")
        let received = ContainerSnapshot.read(container.layout, sessionFilter: "paused").sessions.first?.tasks.first?.countOfBytesReceived ?? 0
        #expect(received > 0 && received < Int64(payload.count), "the bytes received so far are kept: \(received)")

        server.serve("/paused.bin", data: payload)
        try setConditions("--network", "wifi")
        #expect(delegate.wait(for: completed(task, status: 206)), "the response is the resumed request's: \(delegate.calls)")
        #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload))
        let ranges = requests(to: "/paused.bin").map { $0.header("Range") }
        #expect(ranges.count == 2, "one request before the pause, one after: \(ranges)")
        #expect(ranges.last??.hasPrefix("bytes=") == true && ranges.last != "bytes=0-", "resumed from its offset: \(ranges)")
        session.invalidateAndCancel()
    }

    /// A network a task may not use, the option that forbids it, and the conditions that end it.
    struct NetworkRule: Sendable, CustomTestStringConvertible {
        /// The option that forbids the network: in the configuration, or in the request.
        enum Option: Sendable { case cellular, requestCellular, expensive, constrained }
        var name: String
        var option: Option
        var conditions: [String]
        var reason: String
        var testDescription: String { name }
    }

    @Test("A task waits on a network it may not use while other tasks run; it runs when a suitable network appears (S5)", arguments: [
        NetworkRule(name: "allowsCellularAccess = false on cellular", option: .cellular, conditions: ["--network", "cellular"], reason: "only cellular, and cellular access is not allowed"),
        NetworkRule(name: "URLRequest.allowsCellularAccess = false on cellular", option: .requestCellular, conditions: ["--network", "cellular"], reason: "only cellular, and cellular access is not allowed"),
        NetworkRule(name: "allowsExpensiveNetworkAccess = false on an expensive network", option: .expensive, conditions: ["--expensive", "on"], reason: "the network is expensive, and expensive network access is not allowed"),
        NetworkRule(name: "allowsConstrainedNetworkAccess = false on a constrained network", option: .constrained, conditions: ["--constrained", "on"], reason: "the network is constrained (Low Data Mode), and constrained network access is not allowed"),
    ])
    func networkAccessRules(_ rule: NetworkRule) throws {
        server.serve("/strict.bin", data: testPayload(size: 64 << 10, seed: 1))
        server.serve("/relaxed.bin", data: testPayload(size: 64 << 10, seed: 2))
        let strictDelegate = RecordingDelegate()
        let strict = fixture.session("strict", delegate: strictDelegate) { configuration in
            switch rule.option {
            case .cellular: configuration.allowsCellularAccess = false
            case .expensive: configuration.allowsExpensiveNetworkAccess = false
            case .constrained: configuration.allowsConstrainedNetworkAccess = false
            case .requestCellular: break
            }
        }
        let relaxedDelegate = RecordingDelegate()
        let relaxed = fixture.session("relaxed", delegate: relaxedDelegate)
        try setConditions(rule.conditions)

        var request = URLRequest(url: server.url(for: "/strict.bin"))
        if rule.option == .requestCellular { request.allowsCellularAccess = false }
        let waiting = strict.downloadTask(with: request)
        waiting.resume()
        let running = relaxed.downloadTask(with: server.url(for: "/relaxed.bin"))
        running.resume()
        #expect(relaxedDelegate.wait(for: completed(running, status: 200)), "a task that may use the network runs: \(relaxedDelegate.calls)")
        #expect(strictDelegate.wait { $0 == .waitingForConnectivity(task: waiting.taskIdentifier) })
        #expect(waitingReason(waiting, in: "strict") == "waiting for connectivity: \(rule.reason)")
        #expect(requests(to: "/strict.bin").isEmpty)

        try setConditions("--network", "wifi", "--expensive", "off", "--constrained", "off")
        #expect(strictDelegate.wait(for: completed(waiting, status: 200)), "\(strictDelegate.calls)")
        strict.invalidateAndCancel()
        relaxed.invalidateAndCancel()
    }

    @Test("A discretionary task waits for Wi-Fi, power and the end of Low Power Mode, while others run (S5 isDiscretionary)")
    func discretionaryWaitsForGoodConditions() throws {
        server.serve("/later.bin", data: testPayload(size: 64 << 10, seed: 3))
        server.serve("/now.bin", data: testPayload(size: 64 << 10, seed: 4))
        try setConditions("--power", "battery")
        let delegate = RecordingDelegate()
        let discretionary = fixture.session("discretionary", delegate: delegate) { $0.isDiscretionary = true }
        let urgentDelegate = RecordingDelegate()
        let urgent = fixture.session("urgent", delegate: urgentDelegate)
        let later = discretionary.downloadTask(with: server.url(for: "/later.bin"))
        later.resume()
        let now = urgent.downloadTask(with: server.url(for: "/now.bin"))
        now.resume()
        #expect(urgentDelegate.wait(for: completed(now, status: 200)), "a task that is not discretionary runs on battery")
        #expect(waitingReason(later, in: "discretionary") == "discretionary: waiting for power")

        try setConditions("--power", "charging", "--low-power", "on")
        #expect(waitingReason(later, in: "discretionary") == "discretionary: waiting for Low Power Mode to end")
        try setConditions("--low-power", "off", "--network", "cellular")
        #expect(waitingReason(later, in: "discretionary") == "discretionary: waiting for Wi-Fi")
        #expect(requests(to: "/later.bin").isEmpty)
        #expect(!delegate.calls.contains(.waitingForConnectivity(task: later.taskIdentifier)), "waiting for good conditions is not waiting for connectivity")

        try setConditions("--network", "wifi")
        #expect(delegate.wait(for: completed(later, status: 200)), "\(delegate.calls)")
        discretionary.invalidateAndCancel()
        urgent.invalidateAndCancel()
    }

    @Test("earliestBeginDate holds the request until then; willBeginDelayedRequest .continueLoading lets it go (S5, S5.1)")
    func earliestBeginDateContinues() throws {
        server.serve("/dated.bin", data: testPayload(size: 32 << 10))
        let delegate = RecordingDelegate()
        let session = fixture.session("dated", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/dated.bin"))
        let begin = Date().addingTimeInterval(1.5)
        task.earliestBeginDate = begin
        task.resume()
        #expect(session.waitUntilDurable(), "the daemon has the task before its record is read")
        #expect(waitingReason(task, in: "dated")?.hasPrefix("waiting for earliestBeginDate") == true)
        #expect(delegate.wait(for: completed(task, status: 200)), "\(delegate.calls)")
        #expect(delegate.calls.first == .willBeginDelayedRequest(task: task.taskIdentifier, url: server.url(for: "/dated.bin").absoluteString))
        let sent = try #require(requests(to: "/dated.bin").first?.time)
        #expect(sent >= begin.addingTimeInterval(-0.01), "not before earliestBeginDate: sent \(sent), begin \(begin)")
        session.invalidateAndCancel()
    }

    @Test("willBeginDelayedRequest .useNewRequest sends the new request instead (S5.1)")
    func delayedRequestReplaced() throws {
        server.serve("/old.bin", data: Data("old".utf8))
        let fresh = testPayload(size: 48 << 10, seed: 8)
        server.serve("/new.bin", data: fresh)
        let delegate = RecordingDelegate()
        let newURL = server.url(for: "/new.bin")
        delegate.delayedRequestAnswer = { _ in (.useNewRequest, URLRequest(url: newURL)) }
        let session = fixture.session("replaced", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/old.bin"))
        task.earliestBeginDate = Date().addingTimeInterval(0.3)
        task.resume()
        #expect(delegate.wait(for: completed(task, status: 200)), "\(delegate.calls)")
        #expect(delegate.calls.contains(.finishedDownloading(task: task.taskIdentifier, existedDuringCall: true, size: Int64(fresh.count))))
        #expect(requests(to: "/old.bin").isEmpty)
        #expect(requests(to: "/new.bin").count == 1)
        #expect(task.originalRequest?.url?.path == "/old.bin", "originalRequest stays what the task was made with")
        session.invalidateAndCancel()
    }

    @Test("willBeginDelayedRequest .cancel ends the task with -999 and sends nothing (S5.1)")
    func delayedRequestCancelled() throws {
        server.serve("/never.bin", data: Data("never".utf8))
        let delegate = RecordingDelegate()
        delegate.delayedRequestAnswer = { _ in (.cancel, nil) }
        let session = fixture.session("cancelled", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/never.bin"))
        task.earliestBeginDate = Date().addingTimeInterval(0.3)
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, -999, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(requests(to: "/never.bin").isEmpty)
        session.invalidateAndCancel()
    }

    @Test("Behind a per-host limit of 1, waiting tasks start by priority, highest first (S5 priority, httpMaximumConnectionsPerHost)")
    func prioritiesOrderTheQueue() throws {
        let priorities: [(path: String, priority: Float)] = [("/p1", 0.1), ("/p9", 0.9), ("/p5", 0.5), ("/p7", 0.7)]
        for (index, item) in priorities.enumerated() { server.serve(item.path, data: testPayload(size: 16 << 10, seed: UInt64(index + 1))) }
        try setConditions("--network", "offline")
        let delegate = RecordingDelegate()
        let session = fixture.session("priorities", delegate: delegate) { $0.httpMaximumConnectionsPerHost = 1 }
        var tasks: [URLSessionDownloadTask] = []
        for item in priorities {
            let task = session.downloadTask(with: server.url(for: item.path))
            task.priority = item.priority
            task.resume()
            tasks.append(task)
        }
        #expect(waitUntil { delegate.calls.filter { if case .waitingForConnectivity = $0 { return true } else { return false } }.count == tasks.count })
        #expect(tasks.map(\.priority) == priorities.map(\.priority))
        try setConditions("--network", "wifi")
        for task in tasks { #expect(delegate.wait(for: completed(task, status: 200))) }
        #expect(server.requests.map(\.path) == ["/p9", "/p7", "/p5", "/p1"], "one at a time, highest priority first")
        session.invalidateAndCancel()
    }

    @Test("coalescesIdenticalDownloads: three tasks for one GET fetch it once; each gets its own progress, file and completion (S7.4)")
    func identicalDownloadsFetchedOnce() throws {
        let payload = testPayload(size: 2 << 20, seed: 11)
        var slow = RouteOptions()
        slow.bytesPerSecond = 8 << 20
        server.serve("/shared.bin", data: payload, options: slow)
        let delegate = RecordingDelegate()
        let session = fixture.session("coalesced", delegate: delegate) { $0.coalescesIdenticalDownloads = true }
        let tasks = (0..<3).map { _ in session.downloadTask(with: server.url(for: "/shared.bin")) }
        for task in tasks { task.resume() }
        for task in tasks {
            #expect(delegate.wait(for: completed(task, status: 200)), "\(delegate.calls)")
            #expect(delegate.calls.contains(.finishedDownloading(task: task.taskIdentifier, existedDuringCall: true, size: Int64(payload.count))))
            #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload))
            #expect(delegate.calls.contains { if case .wroteData(task.taskIdentifier, _, _) = $0 { return true } else { return false } }, "task \(task.taskIdentifier) got progress")
        }
        #expect(Set(delegate.locations).count == 3, "each task gets its own file")
        #expect(requests(to: "/shared.bin").count == 1, "fetched once")
        session.invalidateAndCancel()

        // Without the option, each task fetches for itself.
        let plainDelegate = RecordingDelegate()
        let plain = fixture.session("uncoalesced", delegate: plainDelegate)
        let pair = (0..<2).map { _ in plain.downloadTask(with: server.url(for: "/shared.bin")) }
        for task in pair { task.resume() }
        for task in pair { #expect(plainDelegate.wait(for: completed(task, status: 200))) }
        #expect(requests(to: "/shared.bin").count == 3)
        plain.invalidateAndCancel()
    }

    @Test("A request idle for timeoutIntervalForRequest is retried, not failed (S6.4)")
    func idleRequestIsRetried() throws {
        let silent = try SilentListener()
        defer { silent.close() }
        let delegate = RecordingDelegate()
        let session = fixture.session("idle", delegate: delegate) { $0.timeoutIntervalForRequest = 1 }
        let task = session.downloadTask(with: URL(string: "http://127.0.0.1:\(silent.port)/silent")!)
        task.resume()
        let retried = container.waitForRetries(2, of: task.taskIdentifier, in: "idle", family: InProcess.family.rawValue)
        #expect(retried != nil, "the daemon retries after each idle timeout")
        #expect(retried?.retryCause.map { if case .networkTrouble(TransferFailure.timedOut, _) = $0 { true } else { false } } == true, "\(String(describing: retried?.retryCause))")
        #expect(!delegate.calls.contains { if case .completed = $0 { return true } else { return false } }, "no failure reaches the delegate while the resource timeout lasts")
        task.cancel()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, -999, _) = $0 { return true } else { return false } })
        session.invalidateAndCancel()
    }

}
}

/// A TCP listener on 127.0.0.1 that accepts connections (through the kernel's backlog) and
/// never answers: a server that has gone quiet.
final class SilentListener: @unchecked Sendable {
    let descriptor: Int32
    let port: UInt16

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 16) == 0 else {
            Glibc.close(fd)
            throw TestFailure("bind/listen: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        descriptor = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    func close() { _ = Glibc.close(descriptor) }
}
