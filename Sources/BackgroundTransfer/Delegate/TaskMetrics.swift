import Foundation
import FoundationNetworking
import TransferContainer
import TransferPOSIX

/// What the library measured of a task (Apple's `URLSessionTaskMetrics`), handed to
/// `urlSession(_:task:didFinishCollecting:)` just before `didCompleteWithError`. The
/// corelibs class of that name cannot be filled in from outside Foundation, so this module
/// declares its own, with Apple's names; it shadows the other for code that imports this
/// module. Immutable; any thread.
public final class URLSessionTaskMetrics: @unchecked Sendable, CustomStringConvertible {
    /// One entry per request-response exchange the library knows of (the last one). Made when
    /// first read, then kept: most delegates never look, and making the task's request and
    /// response objects for every delivered event was a cost of each small download.
    public var transactionMetrics: [URLSessionTaskTransactionMetrics] {
        transactions.withLock { state in
            switch state {
            case .made(let transactions):
                return transactions
            case .pending(let make):
                let transactions = make()
                state = .made(transactions) // and the task the maker held goes
                return transactions
            }
        }
    }
    /// From the task's creation to its completion.
    public let taskInterval: DateInterval
    /// Redirects followed on the way to the task's last response.
    public let redirectCount: Int
    // @unchecked Sendable: the one mutable part, the transactions, is behind its lock.
    private let transactions: Locked<Transactions>

    /// The transactions, or how to make them.
    private enum Transactions {
        case pending(@Sendable () -> [URLSessionTaskTransactionMetrics])
        case made([URLSessionTaskTransactionMetrics])
    }

    init(transactionMetrics: [URLSessionTaskTransactionMetrics], taskInterval: DateInterval, redirectCount: Int) {
        self.transactions = Locked(.made(transactionMetrics))
        self.taskInterval = taskInterval
        self.redirectCount = redirectCount
    }

    /// The metrics of a finished task: its record as it ended, the request it sent last and
    /// the response it got, asked for when the transactions are first read (the task's
    /// request and response do not change once it has completed).
    init(task record: TaskRecord, endedAt end: Date, request: @escaping @Sendable () -> URLRequest?, response: @escaping @Sendable () -> URLResponse?) {
        self.taskInterval = DateInterval(start: min(record.createdAt, end), end: end)
        // A record from disk is not trusted to hold a count that makes sense.
        self.redirectCount = max(0, record.redirectCount ?? 0)
        let networkProtocolName = record.networkProtocolName
        self.transactions = Locked(.pending({
            guard let request = request() else { return [] }
            let response = response()
            return [URLSessionTaskTransactionMetrics(request: request, response: response, networkProtocolName: networkProtocolName, responseEndDate: response == nil ? nil : end)]
        }))
    }

    /// The task's duration and the protocol of each exchange, for logs.
    public var description: String {
        "URLSessionTaskMetrics(\(String(format: "%.3f", taskInterval.duration)) s, \(transactionMetrics.map { $0.networkProtocolName ?? "?" }))"
    }
}

/// One exchange of a task (Apple's `URLSessionTaskTransactionMetrics`): the request, the
/// response, and the protocol negotiated ("h2", "http/1.1"). Immutable; any thread.
public final class URLSessionTaskTransactionMetrics: @unchecked Sendable {
    /// The request sent.
    public let request: URLRequest?
    /// The response received, if one was.
    public let response: URLResponse?
    /// ALPN's name of the protocol: "h2" over HTTP/2, "http/1.1"; nil when no response arrived.
    public let networkProtocolName: String?
    /// When the response's last byte arrived, as far as the library knows it (the task's end).
    public let responseEndDate: Date?
    /// Always a load from the network here (no cache, no server push).
    public let resourceFetchType: ResourceFetchType = .networkLoad

    /// Apple's `URLSessionTaskMetrics.ResourceFetchType`.
    public enum ResourceFetchType: Int, Sendable {
        /// Not known.
        case unknown
        /// Loaded from the network (always, here).
        case networkLoad
        /// Pushed by an HTTP/2 server.
        case serverPush
        /// Read from a local cache.
        case localCache
    }

    init(request: URLRequest?, response: URLResponse?, networkProtocolName: String?, responseEndDate: Date?) {
        self.request = request
        self.response = response
        self.networkProtocolName = networkProtocolName
        self.responseEndDate = responseEndDate
    }
}
