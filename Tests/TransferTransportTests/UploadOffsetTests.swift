import Foundation
import Testing
import LoopbackServer
import TransferContainer
@testable import TransferTransport

/// What an interrupted resumable upload does with the server's answer to its offset query
/// (`HEAD`, S6.6): an offset it can trust resumes there; one outside the body, unreadable,
/// or a completion that does not cover the body starts the upload over, never appends to it.
@Suite(.timeLimit(.minutes(1)))
struct UploadOffsetTests {
    static let bodySize = 1000

    /// What `UploadTransfer` decides after a `HEAD` answered with `fields` (a real exchange
    /// with the loopback server, whose route adds them to its answer).
    private func outcome(answering fields: [(name: String, value: String)]) throws -> UploadTransfer.Outcome {
        let server = try LoopbackServer()
        defer { server.stop() }
        var options = RouteOptions()
        options.extraHeaders = fields
        server.serve("/uploads/1", data: Data(), options: options)
        let body = FileManager.default.temporaryDirectory.appendingPathComponent("upload-offset-\(UUID().uuidString).bin")
        try Data(count: Self.bodySize).write(to: body)
        defer { try? FileManager.default.removeItem(at: body) }

        var task = TaskRecord(taskIdentifier: 1, kind: .upload, originalRequest: RequestRecord(url: server.url(for: "/up").absoluteString, httpMethod: "POST"))
        task.uploadResumption = UploadResumption(location: server.url(for: "/uploads/1").absoluteString, interopVersion: 6)
        let key = SessionKey(family: try BundleIdentifier("com.example.tests"), identifier: try SessionIdentifier("offsets"))
        let transfer = try UploadTransfer(session: key, task: task, step: .retrieveOffset, bodyPath: body.path,
                                          responsePath: body.path + ".response", configuration: SessionConfiguration(), credentials: .none)
        defer { try? FileManager.default.removeItem(atPath: body.path + ".response") }
        let multi = try CurlMulti()
        try multi.add(transfer.easy)
        let started = Date()
        var none: [CurlMulti.PollRequest] = []
        while Date().timeIntervalSince(started) < 10 {
            _ = try multi.perform()
            if let (_, result) = multi.nextCompletion() { return transfer.finish(result) }
            try multi.poll(extra: &none, timeout: .milliseconds(250))
        }
        throw CurlError(kind: .other, origin: .transfer, code: 0, message: "the offset query did not finish in 10 s")
    }

    private func restarts(_ outcome: UploadTransfer.Outcome) -> Bool {
        if case .restartFromZero = outcome { return true } else { return false }
    }

    @Test("An offset outside the body, negative, unreadable or missing starts the upload over",
          arguments: ["1001", "99999999999999999999", "-1", "abc", "12abc", "", nil])
    func untrustedOffsets(_ offset: String?) throws {
        let fields = offset.map { [("Upload-Offset", $0), ("Upload-Complete", "?0")] } ?? [("Upload-Complete", "?0")]
        let result = try outcome(answering: fields)
        #expect(restarts(result), "\(result)")
    }

    @Test("A complete upload that holds fewer bytes than the body starts over; one that holds them all is done")
    func completion() throws {
        let short = try outcome(answering: [("Upload-Offset", "999"), ("Upload-Complete", "?1")])
        #expect(restarts(short), "\(short)")
        let whole = try outcome(answering: [("Upload-Offset", String(Self.bodySize)), ("Upload-Complete", "?1")])
        guard case .completed = whole else { Issue.record("\(whole)"); return }
    }

    @Test("An offset within the body resumes there, however much was sent before")
    func trustedOffsets() throws {
        for offset: Int64 in [0, 1, 999] {
            let result = try outcome(answering: [("Upload-Offset", String(offset)), ("Upload-Complete", "?0")])
            guard case .next(.append(from: offset)) = result else { Issue.record("offset \(offset): \(result)"); continue }
        }
    }
}
