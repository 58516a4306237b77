/// The typed record of what the delegates of a device's processes saw (`DelegateEventRecorder`
/// writes it, one file a process), read back by a test: waits with deadlines, and checks of
/// Apple's order. A value over the folder; each read sees what is on disk then.
public struct DelegateEventLog: Sendable {
    /// The folder the recorder writes to.
    public let folder: URL

    /// The record in `folder` (a device's is `SimulatedDevice.events`; this reads one kept
    /// after a test, or made by hand).
    public init(folder: URL) {
        self.folder = folder
    }

    /// Every event recorded so far: each process's in the order it saw them, processes by the
    /// time of their first event.
    public var all: [DelegateEvent] {
        let files = (try? FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)) ?? []
        let decoder = JSONDecoder()
        let perProcess = files.filter { $0.pathExtension == "jsonl" }.map { file -> [DelegateEvent] in
            let text = (try? String(contentsOf: file, encoding: .utf8)) ?? ""
            // A line cut by a SIGKILL mid-write is no event.
            return text.split(separator: "\n").compactMap { try? decoder.decode(DelegateEvent.self, from: Data($0.utf8)) }.sorted { $0.sequence < $1.sequence }
        }
        return perProcess.filter { !$0.isEmpty }.sorted { ($0[0].time, $0[0].pid) < ($1[0].time, $1[0].pid) }.flatMap { $0 }
    }

    /// The events of the processes of executable `process`.
    public func of(_ process: String) -> [DelegateEvent] { all.filter { $0.process == process } }

    /// Waits until an event matches, and returns the first that does; throws at the deadline,
    /// listing what was recorded.
    @discardableResult
    public func first(within timeout: TimeInterval = 30, _ description: String, where matches: @escaping @Sendable (DelegateEvent) -> Bool) async throws -> DelegateEvent {
        do {
            return try await eventually(within: timeout, description) { all.first(where: matches) }
        } catch {
            throw TestingFailure(expected: "\(description) within \(timeout) s", happened: "recorded: \(Self.summary(all))")
        }
    }

    /// Waits until task `task` of session `session` completes (`didCompleteWithError`) in any
    /// process, and returns that event.
    @discardableResult
    public func completion(of task: Int, in session: String, within timeout: TimeInterval = 30) async throws -> DelegateEvent {
        try await first(within: timeout, "task \(task) of \(session) to complete") { $0.kind == .didCompleteWithError && $0.session == session && $0.task == task }
    }

    /// Checks Apple's order (S3.2) in each process's calls for each session: a task's
    /// `didFinishDownloadingTo` comes before its `didCompleteWithError`, nothing of a task
    /// after its `didCompleteWithError`, and `urlSessionDidFinishEvents` at most once a batch,
    /// after every completion of it, with no completion after it. A batch is a process's
    /// launch, or a wake of the same process (a recorded `handleEventsForBackgroundURLSession`):
    /// events that come after a batch's `urlSessionDidFinishEvents` reach the app only in a
    /// new one. Throws naming the first event out of place.
    public func checkAppleOrder() throws {
        var byProcessSession: [String: [DelegateEvent]] = [:]
        for event in all where event.session != nil {
            byProcessSession["\(event.pid) \(event.session ?? "")", default: []].append(event)
        }
        for events in byProcessSession.values {
            var completed = Set<Int>(), finished = Set<Int>(), finishedEvents = false
            for event in events {
                let expected: String?
                switch event.kind {
                case .handleEventsForBackgroundURLSession:
                    expected = nil
                    finishedEvents = false // a wake: a new batch
                case .didFinishEvents:
                    expected = finishedEvents ? "urlSessionDidFinishEvents once a batch" : nil
                    finishedEvents = true
                case .didCompleteWithError:
                    let again = event.task.map { completed.contains($0) } == true
                    expected = finishedEvents ? "no completion after urlSessionDidFinishEvents but in a new wake"
                        : again ? "one completion a task" : nil
                    if let task = event.task { completed.insert(task) }
                case .didFinishDownloadingTo:
                    expected = finishedEvents ? "no finished download after urlSessionDidFinishEvents"
                        : event.task.map { completed.contains($0) || finished.contains($0) } == true ? "didFinishDownloadingTo once, before didCompleteWithError" : nil
                    if let task = event.task { finished.insert(task) }
                default:
                    expected = event.task.map { completed.contains($0) } == true ? "nothing of a task after its didCompleteWithError" : nil
                }
                if let expected {
                    throw TestingFailure(expected: "\(expected) (S3.2)", happened: "\(Self.describe(event)); \(event.process)'s calls for \(event.session ?? ""): \(Self.summary(events))")
                }
            }
        }
    }

    /// Checks that no task's `didFinishDownloadingTo` or `didCompleteWithError` reached the
    /// app twice, over every process (a process SIGKILLed before the daemon had its
    /// acknowledgement does get them again, S3.4: pass `exceptFrom` its pid).
    public func checkNothingDeliveredTwice(exceptFrom killed: Set<Int32> = []) throws {
        var seen: [String: DelegateEvent] = [:]
        for event in all where !killed.contains(event.pid) && (event.kind == .didFinishDownloadingTo || event.kind == .didCompleteWithError) {
            let key = "\(event.kind.rawValue) \(event.session ?? "") \(event.task ?? -1)"
            if let earlier = seen[key] {
                throw TestingFailure(expected: "each task's \(event.kind.rawValue) delivered once", happened: "\(Self.describe(earlier)), then again \(Self.describe(event))")
            }
            seen[key] = event
        }
    }

    /// "reader-app[412] didCompleteWithError task 1 of downloads (-999)".
    static func describe(_ event: DelegateEvent) -> String {
        let task = event.task.map { " task \($0)" } ?? ""
        let code = event.errorCode.map { " (\($0))" } ?? ""
        return "\(event.process)[\(event.pid)] \(event.kind.rawValue)\(task) of \(event.session ?? "-")\(code)"
    }

    static func summary(_ events: [DelegateEvent]) -> String {
        events.isEmpty ? "nothing" : events.filter { $0.kind != .didWriteData }.map(describe).joined(separator: ", ")
    }
}
