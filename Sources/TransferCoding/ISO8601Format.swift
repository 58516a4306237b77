import Foundation

/// ISO 8601 timestamps with milliseconds, UTC (`2026-11-21T14:51:50.705Z`). Written and read
/// by hand for dates from 1970 to 9999 (every record's, and the format style's calendar is
/// the proleptic Gregorian one there); others, and other forms of text, go through
/// Foundation's format style.
public enum ISO8601Format {
    private static let seconds = Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!)
    private static let withFraction = Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!)

    public static func string(from date: Date) -> String {
        // Whole milliseconds, rounded: the format style truncates, and a binary double just
        // below .123 would read back as .122.
        // A date an app made may be anything (1e300 s, NaN): it is written as the nearest one
        // a record can hold, 0001-01-01 to 9999-12-31, never trapped on.
        let scaled = (date.timeIntervalSince1970 * 1000).rounded()
        let milliseconds = Int64(scaled.isNaN ? -62_135_596_800_000 : min(max(scaled, -62_135_596_800_000), 253_402_300_799_999))
        let whole = milliseconds >= 0 ? milliseconds / 1000 : (milliseconds - 999) / 1000
        let fraction = Int(milliseconds - whole * 1000)
        let (year, month, day) = civil(days: Int(whole >= 0 ? whole / 86_400 : (whole - 86_399) / 86_400))
        guard whole >= 0, year <= 9999 else {
            var text = seconds.format(Date(timeIntervalSince1970: TimeInterval(whole)))
            text.removeLast() // "Z"
            return text + String(format: ".%03dZ", fraction)
        }
        let second = Int(whole % 86_400)
        return String(unsafeUninitializedCapacity: 24) { text in
            func put(_ value: Int, digits: Int, at offset: Int, then separator: UInt8) {
                var rest = value
                for index in (offset..<(offset + digits)).reversed() {
                    text[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                text[offset + digits] = separator
            }
            put(year, digits: 4, at: 0, then: UInt8(ascii: "-"))
            put(month, digits: 2, at: 5, then: UInt8(ascii: "-"))
            put(day, digits: 2, at: 8, then: UInt8(ascii: "T"))
            put(second / 3600, digits: 2, at: 11, then: UInt8(ascii: ":"))
            put(second / 60 % 60, digits: 2, at: 14, then: UInt8(ascii: ":"))
            put(second % 60, digits: 2, at: 17, then: UInt8(ascii: "."))
            put(fraction, digits: 3, at: 20, then: UInt8(ascii: "Z"))
            return 24
        }
    }

    public static func date(from text: String) -> Date? {
        if let date = exactDate(from: text) { return date }
        if let date = try? withFraction.parse(text) {
            // Parsing has the same binary rounding: settle on the nearest millisecond.
            return Date(timeIntervalSince1970: (date.timeIntervalSince1970 * 1000).rounded() / 1000)
        }
        return try? seconds.parse(text)
    }

    /// A date written as `string(from:)` writes it, from 1970 on; nil for any other text.
    private static func exactDate(from text: String) -> Date? {
        var text = text
        return text.withUTF8 { text -> Date? in
            guard text.count == 24, text[4] == UInt8(ascii: "-"), text[7] == UInt8(ascii: "-"), text[10] == UInt8(ascii: "T"), text[13] == UInt8(ascii: ":"),
                  text[16] == UInt8(ascii: ":"), text[19] == UInt8(ascii: "."), text[23] == UInt8(ascii: "Z") else { return nil }
            func number(_ range: Range<Int>) -> Int? {
                var value = 0
                for index in range {
                    let digit = text[index] &- UInt8(ascii: "0")
                    guard digit < 10 else { return nil }
                    value = value * 10 + Int(digit)
                }
                return value
            }
            guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10), let hour = number(11..<13),
                  let minute = number(14..<16), let second = number(17..<19), let milliseconds = number(20..<23),
                  year >= 1970, (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60 else { return nil }
            let days = self.days(year: year, month: month, day: day)
            guard civil(days: days) == (year, month, day) else { return nil } // no 31 June
            let seconds: Int = ((days * 24 + hour) * 60 + minute) * 60 + second
            // As the format style's result is rounded below: the whole number of milliseconds over 1000.
            return Date(timeIntervalSince1970: Double(seconds * 1000 + milliseconds) / 1000)
        }
    }

    /// The proleptic Gregorian date `days` days after 1970-01-01 (Howard Hinnant's `civil_from_days`).
    private static func civil(days: Int) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468 // from 0000-03-01
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153 // from March
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, dayOfYear - (153 * shiftedMonth + 2) / 5 + 1)
    }

    /// Days from 1970-01-01 to a proleptic Gregorian date (`days_from_civil`).
    private static func days(year: Int, month: Int, day: Int) -> Int {
        let marchYear = month <= 2 ? year - 1 : year
        let era = (marchYear >= 0 ? marchYear : marchYear - 399) / 400
        let yearOfEra = marchYear - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        return era * 146_097 + yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear - 719_468
    }
}
