import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import Digests
import TransferPOSIX

/// cancel(byProducingResumeData:) and downloadTask(withResumeData:) (S6.1–S6.3).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ResumeDataTests: InProcessSuite, @unchecked Sendable {

    /// Cancels a throttled download part-way and returns its resume data.
    @Test("Resume data continues from the bytes on disk with Range/If-Range and didResumeAtOffset; it is single-use")
    func resumeDataRoundTrip() throws {
        let payload = testPayload(size: 3 << 20, seed: 31)
        var slow = RouteOptions()
        slow.bytesPerSecond = 2 << 20
        server.serve("/resumable.bin", data: payload, options: slow)
        let delegate = RecordingDelegate()
        let session = fixture.session("resume", delegate: delegate)
        let first = session.downloadTask(with: server.url(for: "/resumable.bin"))
        first.resume()
        let cancelled = cancelPartWay(first, after: 512 << 10)
        #expect(cancelled.reached && cancelled.calledBack)
        let data = try #require(cancelled.data, "a resumable download gives resume data")
        #expect(delegate.wait { if case .completed(first.taskIdentifier, -999, _) = $0 { return true } else { return false } })
        let inError = (delegate.errors[first.taskIdentifier] as NSError?)?.userInfo[NSURLSessionDownloadTaskResumeData] as? Data
        #expect(inError == data, "the -999 error carries the same resume data")
        let plist = try PropertyListSerialization.propertyList(from: data, format: nil) as? [String: Any]
        #expect(plist?["NSURLSessionDownloadURL"] as? String == server.url(for: "/resumable.bin").absoluteString, "Apple's keys")
        let offset = (plist?["NSURLSessionResumeBytesReceived"] as? NSNumber)?.int64Value ?? -1
        #expect(offset > 0)

        server.serve("/resumable.bin", data: payload) // full speed now
        let second = session.downloadTask(withResumeData: data)
        second.resume()
        #expect(delegate.wait { if case .completed(second.taskIdentifier, nil, 206) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(delegate.calls.contains(.resumed(task: second.taskIdentifier, offset: offset, expected: Int64(payload.count))), "\(delegate.calls)")
        #expect(delegate.digests[second.taskIdentifier] == SHA256.hexDigest(of: payload))
        let last = try #require(server.requests.last { $0.path == "/resumable.bin" })
        #expect(last.header("Range") == "bytes=\(offset)-")
        #expect(last.header("If-Range") != nil)

        // Used once: the same blob again is stale.
        let again = session.downloadTask(withResumeData: data)
        again.resume()
        #expect(delegate.wait { if case .completed(again.taskIdentifier, -3001, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(delegate.errors[again.taskIdentifier]?.localizedDescription.contains("stale resume data") == true)
        session.invalidateAndCancel()
    }

    @Test("Corrupted and foreign resume data are refused with a clear error, and nothing is fetched", arguments: ["corrupted", "foreign"])
    func badResumeData(_ kind: String) throws {
        // Foreign resume data names this test's server, so a request it made would be seen.
        server.serve("/x", data: Data("must not be fetched".utf8))
        let blob = kind == "corrupted" ? Data("not a plist at all".utf8)
            : try PropertyListSerialization.data(fromPropertyList: ["NSURLSessionDownloadURL": server.url(for: "/x").absoluteString, "NSURLSessionResumeInfoVersion": 2], format: .xml, options: 0)
        let delegate = RecordingDelegate()
        let session = fixture.session("bad-\(kind)", delegate: delegate)
        let task = session.downloadTask(withResumeData: blob)
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, -1016, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(delegate.errors[task.taskIdentifier]?.localizedDescription.contains("\(kind) resume data") == true, "\(String(describing: delegate.errors[task.taskIdentifier]))")
        #expect(!server.requests.contains { $0.path == "/x" }, "\(server.requests.map(\.path))")
        session.invalidateAndCancel()
    }

    @Test("No resume data from a server that does not accept ranges")
    func noResumeDataWithoutRanges() throws {
        var options = RouteOptions()
        options.acceptsRanges = false
        options.bytesPerSecond = 1 << 20
        server.serve("/noranges", data: testPayload(size: 2 << 20), options: options)
        let delegate = RecordingDelegate()
        let session = fixture.session("noranges", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/noranges"))
        task.resume()
        let cancelled = cancelPartWay(task, after: 256 << 10)
        #expect(cancelled.reached, "bytes were on disk when it was cancelled")
        #expect(cancelled.calledBack, "cancel(byProducingResumeData:) called back")
        #expect(cancelled.data == nil)
        session.invalidateAndCancel()
    }
}
}

