import Foundation
import TransferCoding

/// What a task asks of the device before it may run (S5 table), fixed when the task is
/// created from the creating process's configuration and request.
public struct TaskRequirements: Codable, Sendable, Equatable {
    /// `allowsCellularAccess` of the configuration and of the request.
    public var allowsCellularAccess = true
    public var allowsExpensiveNetworkAccess = true
    public var allowsConstrainedNetworkAccess = true
    /// Runs only on Wi-Fi, while charging, out of Low Power Mode: `isDiscretionary` of a
    /// task created in the foreground, and every task created in the background.
    public var isDiscretionary = false

    public init(allowsCellularAccess: Bool = true, allowsExpensiveNetworkAccess: Bool = true, allowsConstrainedNetworkAccess: Bool = true, isDiscretionary: Bool = false) {
        self.allowsCellularAccess = allowsCellularAccess
        self.allowsExpensiveNetworkAccess = allowsExpensiveNetworkAccess
        self.allowsConstrainedNetworkAccess = allowsConstrainedNetworkAccess
        self.isDiscretionary = isDiscretionary
    }

    /// Why the network does not do for this task now, or nil when it does (S5.3: the task
    /// then waits, it never fails).
    public func connectivityProblem(under conditions: DeviceConditions) -> String? {
        switch conditions.network {
        case .offline: return "no network"
        case .cellular where !allowsCellularAccess: return "only cellular, and cellular access is not allowed"
        default: break
        }
        if conditions.expensive && !allowsExpensiveNetworkAccess { return "the network is expensive, and expensive network access is not allowed" }
        if conditions.constrained && !allowsConstrainedNetworkAccess { return "the network is constrained (Low Data Mode), and constrained network access is not allowed" }
        return nil
    }

    /// What discretionary work still waits for, or nil when conditions are good for it.
    public func discretionaryProblem(under conditions: DeviceConditions) -> String? {
        guard isDiscretionary else { return nil }
        var missing: [String] = []
        if conditions.network != .wifi { missing.append("Wi-Fi") }
        if conditions.power != .charging { missing.append("power") }
        if conditions.lowPowerMode { missing.append("Low Power Mode to end") }
        return missing.isEmpty ? nil : missing.joined(separator: " and ")
    }
}

/// Why a task the app has resumed is not transferring now. The daemon schedules by it, writes
/// it into its log lines (`LogEntry.hold`), and `inspect`, `watch` and the timeline show it:
/// one typed value, never read back from its words. A value type; any thread.
public enum TaskHold: Codable, Sendable, Equatable, CustomStringConvertible {
    case suspended
    /// Not before the task's `earliestBeginDate` (S5).
    case earliestBeginDate(Date)
    /// Waiting out a retry backoff or a `Retry-After` (S6.4) before attempt `attempt + 1`.
    case retry(attempt: Int, at: Date, cause: RetryCause)
    /// Created in the background while the app's resume rate limiter runs (S6.5).
    case rateLimiter(until: Date)
    /// The network does not do for the task (S5.3); `taskIsWaitingForConnectivity` (S5.2).
    case connectivity(String)
    /// Discretionary work waiting for Wi-Fi, power, or the end of Low Power Mode.
    case discretionary(waitingFor: String)
    /// A server or proxy asked for credentials; the app has not answered yet.
    case authentication(ChallengeRecord)
    /// Ready, but every transfer slot is taken: behind these sessions, most slots first
    /// (`FairShare` decides who goes next). Known to the running daemon only.
    case waitingForSlot(behind: [SlotHolder])

    /// Whether this is the wait `taskIsWaitingForConnectivity` tells the app of.
    public var isWaitingForConnectivity: Bool {
        if case .connectivity = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case .suspended: "suspended"
        case .earliestBeginDate(let date): "waiting for earliestBeginDate \(ISO8601Format.string(from: date))"
        case .retry(_, let date, let cause): "waiting to retry at \(ISO8601Format.string(from: date)) after: \(cause)"
        case .rateLimiter(let date): "created in the background: waiting out the resume rate limiter until \(ISO8601Format.string(from: date))"
        case .connectivity(let problem): "waiting for connectivity: \(problem)"
        case .discretionary(let missing): "discretionary: waiting for \(missing)"
        case .authentication(let challenge) where challenge.serverTrust != nil:
            "waiting for the app to judge the certificate of \(challenge.protectionSpace.host):\(challenge.protectionSpace.port) (\(challenge.serverTrust?.failureReason ?? "a server-trust challenge"))"
        case .authentication(let challenge):
            "waiting for the app to answer an authentication challenge: \(challenge.protectionSpace.method.rawValue) realm \"\(challenge.protectionSpace.realm ?? "")\" at \(challenge.protectionSpace.isProxy ? "proxy " : "")\(challenge.protectionSpace.host):\(challenge.protectionSpace.port)\(challenge.previousFailureCount > 0 ? ", \(challenge.previousFailureCount) refused" : "")"
        case .waitingForSlot(let holders):
            "waiting for a transfer slot behind \(holders.isEmpty ? "other transfers" : holders.map(\.description).joined(separator: ", "))"
        }
    }
}

extension TaskRecord {
    /// What holds the task back under `conditions` at `now`, or nil when it may start
    /// (it then runs, or waits only for a free connection).
    public func hold(under conditions: DeviceConditions, now: Date) -> TaskHold? {
        if self.state == .suspended { return .suspended }
        if let challenge = self.pendingChallenge { return .authentication(challenge) }
        if let begin = self.earliestBeginDate, begin > now { return .earliestBeginDate(begin) }
        if let retry = self.retryNotBefore, retry > now { return .retry(attempt: self.retryCount, at: retry, cause: self.retryCause ?? .unrecorded(self.lastError ?? "an error")) }
        if let until = self.rateLimitedUntil, until > now { return .rateLimiter(until: until) }
        if let problem = self.requirements.connectivityProblem(under: conditions) { return .connectivity(problem) }
        if let missing = self.requirements.discretionaryProblem(under: conditions) { return .discretionary(waitingFor: missing) }
        return nil
    }
}
