import Foundation
import Testing
import LoopbackServer
import TestPeers
import TransferContainer
@testable import TransferTransport

/// What an interrupted resumable upload does with the server's answer to its offset query
/// (`HEAD`, S6.6): an offset it can trust resumes there; one outside the body, unreadable,
/// or a completion that does not cover the body starts the upload over, never appends to it.
@Suite(.timeLimit(.minutes(20))) // counts while waiting for a cooperative thread: whole-suite runs have starved minute limits
struct UploadOffsetTests {
    static let bodySize = 1000

    /// What `UploadTransfer` decided, as a value the test's task can hold.
    enum Decision: Sendable, Equatable {
        case restartFromZero
        case completed
        case append(from: Int64)
        case other(String)

        init(_ outcome: UploadTransfer.Outcome) {
            switch outcome {
            case .restartFromZero: self = .restartFromZero
            case .completed: self = .completed
            case .next(.append(let offset)): self = .append(from: offset)
            default: self = .other("\(outcome)")
            }
        }
    }

    /// What `UploadTransfer` decides after a `HEAD` answered with `fields` (a real exchange
    /// with the loopback server, whose route adds them to its answer), on a thread of its
    /// own so that no cooperative thread waits for the socket.
    private func decision(answering fields: [(name: String, value: String)]) async throws -> Decision {
        try await onOwnThread { try Self.exchange(answering: fields) }
    }

    private static func exchange(answering fields: [(name: String, value: String)]) throws -> Decision {
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
            if let (_, result) = multi.nextCompletion() { return Decision(transfer.finish(result, now: Date())) }
            try multi.poll(extra: &none, timeout: .milliseconds(250))
        }
        throw CurlError(kind: .other, origin: .transfer, code: 0, message: "the offset query did not finish in 10 s")
    }

    @Test("An offset outside the body, negative, unreadable or missing starts the upload over",
          arguments: ["1001", "99999999999999999999", "-1", "abc", "12abc", "", nil])
    func untrustedOffsets(_ offset: String?) async throws {
        let fields = offset.map { [("Upload-Offset", $0), ("Upload-Complete", "?0")] } ?? [("Upload-Complete", "?0")]
        #expect(try await decision(answering: fields) == .restartFromZero)
    }

    @Test("A complete upload that holds fewer bytes than the body starts over; one that holds them all is done")
    func completion() async throws {
        #expect(try await decision(answering: [("Upload-Offset", "999"), ("Upload-Complete", "?1")]) == .restartFromZero)
        #expect(try await decision(answering: [("Upload-Offset", String(Self.bodySize)), ("Upload-Complete", "?1")]) == .completed)
    }

    @Test("An offset within the body resumes there, however much was sent before", arguments: [Int64(0), 1, 999])
    func trustedOffsets(_ offset: Int64) async throws {
        #expect(try await decision(answering: [("Upload-Offset", String(offset)), ("Upload-Complete", "?0")]) == .append(from: offset))
    }
}
