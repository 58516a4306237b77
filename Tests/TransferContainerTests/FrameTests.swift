import Foundation
import Testing
import TransferContainer

/// A seeded generator (SplitMix64), so that a fuzz failure can be replayed from its seed.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

extension FrameDecoder {
    mutating func append(_ data: Data) {
        data.withUnsafeBytes { append($0) }
    }

    mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }
}

/// A frame header: the big-endian length.
func lengthPrefix(_ length: UInt32) -> [UInt8] {
    [UInt8(length >> 24), UInt8((length >> 16) & 0xFF), UInt8((length >> 8) & 0xFF), UInt8(length & 0xFF)]
}

@Suite("Frame and FrameDecoder")
struct FrameTests {
    let request = RequestFrame(id: 42, request: .createTask(session: sampleSession,
        TaskCreation(kind: .download, request: RequestRecord(url: "http://127.0.0.1:9/a b?q=ü", headers: [HeaderField(name: "Range", value: "bytes=0-")]),
                     taskDescription: "described", priority: 0.25, earliestBeginDate: exactDate)))

    func checkRequest(_ frame: RequestFrame) {
        #expect(frame.id == 42)
        guard case .createTask(let session, let creation) = frame.request else {
            Issue.record("expected createTask, got \(frame.request)")
            return
        }
        #expect(session == sampleSession)
        #expect(creation.kind == .download)
        #expect(creation.request == RequestRecord(url: "http://127.0.0.1:9/a b?q=ü", headers: [HeaderField(name: "Range", value: "bytes=0-")]))
        #expect(creation.taskDescription == "described")
        #expect(creation.priority == 0.25)
        #expect(creation.earliestBeginDate == exactDate)
    }

    @Test("a RequestFrame encodes to a length-prefixed frame and decodes back")
    func requestRoundTrip() throws {
        let data = try Frame.encode(request)
        let length = Int(data[0]) << 24 | Int(data[1]) << 16 | Int(data[2]) << 8 | Int(data[3])
        #expect(length == data.count - 4)
        var decoder = FrameDecoder()
        decoder.append(data)
        let body = try #require(try decoder.next())
        #expect(body == data.dropFirst(4))
        checkRequest(try Frame.decode(RequestFrame.self, from: body))
        #expect(try decoder.next() == nil)
        #expect(decoder.pendingByteCount == 0)
    }

