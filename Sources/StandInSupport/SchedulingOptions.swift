import BackgroundTransfer

/// `[--discretionary] [--no-cellular] [--no-expensive] [--no-constrained]
/// [--begin-after SECONDS] [--priority 0…1] [--request-timeout SECONDS]`: how the stand-ins'
/// download and upload commands ask the daemon to schedule a task (S5), through Apple's
/// configuration and task properties.
public struct SchedulingOptions {
    public var isDiscretionary = false
    public var allowsCellularAccess = true
    public var allowsExpensiveNetworkAccess = true
    public var allowsConstrainedNetworkAccess = true
    /// `earliestBeginDate` this long after the task is created.
    public var beginAfter: TimeInterval?
    public var priority: Float?
    /// The session's `timeoutIntervalForRequest`: how long a link may stay silent.
    public var requestTimeout: TimeInterval?

    public static let usage = "[--discretionary] [--no-cellular] [--no-expensive] [--no-constrained] [--begin-after SECONDS] [--priority 0…1] [--request-timeout SECONDS]"

    public init() {}

    /// Takes `option` (and its value from `rest`) if it is one of these; false if not.
    mutating func parse(_ option: String, _ rest: inout ArraySlice<String>) throws(UsageError) -> Bool {
        switch option {
        case "--discretionary": isDiscretionary = true
        case "--no-cellular": allowsCellularAccess = false
        case "--no-expensive": allowsExpensiveNetworkAccess = false
        case "--no-constrained": allowsConstrainedNetworkAccess = false
        case "--begin-after":
            guard let text = rest.popFirst(), let seconds = TimeInterval(text), seconds >= 0 else { throw UsageError("--begin-after needs a number of seconds") }
            beginAfter = seconds
        case "--priority":
            guard let text = rest.popFirst(), let value = Float(text), (0...1).contains(value) else { throw UsageError("--priority needs a number from 0 to 1") }
            priority = value
        case "--request-timeout":
            guard let text = rest.popFirst(), let seconds = TimeInterval(text), seconds > 0, seconds.isFinite else { throw UsageError("--request-timeout needs a number of seconds above 0") }
            requestTimeout = seconds
        default:
            return false
        }
        return true
    }

    func configure(_ configuration: URLSessionConfiguration) {
        configuration.isDiscretionary = isDiscretionary
        configuration.allowsCellularAccess = allowsCellularAccess
        configuration.allowsExpensiveNetworkAccess = allowsExpensiveNetworkAccess
        configuration.allowsConstrainedNetworkAccess = allowsConstrainedNetworkAccess
        if let requestTimeout { configuration.timeoutIntervalForRequest = requestTimeout }
    }

    /// Sets the task's properties; before `resume()`.
    func apply(to task: URLSessionTask) {
        if let beginAfter { task.earliestBeginDate = Date().addingTimeInterval(beginAfter) }
        if let priority { task.priority = priority }
    }
}

/// Reads a command's value-taking option.
func optionValue(for option: String, _ rest: inout ArraySlice<String>) throws(UsageError) -> String {
    guard let value = rest.popFirst() else { throw UsageError("\(option) needs a value") }
    return value
}
