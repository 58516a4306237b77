import Foundation

/// How the numbers of a transfer read to a person: byte counts in binary units, rates and
/// time left. Pure functions, shared by `bgtransfer watch`, `bgtransfer inspect` and the
/// stand-ins' `--wait` bar; stateless, callable from any thread.
public enum ProgressFormat {
    private static let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]

    /// `512 B`, `12.3 KiB`, `1.0 GiB`; `?` for a negative count (`NSURLSessionTransferSizeUnknown`).
    public static func bytes(_ count: Int64) -> String {
        if count < 0 { return "?" }
        if count < 1024 { return "\(count) B" }
        var value = Double(count) / 1024
        var unit = 0
        // Move up before "%.1f" would round to 1024.0 of the smaller unit.
        while value >= 1023.95 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return String(format: "%.1f", value) + " " + units[unit]
    }

    /// `45.6 MiB/s`; `?/s` when no rate is known yet.
    public static func rate(_ bytesPerSecond: Double?) -> String {
        guard let bytesPerSecond, bytesPerSecond.isFinite, bytesPerSecond >= 0 else { return "?/s" }
        return bytes(Int64(bytesPerSecond.rounded())) + "/s"
    }

    /// Seconds until `expected` bytes are done at `bytesPerSecond`; nil when either is unknown
    /// or nothing moves.
    public static func secondsLeft(done: Int64, expected: Int64, bytesPerSecond: Double?) -> Double? {
        guard expected >= 0, let bytesPerSecond, bytesPerSecond > 0, bytesPerSecond.isFinite else { return nil }
        return Double(max(0, expected - done)) / bytesPerSecond
    }

    /// `0:23`, `12:05`, `1:02:03`; `--:--` when unknown or 100 hours or more (too far to mean anything).
    public static func timeLeft(_ seconds: Double?) -> String {
        guard let seconds, seconds.isFinite, seconds >= 0, seconds < 100 * 3600 else { return "--:--" }
        let total = Int(seconds.rounded(.up))
        let (hours, minutes, rest) = (total / 3600, total / 60 % 60, total % 60)
        let twoDigits = { (value: Int) in value < 10 ? "0\(value)" : "\(value)" }
        return hours > 0 ? "\(hours):\(twoDigits(minutes)):\(twoDigits(rest))" : "\(minutes):\(twoDigits(rest))"
    }
}
