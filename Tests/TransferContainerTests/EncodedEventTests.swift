import Foundation
import Testing
import TransferContainer
import TransferCoding

/// An event encoded once must read back, from its journal line and from its push, exactly
/// as the event encoded the usual way does: the daemon splices the same bytes into both.
@Suite("EncodedEvent")
struct EncodedEventTests {
    @Test("the journal line is byte for byte JournalLine.event, and reads back as the event")
    func journalLine() throws {
        // A full event, and one with every optional member left out.
        for event in [sampleEvent(7), EventRecord(number: 1, kind: .taskCompleted, createdAt: exactDate, task: TaskRecord(taskIdentifier: 1, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1/a"), createdAt: exactDate))] {
            let encoded = try EncodedEvent(event)
            #expect(encoded.journalLine == (try RecordCoding.encodeCompact(JournalLine.event(event))))
            let contents = JournalContents(parsing: encoded.journalLine + Data("\n".utf8))
            #expect(contents.unreadable.isEmpty)
            #expect(contents.events[event.number] == event)
        }
    }

    @Test("the push frame is byte for byte DaemonFrame.push(.event), and a client decodes it as that push")
    func pushFrame() throws {
        let event = sampleEvent(3)
        let session = try SessionIdentifier("com.example.app.background-1_x")
        let frame = try EncodedEvent(event).pushFrame(session: session)
        #expect(frame == (try Frame.encode(DaemonFrame.push(.event(session: session, event)), limit: Frame.maximumReplySize)))
        var decoder = FrameDecoder(limit: Frame.maximumReplySize)
        frame.withUnsafeBytes { decoder.append($0) }
        let body = try #require(try decoder.next())
        guard case .push(.event(let decodedSession, let decoded)) = try Frame.decode(DaemonFrame.self, from: body) else {
            Issue.record("not an event push")
            return
        }
        #expect(decodedSession == session)
        #expect(decoded == event)
    }
}
