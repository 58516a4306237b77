import Foundation
import TestPeers
import Testing
import LoopbackServer
@testable import TransferTransport

/// `CurlEasy.setIdleTimeout`, Apple's `timeoutIntervalForRequest`: silence ends an exchange,
/// slowness does not; a pause of our own is not silence.
// The limit catches a hang; it also counts time spent waiting for one of the cooperative
// threads, which the suite's long end-to-end tests can hold for minutes on a 2-core machine.
@Suite(.timeLimit(.minutes(20)))
struct IdleTimeoutTests {
    @Test func headersThenNothingTimesOut() async throws { try await onOwnThread { [self] in try self.headersThenNothingTimesOutOnItsThread() } }
    func headersThenNothingTimesOutOnItsThread() throws {
        let server = try LoopbackServer()
        server.serve("/s", data: Data(count: 10_000), options: RouteOptions(stallAfterBytes: 0))
        let (result, elapsed) = try run(server.url(for: "/s"), idle: 1)
        guard case .failure(let error) = result else { Issue.record("a silent link was not cut"); return }
        #expect(error.kind == .timedOut)
        #expect(error.message.contains("no data for 1 s"), "\(error.message)")
        #expect(elapsed >= 1 && elapsed < 4, "cut after \(elapsed) s")
    }

    @Test func stallMidBodyTimesOutAfterTheBytes() async throws { try await onOwnThread { [self] in try self.stallMidBodyTimesOutAfterTheBytesOnItsThread() } }
    func stallMidBodyTimesOutAfterTheBytesOnItsThread() throws {
        let server = try LoopbackServer()
        server.serve("/s", data: Data(count: 100_000), options: RouteOptions(stallAfterBytes: 40_000))
        var received = 0
        let (result, _) = try run(server.url(for: "/s"), idle: 1) { received += $0.count; return .consumed }
        guard case .failure(let error) = result else { Issue.record("a stalled body was not cut"); return }
        #expect(error.kind == .timedOut)
        #expect(received == 40_000)
    }

    @Test func aTrickleSlowerThanAByteASecondIsNotCut() async throws { try await onOwnThread { [self] in try self.aTrickleSlowerThanAByteASecondIsNotCutOnItsThread() } }
    func aTrickleSlowerThanAByteASecondIsNotCutOnItsThread() throws {
        let server = try LoopbackServer()
        server.serve("/t", data: Data("abcd".utf8), options: RouteOptions(trickleInterval: 0.8))
        var received = Data()
        let (result, _) = try run(server.url(for: "/t"), idle: 1.5) { received.append(contentsOf: $0); return .consumed }
        #expect(throws: Never.self) { try result.get() }
        #expect(received == Data("abcd".utf8))
    }

    @Test func ourOwnPauseIsNotSilence() async throws { try await onOwnThread { [self] in try self.ourOwnPauseIsNotSilenceOnItsThread() } }
    func ourOwnPauseIsNotSilenceOnItsThread() throws {
        let server = try LoopbackServer()
        let body = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0) })
        server.serve("/p", data: body)
        var received = Data()
        var pausedAt: Date?
        let easy = try CurlEasy()
        let (result, _) = try run(server.url(for: "/p"), idle: 1, easy: easy, body: { bytes in
            if pausedAt == nil && received.isEmpty {
                pausedAt = Date()
                return .pause
            }
            received.append(contentsOf: bytes)
            return .consumed
        }, eachTurn: {
            if let start = pausedAt, Date().timeIntervalSince(start) > 2.5 {
                pausedAt = .distantFuture
                easy.resume()
            }
        })
        #expect(throws: Never.self) { try result.get() }
        #expect(received == body)
    }

    /// One GET of `url` with the idle timeout, driven to its end (10 s at most).
    private func run(_ url: URL, idle: Double, easy: CurlEasy? = nil,
                     body: @escaping (UnsafeRawBufferPointer) -> CurlEasy.BodyDisposition = { _ in .consumed },
                     eachTurn: () -> Void = {}) throws -> (Result<Void, CurlError>, TimeInterval) {
        let multi = try CurlMulti()
        let easy = try easy ?? CurlEasy()
        try easy.setURL(url.absoluteString)
        easy.setTimeouts(connect: 5, lowSpeedLimit: nil, lowSpeedTime: nil)
        easy.setIdleTimeout(idle)
        easy.onBody = body
        try multi.add(easy)
        let started = Date()
        var none: [CurlMulti.PollRequest] = []
        while Date().timeIntervalSince(started) < 10 {
            _ = try multi.perform()
            if let (_, result) = multi.nextCompletion() { return (result, Date().timeIntervalSince(started)) }
            eachTurn()
            try multi.poll(extra: &none, timeout: .milliseconds(250))
        }
        throw CurlError(kind: .other, origin: .transfer, code: 0, message: "\(url) did not finish in 10 s")
    }
}
