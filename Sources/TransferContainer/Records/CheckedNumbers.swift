import Foundation

/// The ranges that numbers from outside the process — records on disk, frames on the socket,
/// HTTP headers, an app's configuration — are held to before anything does arithmetic with
/// them. A value outside its range is an error for its record or line (identifiers, event
/// numbers), or is brought to the nearest bound (counters, intervals), never a trap.
public enum CheckedNumbers {
    /// Task identifiers a session hands out (S7.1): far more than any session makes, and far
    /// enough from `Int.max` that `identifier + 1` is always a number.
    public static let taskIdentifiers: ClosedRange<Int> = 1...Int(Int32.max)
    /// Event numbers, likewise far from `UInt64.max`.
    public static let eventNumbers: ClosedRange<UInt64> = 1...UInt64(Int64.max)
    /// Counters kept in a task record (revision, retries, refused credentials).
    public static let counters: ClosedRange<Int> = 0...Int(Int32.max)
    /// Byte counts: -1 is Apple's "unknown" (`NSURLSessionTransferSizeUnknown`).
    public static let byteCounts: ClosedRange<Int64> = -1...(Int64.max / 4)
    /// Intervals in seconds (timeouts, `Retry-After`): up to about 31 years.
    public static let intervals: ClosedRange<Double> = 0...1e9

    /// `value` if it is in `range`, else nil.
    public static func check<T: Comparable>(_ value: T, in range: ClosedRange<T>) -> T? {
        range.contains(value) ? value : nil
    }

    /// `value` brought into `range` (the nearest bound).
    public static func clamp<T: Comparable>(_ value: T, to range: ClosedRange<T>) -> T {
        min(max(value, range.lowerBound), range.upperBound)
    }

    /// `value` brought into `range`; NaN, which compares with nothing, is the lower bound.
    public static func clamp(_ value: Double, to range: ClosedRange<Double>) -> Double {
        value.isNaN ? range.lowerBound : min(max(value, range.lowerBound), range.upperBound)
    }

    /// A timeout an app or a record gave: a positive number of seconds up to the largest
    /// interval; `fallback` for zero, a negative number or NaN (which have no meaning as a
    /// timeout), the largest interval for anything larger (infinity included).
    public static func timeout(_ seconds: Double, fallback: Double) -> Double {
        guard seconds.isNaN == false, seconds > 0 else { return fallback }
        return min(seconds, intervals.upperBound)
    }

    /// `seconds` as whole seconds for an API that takes an integer, rounded up, within
    /// `0...Int.max` whatever it is (NaN is 0).
    public static func wholeSeconds(_ seconds: Double) -> Int {
        guard seconds.isNaN == false, seconds > 0 else { return 0 }
        let rounded = seconds.rounded(.up)
        return rounded >= 9.2e18 ? Int.max : Int(rounded)
    }

    /// A priority (0…1, S5); NaN is the default 0.5.
    public static func priority(_ value: Float) -> Float {
        value.isNaN ? 0.5 : min(max(value, 0), 1)
    }
}
