import Foundation

/// Time → x for the timeline: linear, except that long stretches where nothing happens (a
/// rate limiter's minutes between two seconds-long bursts) are cut down to a fixed narrow
/// band, drawn as a break in the axis, so that every burst stays readable.
struct TimelineScale {
    /// One piece of the axis: `from...to` drawn on `x0...x1`; `isBreak` for a shortened gap.
    struct Piece {
        var from: Date
        var to: Date
        var x0: Double
        var x1: Double
        var isBreak: Bool

        var secondsPerPixel: Double { (to.timeIntervalSince(from)) / max(x1 - x0, 0.0001) }
    }

    let origin: Date
    let pieces: [Piece]
    let x0: Double
    let width: Double
    static let breakWidth = 44.0

    /// - Parameter moments: every time something is drawn at (its range sets the axis).
    init(moments: [Date], x0: Double, width: Double) {
        let sorted = moments.sorted()
        let first = sorted.first ?? Date()
        var last = sorted.last ?? first
        if last.timeIntervalSince(first) < 0.5 { last = first.addingTimeInterval(0.5) }
        self.origin = first
        self.x0 = x0
        self.width = width
        let span = last.timeIntervalSince(first)
        // A gap is cut when it is long in itself and a good part of the whole.
        let threshold = max(5, span * 0.2)
        var gaps: [(Date, Date)] = []
        for (a, b) in zip(sorted, sorted.dropFirst()) where b.timeIntervalSince(a) > threshold {
            // Keep a little on each side of the cut, so that marks near it are not on the break.
            let margin = threshold * 0.1
            gaps.append((a.addingTimeInterval(margin), b.addingTimeInterval(-margin)))
        }
        let cut = gaps.reduce(0.0) { $0 + $1.1.timeIntervalSince($1.0) }
        let linearWidth = max(width - Double(gaps.count) * Self.breakWidth, width * 0.3)
        let pixelsPerSecond = linearWidth / max(span - cut, 0.001)
        var pieces: [Piece] = []
        var time = first
        var x = x0
        for (a, b) in gaps {
            let w = a.timeIntervalSince(time) * pixelsPerSecond
            pieces.append(Piece(from: time, to: a, x0: x, x1: x + w, isBreak: false))
            x += w
            pieces.append(Piece(from: a, to: b, x0: x, x1: x + Self.breakWidth, isBreak: true))
            x += Self.breakWidth
            time = b
        }
        pieces.append(Piece(from: time, to: last, x0: x, x1: x + last.timeIntervalSince(time) * pixelsPerSecond, isBreak: false))
        self.pieces = pieces
    }

    var end: Date { pieces.last!.to }

    func x(_ date: Date) -> Double {
        if date <= origin { return pieces.first!.x0 }
        for piece in pieces where date <= piece.to {
            return piece.x0 + date.timeIntervalSince(piece.from) / piece.secondsPerPixel
        }
        return pieces.last!.x1
    }

    /// Tick times on the linear pieces, about every 90 pixels at a round step.
    func ticks() -> [Date] {
        var result: [Date] = []
        for (index, piece) in pieces.enumerated() where !piece.isBreak {
            let step = Self.roundStep(atLeast: 90 * piece.secondsPerPixel)
            let offset = piece.from.timeIntervalSince(origin)
            var t = (offset / step).rounded(.up) * step
            while t <= piece.to.timeIntervalSince(origin) + 1e-9 {
                let date = origin.addingTimeInterval(t)
                // (Not right against a break, where its label would run into the next piece's.)
                if piece.x1 - x(date) > 20 || index == pieces.count - 1 { result.append(date) }
                t += step
            }
        }
        return result
    }

    /// The tick label: seconds since the first moment ("+1.5 s", "+2:30", "+1:02:00").
    func label(_ date: Date) -> String {
        let seconds = date.timeIntervalSince(origin)
        let step = Self.roundStep(atLeast: 90 * (pieces.first { !$0.isBreak }?.secondsPerPixel ?? 1))
        if seconds < 60 || step < 1 {
            return step < 1 ? String(format: "+%.1f s", seconds) : String(format: "+%.0f s", seconds)
        }
        let whole = Int(seconds.rounded())
        if whole < 3600 { return String(format: "+%d:%02d", whole / 60, whole % 60) }
        return String(format: "+%d:%02d:%02d", whole / 3600, whole / 60 % 60, whole % 60)
    }

    static func roundStep(atLeast seconds: Double) -> Double {
        let steps: [Double] = [0.05, 0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400]
        return steps.first { $0 >= seconds } ?? 86400 * ((seconds / 86400).rounded(.up))
    }
}
