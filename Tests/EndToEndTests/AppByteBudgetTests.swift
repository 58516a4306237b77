import Foundation
import Testing
import TransferContainer
import TransferPOSIX

/// The bytes one app may make the daemon hold, task records and undelivered events together
/// (issue 45, item 2): at the budget a task is taken, one byte past it is refused with -1011
/// naming the app and the budget; events never acknowledged keep counting, and hold no
/// giant request. Real daemon, a raw client as a hostile app would be; every wait bounded.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct AppByteBudgetTests {
    static let app = "com.example.tests"

    /// A download creation whose task counts exactly `bytes` (`HeldBytes`), its URL padded.
    static func creation(counting bytes: Int, path: String = "/budget") throws -> TaskCreation {
        let stem = "http://127.0.0.1:9\(path)?q="
        var creation = TaskCreation(kind: .download, request: RequestRecord(url: stem))
        let padding = bytes - HeldBytes.of(creation)
        try #require(padding >= 0, "\(bytes) bytes is less than a task counts")
        creation.request.url = stem + String(repeating: "a", count: padding)
        try #require(HeldBytes.of(creation) == bytes)
        return creation
    }

    @Test("With a budget of 60,000 bytes, a task counting 60,001 is refused with -1011 naming the app and the budget, one counting 60,000 is taken; its cancelled event, unacknowledged, still counts; acknowledged, it makes room")
    func budgetAtAndOnePast() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let budget = 60_000
        _ = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.1", "--max-bytes-per-app", String(budget)])
        let session = try SessionIdentifier("\(Self.app).budget")
        let client = try RawClient.attached(container, as: testIdentity(Self.app), session: session.rawValue)
        defer { client.close() }

        let onePast = try client.request(.createTask(session: session, try Self.creation(counting: budget + 1)))
        guard case .failure(let refusal) = onePast else {
            Issue.record("a task one byte past the budget was answered \(onePast)")
            return
        }
        #expect(refusal.code == -1011 && refusal.message.contains(Self.app) && refusal.message.contains("\(budget) bytes"),
                "names the app and the budget: \(refusal)")

        let atTheBound = try client.request(.createTask(session: session, try Self.creation(counting: budget)))
        guard case .task(let task) = atTheBound else {
            Issue.record("a task counting exactly the budget was answered \(atTheBound)")
            return
        }
        let small = try Self.creation(counting: HeldBytes.perRecord + 100, path: "/s")
        #expect(try client.request(.createTask(session: session, small)).failureMessage?.contains(Self.app) == true,
                "the app is at its budget: the next task is refused")

        // Cancelled, the task becomes an event the app has not acknowledged: it still counts.
        guard case .cancelled = try client.request(.cancelTask(session: session, task: task.taskIdentifier, produceResumeData: false)) else {
            throw TestFailure("the task was not cancelled")
        }
        #expect(try client.request(.createTask(session: session, small)).failureMessage?.contains(Self.app) == true,
                "an unacknowledged event counts")
        let journal = try JournalContents.read(session: container.sessionDirectory(session.rawValue, family: testIdentity(Self.app).family))
        let event = try #require(journal.events.values.first)
        guard case .ok = try client.request(.acknowledge(session: session, through: event.number)) else {
            throw TestFailure("the acknowledgement was refused")
        }
        let after = try client.request(.createTask(session: session, small))
        #expect({ if case .task = after { true } else { false } }(), "an acknowledged event makes room: \(after)")
    }

    @Test("A cancelled task's event keeps request headers of 8 KiB and leaves out those one byte past (and 250 KB): it keeps the URL and says the headers were left out")
    func eventsLeaveGiantHeadersOut() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        _ = try DaemonUnderTest.start(container)
        let session = try SessionIdentifier("\(Self.app).compact")
        let client = try RawClient.attached(container, as: testIdentity(Self.app), session: session.rawValue)
        defer { client.close() }
        func create(headerBytes: Int) throws -> TaskRecord {
            let field = HeaderField(name: "X-Pad", value: String(repeating: "h", count: headerBytes - 5))
            let creation = TaskCreation(kind: .download, request: RequestRecord(url: "http://127.0.0.1:9/h\(headerBytes)", headers: [field]))
            guard case .task(let task) = try client.request(.createTask(session: session, creation)) else { throw TestFailure("not created") }
            _ = try client.request(.cancelTask(session: session, task: task.taskIdentifier, produceResumeData: false))
            return task
        }
        let bound = TaskRecord.eventRequestHeaderBytes
        let kept = try create(headerBytes: bound)
        let leftOut = try create(headerBytes: bound + 1)
        let giant = try create(headerBytes: 250_000)
        let journal = try JournalContents.read(session: container.sessionDirectory(session.rawValue, family: testIdentity(Self.app).family))
        let events = Dictionary(uniqueKeysWithValues: journal.events.values.map { ($0.task.taskIdentifier, $0) })
        #expect(events[kept.taskIdentifier]?.task.originalRequest.headers.first?.value.utf8.count == bound - 5)
        #expect(events[kept.taskIdentifier]?.requestHeadersLeftOut == nil)
        for task in [leftOut, giant] {
            let event = try #require(events[task.taskIdentifier])
            #expect(event.task.originalRequest.headers.isEmpty && event.requestHeadersLeftOut == true)
            #expect(event.task.originalRequest.url == task.originalRequest.url)
        }
        let line = try JSONEncoder().encode(try #require(events[giant.taskIdentifier]))
        #expect(line.count < 4 << 10, "the event of a task with 250 KB of headers takes \(line.count) bytes")
    }

    @Test("A hostile app creating tasks with 250 KB of headers is refused at the default budget (256 MiB), and cancelling them all without acknowledging an event does not raise the daemon's peak (under 512 MiB); figures printed")
    func hostileAppMemory() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let daemon = try DaemonUnderTest.start(container)
        let session = try SessionIdentifier("\(Self.app).hostile")
        let client = try RawClient.attached(container, as: testIdentity(Self.app), session: session.rawValue)
        defer { client.close() }
        let before = residentBytes(of: daemon.pid)
        let headers = [HeaderField(name: "X-Pad", value: String(repeating: "h", count: 250_000))]
        let perTask = HeldBytes.of(TaskCreation(kind: .download, request: RequestRecord(url: "http://127.0.0.1:9/hostile/0000", headers: headers)))
        let mostAccepted = TransferLimits.bytesPerApp / perTask
        var accepted: [Int] = []
        var refusal: TransferFailure?
        let started = Date()
        while refusal == nil && accepted.count <= mostAccepted + 1 && Date().timeIntervalSince(started) < 300 {
            let url = "http://127.0.0.1:9/hostile/" + String(format: "%04d", accepted.count % 10_000)
            let reply = try client.request(.createTask(session: session, TaskCreation(kind: .download, request: RequestRecord(url: url, headers: headers))), timeout: 60)
            switch reply {
            case .task(let task): accepted.append(task.taskIdentifier)
            case .failure(let failure): refusal = failure
            default: throw TestFailure("createTask answered \(reply)")
            }
        }
        let full = residentBytes(of: daemon.pid)
        #expect(refusal?.code == -1011 && refusal?.message.contains("budget") == true,
                "refused within the budget: \(accepted.count) tasks of \(perTask) bytes taken, then \(String(describing: refusal))")
        #expect(accepted.count == mostAccepted, "\(accepted.count) tasks taken, the budget holds \(mostAccepted)")

        // Every task cancelled; no event acknowledged, as a hostile app would.
        for identifier in accepted {
            guard case .cancelled = try client.request(.cancelTask(session: session, task: identifier, produceResumeData: false), timeout: 60) else {
                throw TestFailure("task \(identifier) was not cancelled")
            }
        }
        _ = try client.request(.ping) // every cancellation's reply came before this one
        let peak = peakResidentBytes(of: daemon.pid)
        let after = residentBytes(of: daemon.pid)
        let elapsed = Date().timeIntervalSince(started)
        print("AppByteBudgetTests: \(accepted.count) tasks with 250 KB of headers, then -1011; transferd VmRSS \(before >> 20) MiB before, \(full >> 20) MiB with the tasks, \(after >> 20) MiB after cancelling them all (events unacknowledged), VmHWM \(peak >> 20) MiB; \(String(format: "%.1f", elapsed)) s")
        // Cancelling them all, events unacknowledged, does not raise the peak: the events hold no
        // request. (What VmRSS is after varies from run to run: glibc keeps part of its heap's
        // freed pages, 250 KB strings being under the daemon's mmap threshold.)
        #expect(peak < 512 << 20, "the daemon peaked at \(peak >> 20) MiB")
        #expect(peak < full + (32 << 20), "cancelling raised the peak from \(full >> 20) to \(peak >> 20) MiB")
    }
}
