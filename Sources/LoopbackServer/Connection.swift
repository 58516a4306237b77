import Foundation
import Glibc

/// Serves one accepted connection: reads requests one after another (keep-alive), reads
/// or drains each body, records the request and writes the response. Requests for upload
/// routes and resume paths are handed to `UploadExchange`, which reads their bodies itself.
/// Before either, `AuthenticationGate` may answer a request with a challenge (401/407) or
/// 502 instead, without reading its body for a route.
///
/// Runs entirely on the connection's own thread, which alone reads and writes the socket.
/// The socket's entry in the server's registry (under the server lock) exists only so
/// `stop()`, or a request taking over a resumable upload this connection is reading, can
/// shut it down; `ServerCore.connectionEnded` closes it when `run` returns.
final class Connection {
    /// Largest request head accepted; longer ones get 431.
    static let headLimit = 64 * 1024
    /// An idle keep-alive connection is closed after this long without a request.
    static let idleTimeoutSeconds = 120
    /// Largest body drained to keep the connection after an answer given before reading it;
    /// with longer bodies the connection is closed instead.
    static let drainLimit: Int64 = 1 << 20

    let id: Int
    private let socket: SocketFD
    let core: ServerCore
    let reader: SocketReader
    let writer: HTTPResponseWriter

    init(id: Int, socket: SocketFD, core: ServerCore) {
        self.id = id
        self.socket = socket
        self.core = core
        self.reader = SocketReader(socket: socket)
        self.writer = HTTPResponseWriter(socket: socket, core: core)
    }

    func run() {
        socket.setNoDelay()
        socket.setReceiveTimeout(seconds: Self.idleTimeoutSeconds)
        while serveOneRequest() {}
    }

    /// Handles one request; returns whether the connection stays open for another.
    private func serveOneRequest() -> Bool {
        let head: RequestHead
        do {
            guard let bytes = try reader.readHead(limit: Self.headLimit) else { return false }
            head = try HTTPRequestParser.parseHead(bytes)
        } catch SocketReader.ReadError.tooLarge {
            return refuse(431)
        } catch let error as HTTPParseError {
            return refuse(error.status)
        } catch {
            return false  // peer went away mid-head or the socket failed: nobody to answer
        }

        let framing: RequestBodyFraming
        do {
            framing = try RequestBodyFraming(head)
        } catch {
            return refuse(error.status)
        }
        if let refusal = AuthenticationGate(core: core, connectionID: id).refusal(for: head) {
            return answerBeforeBody(refusal, to: head, framing: framing)
        }
        if let target = core.uploadTarget(for: head) {
            return UploadExchange(connection: self, head: head, framing: framing, target: target).run()
        }

        let body: (length: Int64, kept: Data?)
        do {
            body = try readBody(of: head, framing: framing)
        } catch is RequestBodyReader.MalformedChunk {
            return refuse(400)
        } catch SocketReader.ReadError.tooLarge {
            return refuse(400)
        } catch {
            return false
        }

        record(head, bodyLength: body.length, body: body.kept)
        return respond(ResponsePlanner(core: core).plan(for: head), to: head)
    }

    /// Adds the request to the log (after its body was read, before it is answered).
    func record(_ head: RequestHead, bodyLength: Int64, body: Data? = nil) {
        var request = RecordedRequest(method: head.method, target: head.target, path: head.path,
                                      query: head.query, httpVersion: head.version.description,
                                      headers: head.headers, bodyLength: bodyLength,
                                      connectionID: id, time: Date())
        request.body = body
        core.record(request)
    }

    /// Writes the answer to `head` with the right `Connection` field; returns whether the
    /// connection stays open for another request.
    func respond(_ plan: ResponsePlan, to head: RequestHead) -> Bool {
        var plan = plan
        let keepAlive = head.wantsKeepAlive && !plan.closeConnection && !core.isStopping
        if !keepAlive {
            plan.head.add("Connection", "close")
        } else if head.version.minor == 0 {
            plan.head.add("Connection", "keep-alive")
        }
        return write(plan, headOnly: head.method == "HEAD") && keepAlive
    }

    /// Answers `head` before its body is read (an error, a challenge, a draft reply): a body
    /// of known length up to `drainLimit`, with no `Expect: 100-continue` pending, is read
    /// and dropped so the connection stays in step; with any other body the connection is
    /// closed after the answer (half-close, then a short drain). The request is recorded
    /// before the answer is written. Returns whether the connection stays open for another.
    func answerBeforeBody(_ plan: ResponsePlan, to head: RequestHead, framing: RequestBodyFraming) -> Bool {
        var plan = plan
        var drained: Int64 = 0
        switch framing {
        case .none:
            break
        case .length(let length) where length <= Self.drainLimit && !head.expectsContinue:
            do {
                drained = try RequestBodyReader.read(framing, from: reader)
            } catch {
                return false
            }
        default:
            plan.closeConnection = true
        }
        record(head, bodyLength: drained)
        let keepAlive = respond(plan, to: head)
        if plan.closeConnection { closeGracefully() }
        return keepAlive
    }

    /// Reads the request body in full, even when nothing uses it, so the next request on
    /// this connection starts where it should; its bytes are kept up to `keptBodyLimit`.
    private func readBody(of head: RequestHead, framing: RequestBodyFraming) throws -> (length: Int64, kept: Data?) {
        guard framing != .none else { return (0, Data()) }
        if head.expectsContinue { try writer.writeContinue() }
        var kept: Data? = Data()
        let length = try RequestBodyReader.read(framing, from: reader) { piece in
            guard let sofar = kept?.count else { return }
            if sofar + piece.count <= RecordedRequest.keptBodyLimit { kept?.append(contentsOf: piece) } else { kept = nil }
        }
        return (length, kept)
    }

    /// Writes the response; returns whether the connection is still in a usable state.
    private func write(_ plan: ResponsePlan, headOnly: Bool) -> Bool {
        let sendsBody = !headOnly && plan.body != nil && (!plan.range.isEmpty || plan.framing == .chunked)
        do {
            // A body that stalls before its first byte must not leave the head corked (MSG_MORE).
            let stallPoint = plan.pacing.stallPoint(total: Int64(plan.range.count), framing: plan.framing)
            let bodyFollowsAtOnce = sendsBody && stallPoint != 0
                && plan.pacing.trickleInterval == nil
            try writer.writeHead(plan.head, bodyFollows: bodyFollowsAtOnce)
            guard sendsBody, let body = plan.body else { return true }
            return try writer.writeBody(body, range: plan.range, framing: plan.framing,
                                        pacing: plan.pacing) == .complete
        } catch {
            return false
        }
    }

    /// Answers a request that cannot be served with `status`, then closes gracefully:
    /// half-close, and read what the client still sends for a moment, because closing
    /// with unread input makes the kernel reset the connection and the client may lose
    /// the answer.
    func refuse(_ status: Int) -> Bool {
        var plan = ResponsePlan.text(status)
        plan.head.add("Connection", "close")
        if write(plan, headOnly: false) { closeGracefully() }
        return false
    }

    /// Half-closes (the client reads end of stream after what was sent) and drains what the
    /// client still sends for a moment, so that the final close is a FIN, not a reset.
    func closeGracefully() {
        socket.shutdown(Int32(SHUT_WR))
        socket.setReceiveTimeout(seconds: 1)
        reader.discardRemaining(limit: 1 << 20)
    }
}
