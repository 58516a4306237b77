import Foundation
import TransferContainer

/// What carries out a session's tasks: the daemon, for background sessions (`SessionCore`),
/// or this process, for default sessions (`LocalSessionCore`). Tasks and `URLSession` talk
/// to it only through these operations. Implementations are thread-safe.
protocol SessionBackend: AnyObject, Sendable {
    var delegate: URLSessionDelegate? { get }
    var delegateQueue: OperationQueue { get }
    var primary: URLSession? { get }
    var isInvalidated: Bool { get }

    func adopt(primary session: URLSession)
    func createTask(_ creation: TaskCreation) throws(TransferFailure) -> URLSessionTask
    /// A task identifier no task of this session has or will have (for a task refused before creation).
    func reserveTaskIdentifier() -> Int
    func resume(_ task: URLSessionTask)
    func suspend(_ task: URLSessionTask)
    func cancel(_ task: URLSessionTask)
    /// Cancels; returns resume data when the download can be resumed (S6.1).
    func cancel(_ task: URLSessionTask, produceResumeData: Bool) -> Data?
    /// The app set `taskDescription`, `priority`, `earliestBeginDate` or a byte-count hint.
    func propertiesChanged(of task: URLSessionTask)
    /// Calls `done` with the session's unfinished tasks; no thread waits for the daemon meanwhile.
    func allTasks(_ done: @escaping @Sendable ([URLSessionTask]) -> Void)
    func invalidate(cancelTasks: Bool)
    func waitForBacklog(timeout: TimeInterval) -> Bool
    /// Returns once every event received so far has been handed to the delegate and acknowledged.
    func drainDeliveries()
    /// Waits until every task created and every change made so far is durable; false on timeout.
    func waitForAnswers(timeout: TimeInterval) -> Bool
}
