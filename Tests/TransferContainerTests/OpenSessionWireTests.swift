import Foundation
import Testing
import TransferCoding
import TransferContainer

/// `openSession`'s `withoutDelegate` (issue 44) is optional on the wire: a client that does not
/// send it (an older one, or one with a delegate) is read as having a delegate.
struct OpenSessionWireTests {
    @Test("openSession without withoutDelegate leaves it out, and reads back as nil; with it, reads back as true")
    func withoutDelegateIsOptional() throws {
        let identifier = try SessionIdentifier("com.example.host.background")
        let plain = DaemonRequest.openSession(identifier: identifier, configuration: SessionConfiguration(),
                                              launchedForEvents: false)
        let plainBody = try RecordCoding.encodeCompact(plain)
        #expect(!String(decoding: plainBody, as: UTF8.self).contains("withoutDelegate"))
        guard case .openSession(_, _, _, let none) = try Frame.decode(DaemonRequest.self, from: plainBody) else {
            Issue.record("not an openSession")
            return
        }
        #expect(none == nil)

        let marked = DaemonRequest.openSession(identifier: identifier, configuration: SessionConfiguration(),
                                               launchedForEvents: false, withoutDelegate: true)
        let markedBody = try RecordCoding.encodeCompact(marked)
        guard case .openSession(_, _, _, let flag) = try Frame.decode(DaemonRequest.self, from: markedBody) else {
            Issue.record("not an openSession")
            return
        }
        #expect(flag == true)
    }
}
