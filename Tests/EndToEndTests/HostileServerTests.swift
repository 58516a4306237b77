import Foundation
import Testing
import BackgroundTransfer
import LoopbackServer
import TransferContainer
import TransferCoding
import TransferPOSIX

/// Servers that lie and apps that pass boundary numbers (issue "hostile servers, hostile
/// peers, hostile records"): the daemon neither crashes nor fills the disk, and each bad
/// answer becomes an error for its task.
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class HostileServerTests: InProcessSuite, @unchecked Sendable {
    /// The daemon of this container: its pid, to show it is the same process at the end.
    private func daemonPID() -> Int32? {
        container.processesNamingContainer(executable: "transferd").first
    }

    @Test("503 with Retry-After: 99999999999999999999 does not crash the daemon: more than the resource timeout allows ends the task with -1001 at once, not in a loop of requests")
    func hugeRetryAfter() throws {
        let daemon = try #require(daemonPID())
        var options = RouteOptions()
        options.status = 503
        options.extraHeaders = [("Retry-After", "99999999999999999999")]
        server.serve("/forever", data: Data("busy".utf8), options: options)
        let delegate = RecordingDelegate()
        let session = fixture.session("huge-retry-after", delegate: delegate) { $0.timeoutIntervalForResource = 600 }
        let task = session.downloadTask(with: server.url(for: "/forever"))
        task.resume()
        #expect(delegate.wait(timeout: 20) { if case .completed(task.taskIdentifier, -1001, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(server.requests.filter { $0.path == "/forever" }.count == 1, "the server asked for more time than the task has: no second request")
        let error = delegate.errors[task.taskIdentifier] as NSError?
        #expect(error?.localizedDescription.contains("Retry-After") == true, "the error says why: \(String(describing: error))")
        #expect(ProcessSpawner.isAlive(daemon) && daemonPID() == daemon, "the daemon that read the header still runs")
        session.invalidateAndCancel()
    }

    @Test("Retry-After values that are no number of seconds (a sign, an exponent, nan, empty) leave the 503 to be delivered (S2.5)")
    func unusableRetryAfter() throws {
        let daemon = try #require(daemonPID())
        let delegate = RecordingDelegate()
        let session = fixture.session("odd-retry-after", delegate: delegate)
        var tasks: [URLSessionDownloadTask] = []
        for (index, value) in ["-5", "1e400", "nan", "", "0x10", "18446744073709551616.5"].enumerated() {
            var options = RouteOptions()
            options.status = 503
            options.extraHeaders = [("Retry-After", value)]
            server.serve("/odd/\(index)", data: Data("busy".utf8), options: options)
            let task = session.downloadTask(with: server.url(for: "/odd/\(index)"))
            task.resume()
            tasks.append(task)
        }
        for task in tasks {
            #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 503) }, "\(delegate.calls)")
        }
        #expect(ProcessSpawner.isAlive(daemon) && daemonPID() == daemon)
        session.invalidateAndCancel()
    }

    @Test("Timeouts of every size an app can set (greatestFiniteMagnitude, infinity, NaN, -1, 0, 9.3e18) are held to a range: each download completes and the daemon stays up")
    func boundaryTimeouts() throws {
        let daemon = try #require(daemonPID())
        let payload = testPayload(size: 64 << 10, seed: 5)
        server.serve("/small.bin", data: payload)
        let values: [Double] = [.greatestFiniteMagnitude, .infinity, .nan, -1, 0, 9.3e18, -.infinity]
        for (index, value) in values.enumerated() {
            let delegate = RecordingDelegate()
            let session = fixture.session("timeouts-\(index)", delegate: delegate) { configuration in
                configuration.timeoutIntervalForRequest = value
                configuration.timeoutIntervalForResource = value
            }
            var request = URLRequest(url: server.url(for: "/small.bin"))
            request.timeoutInterval = value
            let task = session.downloadTask(with: request)
            task.resume()
            #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) }, "timeout \(value): \(delegate.calls)")
            #expect(delegate.calls.contains(.finishedDownloading(task: task.taskIdentifier, existedDuringCall: true, size: Int64(payload.count))))
            session.invalidateAndCancel()
        }
        #expect(ProcessSpawner.isAlive(daemon) && daemonPID() == daemon, "no timeout value crashed the daemon")
        // What the daemon keeps is in range too: it reads its own records back at start.
        for index in values.indices {
            let record = try RecordCoding.read(SessionRecord.self, from: container.sessionDirectory("timeouts-\(index)", family: InProcess.app.family).appendingPathComponent("session.json").path)
            #expect(CheckedNumbers.intervals.contains(record.configuration.timeoutIntervalForRequest) && record.configuration.timeoutIntervalForRequest > 0)
            #expect(CheckedNumbers.intervals.contains(record.configuration.timeoutIntervalForResource) && record.configuration.timeoutIntervalForResource > 0)
        }
    }

    @Test("earliestBeginDate and priority of any value an app can set (1e300 s, -1e300 s, infinities, NaN) are held to a range: creating the task does not trap, a date in the past (or none) starts it at once")
    func boundaryTaskProperties() throws {
        server.serve("/dated.bin", data: testPayload(size: 16 << 10, seed: 8))
        let delegate = RecordingDelegate()
        let session = fixture.session("dated", delegate: delegate)
        var waiting: [URLSessionDownloadTask] = []
        for (seconds, priority) in [(1e300, Float.nan), (Double.greatestFiniteMagnitude, -Float.infinity), (1e300, Float.infinity)] {
            let task = session.downloadTask(with: server.url(for: "/dated.bin"))
            task.earliestBeginDate = Date(timeIntervalSince1970: seconds)
            task.priority = priority
            task.resume()
            waiting.append(task)
        }
        // In the past, or no date at all (an infinite or NaN one is none): it starts at once.
        for seconds in [-1e300, -Double.infinity, Double.nan, Double.infinity] {
            let task = session.downloadTask(with: server.url(for: "/dated.bin"))
            task.earliestBeginDate = Date(timeIntervalSince1970: seconds)
            task.resume()
            #expect(delegate.wait { $0 == .completed(task: task.taskIdentifier, code: nil, status: 200) }, "earliestBeginDate \(seconds): \(delegate.calls)")
        }
        let tasks = try #require(allTasks(session))
        #expect(Set(tasks.map(\.taskIdentifier)) == Set(waiting.map(\.taskIdentifier)), "the far-future tasks wait")
        #expect(tasks.allSatisfy { (0...1).contains($0.priority) }, "\(tasks.map(\.priority))")
        session.invalidateAndCancel()
    }

    @Test("A 206 answering a request that asked for no range is an error (-1011), not a file")
    func unsolicitedPartialContent() throws {
        var options = RouteOptions()
        options.status = 206
        options.extraHeaders = [("Content-Range", "bytes 0-4/100")]
        server.serve("/part", data: Data("whole".utf8), options: options)
        let delegate = RecordingDelegate()
        let session = fixture.session("unsolicited-206", delegate: delegate)
        let task = session.downloadTask(with: server.url(for: "/part"))
        task.resume()
        #expect(delegate.wait { if case .completed(task.taskIdentifier, -1011, _) = $0 { return true } else { return false } }, "\(delegate.calls)")
        #expect(!delegate.calls.contains { if case .finishedDownloading = $0 { return true } else { return false } }, "no file was delivered")
        session.invalidateAndCancel()
    }

    @Test("acknowledge(through: UInt64.max) is refused and written nowhere: the daemon and the journal stay usable")
    func acknowledgePastTheLastEvent() throws {
        let daemon = try #require(daemonPID())
        let client = try RawClient.attached(container, as: InProcess.app, session: "ack-max")
        defer { client.close() }
        let identifier = try SessionIdentifier("ack-max")
        for through in [UInt64.max, UInt64(Int64.max), 1] {
            let reply = try client.request(.acknowledge(session: identifier, through: through))
            guard case .failure(let failure) = reply else {
                Issue.record("acknowledge(through: \(through)) with no events answered \(reply)")
                continue
            }
            #expect(failure.code == TransferFailure.requestRefused && failure.message.contains("\(through)"), "\(failure)")
        }
        #expect(ProcessSpawner.isAlive(daemon) && daemonPID() == daemon)
        let journal = try JournalContents.read(session: container.sessionDirectory("ack-max", family: InProcess.app.family))
        #expect(journal.unreadable.isEmpty && journal.counters.nextEventNumber == 1, "nothing past the last event was written")
    }
}
}

extension TestContainer {
    /// A session's folder in the family `family`.
    func sessionDirectory(_ identifier: String, family: BundleIdentifier) -> URL {
        layout.sessionDirectory(family: family, identifier: try! SessionIdentifier(identifier))
    }
}
