import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferPOSIX

/// Delayed requests built with no daemon (`SchedulerParts`), over one fixture.session in a container of
/// the test's own: a task whose `earliestBeginDate` came waits while its app decides
/// `willBeginDelayedRequest`, and goes on as created when nobody is attached or no answer comes
/// in time; the app's new request replaces the old one, unless the daemon refuses it.
@Suite final class DelayedRequestsTests {
    let fixture: SessionParts

    init() throws {
        fixture = try SessionParts("delayed-requests")
    }

    /// A running download whose `earliestBeginDate` is now.
    private func datedDownload() throws -> TaskRecord {
        var creation = TaskCreation(kind: .download, request: RequestRecord(url: "http://127.0.0.1:9/dated"))
        creation.earliestBeginDate = fixture.parts.clock.now
        var task = try fixture.session.createTask(creation, inBackground: false, pendingFailure: nil, at: fixture.parts.clock.now)
        task.state = .running
        fixture.session.update(task)
        return task
    }

    @Test("A dated task waits while its app decides willBeginDelayedRequest, and goes on as created when no answer comes in time or nobody is attached")
    func waitsForTheAnswer() throws {
        let task = try datedDownload()
        for question in [EventDelivery.HolderQuestion.asked, .waiting] {
            fixture.surroundings.holderQuestion = question
            #expect(fixture.parts.delayedRequests.readyAfterDelayedRequest(task, in: fixture.session, now: fixture.parts.clock.now) == nil, "\(question): the app decides")
        }
        fixture.surroundings.holderQuestion = .overdue
        let ready = try #require(fixture.parts.delayedRequests.readyAfterDelayedRequest(task, in: fixture.session, now: fixture.parts.clock.now))
        #expect(ready.requestToSend == task.originalRequest, "as created")
        #expect(fixture.session.tasks[task.taskIdentifier]?.delayedRequestAnswered == true, "not asked again")

        let unattended = try datedDownload()
        fixture.surroundings.holderQuestion = .nobodyAttached
        #expect(fixture.parts.delayedRequests.readyAfterDelayedRequest(unattended, in: fixture.session, now: fixture.parts.clock.now)?.delayedRequestAnswered == true)
    }

    /// A dated download whose app has been asked `willBeginDelayedRequest` (the question open).
    private func askedDownload() throws -> TaskRecord {
        let task = try datedDownload()
        fixture.surroundings.holderQuestion = .asked
        #expect(fixture.parts.delayedRequests.readyAfterDelayedRequest(task, in: fixture.session, now: fixture.parts.clock.now) == nil)
        return task
    }

    @Test("The app's new request is what the task sends; one the daemon refuses fails the task with the refusal's code; an answer nobody asked for changes nothing")
    func newRequest() throws {
        let unasked = try datedDownload()
        let replacement = RequestRecord(url: "http://127.0.0.1:9/instead", headers: [HeaderField(name: "X-Token", value: "fresh")])
        let ignored = try fixture.parts.delayedRequests.answerDelayedRequest(.useNewRequest(replacement), for: unasked.taskIdentifier, in: fixture.session)
        #expect(ignored?.requestToSend == unasked.originalRequest, "not asked: the task keeps its request")

        let task = try askedDownload()
        let answered = try #require(try fixture.parts.delayedRequests.answerDelayedRequest(.useNewRequest(replacement), for: task.taskIdentifier, in: fixture.session))
        #expect(answered.requestToSend == replacement)
        #expect(fixture.surroundings.schedulingRequests == 1, "it may start now")
        #expect(fixture.surroundings.failed.isEmpty)

        let refused = try askedDownload()
        fixture.surroundings.refusal = TransferFailure(code: TransferFailure.unsupportedURL, message: "not HTTP")
        #expect(try fixture.parts.delayedRequests.answerDelayedRequest(.useNewRequest(RequestRecord(url: "file:///etc/passwd")), for: refused.taskIdentifier, in: fixture.session) == nil)
        #expect(fixture.surroundings.failed.map(\.task) == [refused.taskIdentifier])
        #expect(fixture.surroundings.failed.map(\.code) == [TransferFailure.unsupportedURL])
    }

    @Test("A new request at the URL and header bounds is taken; one byte or field past any of them fails the task")
    func newRequestAtTheBounds() throws {
        let stem = "http://127.0.0.1:9/instead?q="
        func url(_ bytes: Int) -> String { stem + String(repeating: "a", count: bytes - stem.utf8.count) }
        func fields(_ count: Int) -> [HeaderField] { (0..<count).map { HeaderField(name: "X-\($0)", value: "v") } }
        func big(_ bytes: Int) -> [HeaderField] {
            [HeaderField(name: "X-Big", value: String(repeating: "b", count: bytes - 5))]
        }
        let fieldBound = TransferLimits.requestHeaderFields, byteBound = TransferLimits.requestHeaderBytes
        let cases: [(String, RequestRecord, Int?)] = [
            ("URL at the bound", RequestRecord(url: url(TransferLimits.urlBytes)), nil),
            ("URL one byte past", RequestRecord(url: url(TransferLimits.urlBytes + 1)), TransferFailure.badURL),
            ("header fields at the bound", RequestRecord(url: url(100), headers: fields(fieldBound)), nil),
            ("one header field past", RequestRecord(url: url(100), headers: fields(fieldBound + 1)),
             TransferFailure.dataLengthExceedsMaximum),
            ("header bytes at the bound", RequestRecord(url: url(100), headers: big(byteBound)), nil),
            ("header bytes one past", RequestRecord(url: url(100), headers: big(byteBound + 1)),
             TransferFailure.dataLengthExceedsMaximum),
        ]
        for (name, replacement, refusal) in cases {
            let task = try askedDownload()
            let failures = fixture.surroundings.failed.count
            let delayed = fixture.parts.delayedRequests
            let answered = try delayed.answerDelayedRequest(.useNewRequest(replacement), for: task.taskIdentifier,
                                                            in: fixture.session)
            if let refusal {
                #expect(answered == nil, "\(name): refused")
                #expect(fixture.surroundings.failed.dropFirst(failures).map(\.code) == [refusal], "\(name)")
                #expect(fixture.session.tasks[task.taskIdentifier]?.replacementRequest == nil, "\(name): not kept")
            } else {
                #expect(answered?.requestToSend == replacement, "\(name): taken")
                #expect(fixture.surroundings.failed.count == failures, "\(name): not failed")
            }
        }
    }
}
