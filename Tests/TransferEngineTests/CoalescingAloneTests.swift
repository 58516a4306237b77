import Foundation
import Testing
import TransferContainer
import TransferTransport
@testable import TransferEngine

/// Coalescing built on its own (`TransferParts`): no `TransferDaemon`, a stub of what it sees
/// of the rest of the daemon (`CoalescingSurroundings`). The leader's exchange is built but
/// never run; its files lie in the session's folder of a temporary container.
@Suite struct CoalescingAloneTests {
    @Test("When the leader of a coalesced GET finishes, each task waiting on the same request gets its own copy of the file and its own completion with the leader's response; a task with another header field is not one of them")
    func followersGetTheirOwnCopy() throws {
        let parts = try TransferParts { $0.coalescesIdenticalDownloads = true }
        let request = RequestRecord(url: "http://127.0.0.1:9/file", headers: [HeaderField(name: "Accept", value: "*/*")])
        var leader = try parts.createDownload(request)
        let follower = try parts.createDownload(request)
        var otherRequest = request
        otherRequest.headers.append(HeaderField(name: "X-Other", value: "1"))
        let other = try parts.createDownload(otherRequest)
        #expect(parts.coalescing.coalescingKey(follower, in: parts.session) == parts.coalescing.coalescingKey(leader, in: parts.session))
        #expect(parts.coalescing.coalescingKey(other, in: parts.session) != parts.coalescing.coalescingKey(leader, in: parts.session))

        try FileManager.default.createDirectory(atPath: parts.session.downloadsDirectory, withIntermediateDirectories: true)
        leader.response = ResponseRecord(url: request.url, statusCode: 200, headers: ["Content-Length": "5"])
        leader.countOfBytesExpectedToReceive = 5
        let transfer = try DownloadTransfer(session: parts.session.key, task: leader, partialPath: parts.session.partialPath(for: leader),
                                            configuration: parts.session.record.configuration, credentials: .none)
        defer { transfer.close() }
        let body = parts.session.partialPath(for: leader)
        try Data("hello".utf8).write(to: URL(fileURLWithPath: body))

        parts.coalescing.completeFollowers(of: transfer, body: body, in: parts.session)
        let event = try #require(parts.session.events.values.first { $0.task.taskIdentifier == follower.taskIdentifier }, "the follower did not end")
        #expect(event.error == nil)
        #expect(event.task.response?.statusCode == 200 && event.task.countOfBytesExpectedToReceive == 5)
        let copy = try #require(event.downloadedFile.flatMap(parts.session.resolvedPath))
        #expect(copy == parts.session.finishedPath(for: follower) && copy != parts.session.finishedPath(for: leader), "its own file: the app may move the leader's at once")
        #expect(!FileManager.default.fileExists(atPath: copy), "named only once its event is on disk")
        try parts.commit()
        #expect(try Data(contentsOf: URL(fileURLWithPath: copy)) == Data("hello".utf8))
        #expect(parts.surroundings.deliveries == [parts.session.key])
        #expect(parts.session.tasks[other.taskIdentifier] != nil, "another request is fetched on its own")
        #expect(parts.session.tasks[leader.taskIdentifier] != nil, "the leader's own completion is the downloads'")
    }

    @Test("A session that does not ask for coalescing, or a POST, fetches each task on its own")
    func noCoalescingUnlessAsked() throws {
        let plain = try TransferParts()
        #expect(plain.coalescing.coalescingKey(try plain.createDownload(), in: plain.session) == nil)
        let asking = try TransferParts { $0.coalescesIdenticalDownloads = true }
        #expect(asking.coalescing.coalescingKey(try asking.createDownload(RequestRecord(url: "http://127.0.0.1:9/file", httpMethod: "POST")), in: asking.session) == nil)
        #expect(asking.coalescing.coalescingKey(try asking.createDownload(), in: asking.session) != nil)
    }
}
