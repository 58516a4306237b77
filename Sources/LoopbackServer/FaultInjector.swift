import Foundation

/// Random faults for a route, drawn from a seeded generator so that a failing run can be
/// replayed: some requests get `503` with `Retry-After`, some bodies are cut off part-way.
/// Shared by every connection thread that serves the route; its state is behind a lock.
public final class FaultInjector: @unchecked Sendable {
    /// What one request gets.
    public enum Fault: Sendable, Equatable {
        /// Served normally.
        case none
        /// Answered `503` with `Retry-After` seconds.
        case unavailable(retryAfter: Int)
        /// Cut the body after this fraction of it (0..<1).
        case drop(fraction: Double)
    }

    /// The generator's seed: the same seed draws the same faults for the same requests.
    public let seed: UInt64
    private let unavailableProbability: Double
    private let dropProbability: Double
    private let retryAfter: Int
    private let lock = NSLock()
    private var state: UInt64
    private var unavailableCount = 0
    private var dropCount = 0

    /// - Parameters:
    ///   - seed: the generator's seed; the same seed draws the same faults again.
    ///   - unavailable: the share of requests answered `503` with `Retry-After: retryAfter`.
    ///   - drop: the share of bodies cut off at a random point.
    ///   - retryAfter: the seconds the `503`s ask for.
    public init(seed: UInt64, unavailable: Double, drop: Double, retryAfter: Int = 1) {
        self.seed = seed
        self.state = seed == 0 ? 0x9E3779B97F4A7C15 : seed
        self.unavailableProbability = unavailable
        self.dropProbability = drop
        self.retryAfter = retryAfter
    }

    /// How many of each fault were injected so far.
    public var counts: (unavailable: Int, dropped: Int) {
        lock.lock()
        defer { lock.unlock() }
        return (unavailableCount, dropCount)
    }

    func draw() -> Fault {
        lock.lock()
        defer { lock.unlock() }
        let roll = next()
        if roll < unavailableProbability {
            unavailableCount += 1
            return .unavailable(retryAfter: retryAfter)
        }
        if roll < unavailableProbability + dropProbability {
            dropCount += 1
            return .drop(fraction: next() * 0.9)
        }
        return .none
    }

    /// xorshift64*, as a double in 0..<1.
    private func next() -> Double {
        state ^= state >> 12
        state ^= state << 25
        state ^= state >> 27
        return Double((state &* 2685821657736338717) >> 11) / Double(1 << 53)
    }
}
