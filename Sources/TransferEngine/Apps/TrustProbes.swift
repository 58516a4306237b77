import Foundation
import TransferContainer
import TransferTransport
import TransferPOSIX

/// The handshake-only probes of servers whose chain failed a transfer (`ServerChainProbe`),
/// bounded per server and each with its own deadline: one probe per server (scheme, host, port
/// and proxy) at a time, whose result every task waiting for that server shares; each on a
/// thread of its own, so a server that never finishes its handshake holds up its own probe
/// only, never another server's. Past `maximumInFlight` servers at once, probes wait their
/// turn in order. Owned by the daemon's loop thread; results come back from the probing
/// threads through `finished`, and the loop is woken for them.
final class TrustProbes {
    /// What one probe looks at: a server, as seen through the task's proxy.
    struct Target: Hashable, Sendable {
        var scheme: String
        var host: String
        var port: Int
        var proxy: String?
    }

    /// One probe to run: its URL and how it judges the chain.
    struct Probe: Sendable {
        var target: Target
        var url: String
        var policy: TLSPolicy
        /// Seconds for the whole probe: connect, proxy tunnel and handshake(s).
        var deadline: Double
    }

    /// Probe threads at once (each blocks on one server for at most its deadline).
    static let maximumInFlight = 64
    /// The longest a probe may take, whatever the session's request timeout: a handshake
    /// that has not finished by then is not going to.
    static let longestDeadline: Double = 30

    private var inFlight: Set<Target> = []
    private var waiting: [Probe] = []
    private let finished = Locked<[(Target, Result<ServerTrustRecord, CurlError>)]>([])
    private let waker: CurlMulti.Waker

    init(waker: CurlMulti.Waker) {
        self.waker = waker
    }

    /// Probes `probe.target` unless a probe of it is under way or waiting already (its result
    /// will do for this one too). False when it was already being probed.
    @discardableResult
    func probe(_ probe: Probe) -> Bool {
        guard !inFlight.contains(probe.target), !waiting.contains(where: { $0.target == probe.target }) else { return false }
        waiting.append(probe)
        startWaiting()
        return true
    }

    /// The probes that ended since the last call, with what each learnt; frees their places.
    func takeFinished() -> [(Target, Result<ServerTrustRecord, CurlError>)] {
        let done = finished.withLock { finished in
            defer { finished.removeAll() }
            return finished
        }
        for (target, _) in done { inFlight.remove(target) }
        if !done.isEmpty { startWaiting() }
        return done
    }

    private func startWaiting() {
        while inFlight.count < Self.maximumInFlight, !waiting.isEmpty {
            let probe = waiting.removeFirst()
            inFlight.insert(probe.target)
            let finished = self.finished
            let waker = self.waker
            let thread = Thread {
                let outcome = ServerChainProbe.evaluate(url: probe.url, policy: probe.policy, proxy: probe.target.proxy, timeout: probe.deadline)
                finished.withLock { $0.append((probe.target, outcome)) }
                waker.wakeup()
            }
            thread.name = "trust probe \(probe.target.host):\(probe.target.port)"
            thread.stackSize = 1 << 20
            thread.start()
        }
    }
}
