import Glibc

/// IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`, RFC 9110 §5.6.7) formatting and parsing
/// on whole seconds since the epoch: the loopback server's dates and the `Retry-After` dates
/// the daemon reads. Stateless (gmtime_r/timegm); callable from any thread.
public enum HTTPDate {
    private static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                 "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    public static func format(_ seconds: Int) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(weekdays[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) "
            + "\(parts.tm_year + 1900) \(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }

    public static func now() -> String {
        format(Int(time(nil)))
    }

    /// Seconds since the epoch, or nil unless `text` is a valid IMF-fixdate.
    public static func parse(_ text: String) -> Int? {
        let fields = text.split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 6, fields[5] == "GMT",
              fields[0].count == 4, fields[0].hasSuffix(","),
              weekdays.contains(String(fields[0].dropLast())),
              fields[1].count == 2, let day = Int32(fields[1]),
              let month = months.firstIndex(of: String(fields[2])),
              fields[3].count == 4, let year = Int32(fields[3]) else { return nil }
        let clock = fields[4].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
              let hour = Int32(clock[0]), let minute = Int32(clock[1]), let second = Int32(clock[2]),
              (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second)
        else { return nil }
        var parts = tm()
        parts.tm_year = year - 1900
        parts.tm_mon = Int32(month)
        parts.tm_mday = day
        parts.tm_hour = hour
        parts.tm_min = minute
        parts.tm_sec = second
        return Int(timegm(&parts))
    }
}