    @Test("DaemonFrames (a reply and a push) round-trip")
    func daemonRoundTrip() throws {
        let event = sampleEvent(9)
        let frames: [DaemonFrame] = [
            .push(.event(session: sampleSession, event)),
            .reply(id: 7, .failure(TransferFailure(code: TransferFailure.backgroundSessionInUseByAnotherProcess, message: "in use", subject: "x"))),
            .reply(id: 8, .welcome(daemonPID: 1234)),
            .reply(id: 9, .tasks([sampleTask(1), sampleTask(2)])),
            .push(.progress(session: sampleSession, TaskProgress(taskIdentifier: 3, bytesWritten: 10, totalBytesWritten: 20, totalBytesExpectedToWrite: -1, state: .running))),
        ]
        var decoder = FrameDecoder()
        for frame in frames { decoder.append(try Frame.encode(frame)) }
        var decoded: [DaemonFrame] = []
        while let body = try decoder.next() { decoded.append(try Frame.decode(DaemonFrame.self, from: body)) }
        #expect(decoded.count == frames.count)
        #expect(decoder.pendingByteCount == 0)
        guard decoded.count == 5 else { return }

        if case .push(.event(let session, let back)) = decoded[0] {
            #expect(session == sampleSession)
            #expect(back == event)
        } else { Issue.record("frame 0: \(decoded[0])") }
        if case .reply(let id, .failure(let failure)) = decoded[1] {
            #expect(id == 7)
            #expect(failure == TransferFailure(code: -996, message: "in use", subject: "x"))
        } else { Issue.record("frame 1: \(decoded[1])") }
        if case .reply(8, .welcome(let pid)) = decoded[2] { #expect(pid == 1234) } else { Issue.record("frame 2: \(decoded[2])") }
        if case .reply(9, .tasks(let tasks)) = decoded[3] { #expect(tasks == [sampleTask(1), sampleTask(2)]) } else { Issue.record("frame 3: \(decoded[3])") }
        if case .push(.progress(_, let progress)) = decoded[4] {
            #expect(progress == TaskProgress(taskIdentifier: 3, bytesWritten: 10, totalBytesWritten: 20, totalBytesExpectedToWrite: -1, state: .running))
        } else { Issue.record("frame 4: \(decoded[4])") }
    }

    @Test("a frame fed one byte at a time decodes once complete, and pendingByteCount counts the partial frame")
    func bytewise() throws {
        let data = [UInt8](try Frame.encode(request))
        var decoder = FrameDecoder()
        for (index, byte) in data.enumerated().dropLast() {
            decoder.append([byte])
            #expect(try decoder.next() == nil, "decoded early at byte \(index)")
            #expect(decoder.pendingByteCount == index + 1)
        }
        decoder.append([data.last!])
        let body = try #require(try decoder.next())
        checkRequest(try Frame.decode(RequestFrame.self, from: body))
        #expect(decoder.pendingByteCount == 0)
        #expect(try decoder.next() == nil)
    }

    @Test("two frames in one buffer both decode; a third, partial one waits")
    func twoInOne() throws {
        let first = try Frame.encode(request)
        let second = try Frame.encode(RequestFrame(id: 43, request: .ping))
        let third = try Frame.encode(RequestFrame(id: 44, request: .getAllTasks(session: sampleSession)))
        var decoder = FrameDecoder()
        decoder.append(first + second + third.prefix(6))
        checkRequest(try Frame.decode(RequestFrame.self, from: try #require(try decoder.next())))
        let ping = try Frame.decode(RequestFrame.self, from: try #require(try decoder.next()))
        #expect(ping.id == 43)
        if case .ping = ping.request {} else { Issue.record("expected ping, got \(ping.request)") }
        #expect(try decoder.next() == nil)
        #expect(decoder.pendingByteCount == 6)
        decoder.append(third.dropFirst(6))
        let last = try Frame.decode(RequestFrame.self, from: try #require(try decoder.next()))
        #expect(last.id == 44)
        #expect(decoder.pendingByteCount == 0)
    }

    @Test("a length over Frame.maximumSize is refused as soon as the prefix arrives")
    func oversized() throws {
        var decoder = FrameDecoder()
        decoder.append(lengthPrefix(UInt32(Frame.maximumSize + 1)))
        #expect(throws: FrameError.oversized(Frame.maximumSize + 1, limit: Frame.maximumSize)) { try decoder.next() }
        var huge = FrameDecoder()
        huge.append(lengthPrefix(UInt32.max) + [1, 2, 3])
        #expect(throws: FrameError.oversized(Int(UInt32.max), limit: Frame.maximumSize)) { try huge.next() }
        #expect(FrameError.oversized(Frame.maximumSize + 1, limit: Frame.maximumSize).description.contains("\(Frame.maximumSize)"))
    }

    @Test("a client reads replies beyond the request limit (a session's 10,000 tasks), up to Frame.maximumReplySize")
    func repliesMayBeLarger() throws {
        let tasks = (1...10_000).map { TaskRecord(taskIdentifier: $0, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1:8080/files/\($0).bin", headers: [HeaderField(name: "Accept", value: "*/*")])) }
        let reply = DaemonFrame.reply(id: 7, .tasks(tasks))
        #expect(throws: FrameError.self) { try Frame.encode(reply) }
        let frame = try Frame.encode(reply, limit: Frame.maximumReplySize)
        #expect(frame.count > Frame.maximumSize)
        var client = FrameDecoder(limit: Frame.maximumReplySize)
        frame.withUnsafeBytes { client.append($0) }
        let body = try #require(try client.next())
        guard case .reply(7, .tasks(let decoded)) = try Frame.decode(DaemonFrame.self, from: body) else {
            Issue.record("not the tasks reply")
            return
        }
        #expect(decoded.count == 10_000)
        var daemon = FrameDecoder()
        frame.withUnsafeBytes { daemon.append($0) }
        #expect(throws: FrameError.self) { try daemon.next() }
    }

    @Test("a length of exactly Frame.maximumSize is accepted and waits for its body")
    func atMaximum() throws {
        var decoder = FrameDecoder()
        decoder.append(lengthPrefix(UInt32(Frame.maximumSize)))
        #expect(try decoder.next() == nil)
        #expect(decoder.pendingByteCount == 4)
    }

    @Test("encoding a message over the limit throws .oversized")
    func encodeOversized() throws {
        var task = TaskRecord(taskIdentifier: 1, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1/x"))
        task.taskDescription = String(repeating: "x", count: Frame.maximumSize)
        let big = RequestFrame(id: 1, request: .setTaskProperties(session: sampleSession, task: 1, TaskProperties(of: task)))
        #expect(throws: FrameError.self) { try Frame.encode(big) }
    }

    @Test("an empty frame decodes to an empty body")
    func emptyFrame() throws {
        var decoder = FrameDecoder()
        decoder.append(lengthPrefix(0))
        #expect(try decoder.next() == Data())
        #expect(decoder.pendingByteCount == 0)
        #expect(throws: FrameError.self) { try Frame.decode(RequestFrame.self, from: Data()) }
    }

    @Test("a body that is not JSON is a frame, but Frame.decode throws .malformed", arguments: [
        Array("hello".utf8), [0xFF, 0x00, 0x7B], Array("{\"id\": 1}".utf8), Array("{\"id\":1,\"request\":{\"nope\":{}}}".utf8),
    ])
    func malformed(_ body: [UInt8]) throws {
        var decoder = FrameDecoder()
        decoder.append(lengthPrefix(UInt32(body.count)) + body)
        let decoded = try #require(try decoder.next())
        #expect(decoded == Data(body))
        let error = try #require(throws: FrameError.self) { try Frame.decode(RequestFrame.self, from: decoded) }
        guard case .malformed(let reason) = error else {
            Issue.record("expected .malformed, got \(error)")
            return
        }
        #expect(!reason.isEmpty)
        #expect(error.description.hasPrefix("malformed frame"))
    }

    @Test("10,000 random buffers never crash the decoder")
    func fuzz() throws {
        // Replay a failure with BGTRANSFER_FUZZ_SEED=<seed>.
        let seed = ProcessInfo.processInfo.environment["BGTRANSFER_FUZZ_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 0...UInt64.max)
        print("FrameDecoder fuzz seed: \(seed) (replay with BGTRANSFER_FUZZ_SEED=\(seed))")
        var random = SeededGenerator(seed: seed)
        var frames = 0
        var refused = 0
        for round in 0..<10_000 {
            // Mostly small lengths (so that whole frames occur), sometimes anything.
            var buffer: [UInt8] = []
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                let length: UInt32 = Bool.random(using: &random) ? UInt32.random(in: 0...40, using: &random) : UInt32.random(in: 0...UInt32.max, using: &random)
                buffer += lengthPrefix(length)
                buffer += (0..<Int.random(in: 0...48, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) }
            }
            if Bool.random(using: &random) { buffer = (0..<Int.random(in: 0...64, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) } }

            var decoder = FrameDecoder()
            var fed = 0
            var consumed = 0
            var stuck = false
            while fed < buffer.count && !stuck {
                let piece = Int.random(in: 1...max(1, buffer.count - fed), using: &random)
                decoder.append(Array(buffer[fed..<(fed + piece)]))
                fed += piece
                do {
                    while let body = try decoder.next() {
                        frames += 1
                        consumed += 4 + body.count
                        #expect(body.count <= Frame.maximumSize)
                        _ = try? Frame.decode(RequestFrame.self, from: body)
                        _ = try? Frame.decode(DaemonFrame.self, from: body)
                    }
                } catch {
                    refused += 1
                    stuck = true
                    guard case .oversized(let size, _) = error, size > Frame.maximumSize else {
                        Issue.record("seed \(seed) round \(round): unexpected \(error)")
                        break
                    }
                }
                if !stuck { #expect(decoder.pendingByteCount == fed - consumed, "seed \(seed) round \(round)") }
            }
        }
        #expect(frames > 0 && refused > 0, "seed \(seed): the fuzz should exercise both outcomes")
    }
}
