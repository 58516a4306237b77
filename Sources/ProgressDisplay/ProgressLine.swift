import Foundation

/// One line of a transfer's progress as a person reads it, fitted to a width:
/// `label [=======>     ] 12.3 MiB / 1.0 GiB  45.6 MiB/s  ETA 0:23`.
/// A value; rendering is pure. Shared by `bgtransfer watch` and the stand-ins' `--wait` bar.
public struct ProgressLine: Sendable, Equatable {
    public var label: String
    /// Bytes received (download) or sent (upload).
    public var done: Int64
    /// Negative when unknown.
    public var expected: Int64
    public var bytesPerSecond: Double?
    /// Why nothing moves (`waiting`, `retry 2`): said instead of a rate, with no time left.
    public var waiting: String?

    public init(label: String, done: Int64, expected: Int64, bytesPerSecond: Double?, waiting: String? = nil) {
        self.label = label
        self.done = done
        self.expected = expected
        self.bytesPerSecond = bytesPerSecond
        self.waiting = waiting
    }

    /// The inside of a bar is never narrower (else there is none) nor wider than this.
    public static let barWidths = 10...40
    /// A label is shortened down to this before the bar is given up.
    public static let shortestLabel = 12

    /// What a task is called on a progress line: its description, else the last component of
    /// its URL's path, else the URL's host, else the URL.
    public static func taskName(description: String?, url: String) -> String {
        if let description, !description.isEmpty { return description }
        guard let components = URLComponents(string: url) else { return url }
        if let last = components.path.split(separator: "/").last { return String(last) }
        return components.host.flatMap { $0.isEmpty ? nil : $0 } ?? url
    }

    /// Bytes, rate and time left: the part of the line that is never shortened. Padded to
    /// their usual widths (`1023.9 MiB`, `1023.9 KiB/s`, `12:05`), so that a redrawn line keeps
    /// its bar's width and its columns while the numbers change.
    public var figures: String {
        let timeLeft = waiting == nil ? ProgressFormat.secondsLeft(done: done, expected: expected, bytesPerSecond: bytesPerSecond) : nil
        let speed = waiting ?? ProgressFormat.rate(bytesPerSecond)
        return "\(Self.pad(ProgressFormat.bytes(done), to: 10, left: true)) / \(ProgressFormat.bytes(expected))  \(Self.pad(speed, to: 12, left: true))  ETA \(Self.pad(ProgressFormat.timeLeft(timeLeft), to: 5))"
    }

    /// The line in at most `width` characters. With `labelWidth`, the label is padded to it
    /// (so that the bars of several lines start in one column). Room goes to the figures
    /// first, then to the bar at its narrowest, then to the label, then to a wider bar.
    public func render(width: Int, labelWidth: Int? = nil) -> String {
        let figures = self.figures
        let wanted = max(labelWidth ?? 0, label.count)
        // `label [bar] figures`: four characters of punctuation around the bar.
        let besideBar = width - figures.count - 4
        let line: String
        if besideBar - wanted >= Self.barWidths.lowerBound {
            let bar = min(Self.barWidths.upperBound, besideBar - wanted)
            line = "\(Self.pad(label, to: wanted)) [\(self.bar(width: bar))] \(figures)"
        } else if besideBar - Self.shortestLabel >= Self.barWidths.lowerBound {
            let room = besideBar - Self.barWidths.lowerBound
            line = "\(Self.pad(Self.shorten(label, to: room), to: room)) [\(self.bar(width: Self.barWidths.lowerBound))] \(figures)"
        } else {
            let room = min(wanted, width - figures.count - 1)
            line = room > 0 ? "\(Self.pad(Self.shorten(label, to: room), to: room)) \(figures)" : figures
        }
        return line.count <= width ? line : String(line.prefix(max(0, width)))
    }

    /// `=====>     `: done over expected; blank when the size is unknown.
    public func bar(width: Int) -> String {
        guard width > 0 else { return "" }
        guard expected >= 0 else { return String(repeating: " ", count: width) }
        let fraction = expected == 0 ? 1 : min(1, max(0, Double(done) / Double(expected)))
        let filled = Int(fraction * Double(width))
        if filled >= width { return String(repeating: "=", count: width) }
        return String(repeating: "=", count: filled) + ">" + String(repeating: " ", count: width - filled - 1)
    }

    /// `text` in at most `width` characters, its middle replaced by `…` (both ends of an
    /// identifier or a file name say the most).
    public static func shorten(_ text: String, to width: Int) -> String {
        guard text.count > width else { return text }
        guard width > 1 else { return width == 1 ? "…" : "" }
        let head = width / 2
        return String(text.prefix(head)) + "…" + String(text.suffix(width - 1 - head))
    }

    private static func pad(_ text: String, to width: Int, left: Bool = false) -> String {
        guard text.count < width else { return text }
        let padding = String(repeating: " ", count: width - text.count)
        return left ? padding + text : text + padding
    }
}