/// From the foreground to the background without losing bytes (issue "crash-proof").
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class HandoverTests: InProcessSuite, @unchecked Sendable {

    @Test("A default session downloads in-process with the same delegate calls")
    func foregroundDownload() throws {
        let payload = testPayload(size: 1 << 20, seed: 61)
        server.serve("/fg.bin", data: payload)
        let delegate = RecordingDelegate()
        let session = URLSession(configuration: .default, delegate: delegate, delegateQueue: nil)
        let task = session.downloadTask(with: server.url(for: "/fg.bin"))
        #expect(task.state == .suspended)
        task.resume()
        #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) }, "\(delegate.calls)")
        #expect(delegate.digests[task.taskIdentifier] == SHA256.hexDigest(of: payload))
        #expect(delegate.locations.allSatisfy { !FileManager.default.fileExists(atPath: $0.path) })
        session.finishTasksAndInvalidate()
        #expect(delegate.wait { $0 == .invalid(code: nil) })
    }

    @Test("When the app's time runs out, the foreground download's resume data carries on in the background from the bytes on disk")
    func foregroundToBackground() throws {
        let payload = testPayload(size: 4 << 20, seed: 62)
        var slow = RouteOptions()
        slow.bytesPerSecond = 2 << 20
        server.serve("/handover.bin", data: payload, options: slow)

        let foregroundDelegate = RecordingDelegate()
        let foreground = URLSession(configuration: .default, delegate: foregroundDelegate, delegateQueue: nil)
        let task = foreground.downloadTask(with: server.url(for: "/handover.bin"))
        task.resume()
        #expect(waitUntil(timeout: 20) { task.countOfBytesReceived >= 1 << 20 }, "the foreground download did not get going")

        // The expiration handler: cancel with resume data, hand it to the background session.
        let done = DispatchSemaphore(value: 0)
        let box = Locked<Data?>(nil)
        task.cancel { data in
            box.withLock { $0 = data }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        let resumeData = try #require(box.withLock { $0 }, "a resumable foreground download gives resume data")
        #expect(foregroundDelegate.wait { if case .completed(task.taskIdentifier, -999, _) = $0 { return true } else { return false } })
        let offset = (try PropertyListSerialization.propertyList(from: resumeData, format: nil) as? [String: Any])?["NSURLSessionResumeBytesReceived"] as? Int64 ?? 0
        #expect(offset >= 1 << 20)

        let configuration = URLSessionConfiguration.background(withIdentifier: "handover")
        configuration.sharedContainerIdentifier = InProcess.group.rawValue
        configuration.sessionSendsLaunchEvents = false
        let backgroundDelegate = RecordingDelegate()
        let background = URLSession(configuration: configuration, delegate: backgroundDelegate, delegateQueue: nil)
        let continued = background.downloadTask(withResumeData: resumeData)
        continued.resume()
        #expect(backgroundDelegate.wait { if case .completed(continued.taskIdentifier, nil, 206) = $0 { return true } else { return false } }, "\(backgroundDelegate.calls)")
        #expect(backgroundDelegate.calls.contains(.resumed(task: continued.taskIdentifier, offset: offset, expected: Int64(payload.count))))
        #expect(backgroundDelegate.digests[continued.taskIdentifier] == SHA256.hexDigest(of: payload), "one whole file from two processes' bytes")
        #expect(server.bytesSent <= Int64(payload.count) + (256 << 10), "the bytes on disk were not fetched again (sent \(server.bytesSent))")
        background.invalidateAndCancel()
    }
}
}
