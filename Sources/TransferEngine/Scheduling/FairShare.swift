import Foundation
import TransferContainer

/// Who gets a transfer slot when there are fewer slots (`--max-transfers`) than tasks ready
/// to use them, and whose transfer gives one back (issue 28). A value the scheduler makes on
/// the daemon's loop thread for each look down the ready queue; it reads the time it is
/// given (the daemon's clock), nothing else.
///
/// The rule, max-min fair shares, between apps first, then between the sessions of an app:
/// - **Who starts next.** Among the tasks that may start, one of the app holding the fewest
///   slots goes first; within the app, one of its session holding the fewest; within the
///   session, best priority, then oldest, as before (`ReadyQueue.Candidate.precedes`).
/// - **Shares.** Each app's share is what it asks for (transfers running plus tasks ready)
///   up to an equal part of the slots, the parts that apps asking less leave over shared
///   equally by the others (water-filling, `shares`); an app's share is split between its
///   sessions by the same rule.
/// - **Giving back.** While all slots are taken and an app (or session) waits below its
///   share, transfers of those above their share stop and go back to the queue, the most
///   recently started first, so that no app holds more than its share while another
///   waits. A transfer that has run less than `minimumRun` is not stopped (a slot is not
///   passed to and fro); a stopped download resumes from its bytes on disk, as after a
///   pause for device conditions, and an upload from the server's offset when it offered
///   resumption. Without this, transfers that never end (a server trickling a byte a
///   second) would keep their slots for ever.
struct FairShare {
    /// A transfer in flight, as the policy sees it.
    struct Running: Equatable {
        var task: TaskKey
        var startedAt: Date
    }

    /// Slots in all (the daemon's `maximumConcurrentTransfers`).
    var limit: Int
    /// A transfer that started less than this ago keeps its slot.
    var minimumRun: TimeInterval = 5

    /// Where a ready task stands for the next slot: lower goes first (then priority, age).
    struct Rank: Comparable {
        var appTransfers: Int
        var sessionTransfers: Int
        static func < (a: Rank, b: Rank) -> Bool {
            (a.appTransfers, a.sessionTransfers) < (b.appTransfers, b.sessionTransfers)
        }
    }

    /// Transfers running now, counted by app and by session, kept up to date through a look
    /// down the queue as tasks start.
    struct Counts {
        private(set) var byApp: [BundleIdentifier: Int] = [:]
        private(set) var bySession: [SessionKey: Int] = [:]

        init<Keys: Sequence>(running: Keys) where Keys.Element == TaskKey {
            for key in running { add(key.session) }
        }

        mutating func add(_ session: SessionKey) {
            byApp[session.family, default: 0] += 1
            bySession[session, default: 0] += 1
        }

        func rank(of session: SessionKey) -> Rank {
            Rank(appTransfers: byApp[session.family] ?? 0, sessionTransfers: bySession[session] ?? 0)
        }

        /// The sessions holding slots, most first: whom a waiting task waits behind.
        func holders(atMost count: Int = 3) -> [SlotHolder] {
            bySession.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key.description < $1.key.description }
                .prefix(count).map { SlotHolder(family: $0.key.family.rawValue, session: $0.key.identifier.rawValue, transfers: $0.value) }
        }
    }

    /// Max-min fair shares of `slots` between claimants asking `demand` each: nobody gets
    /// more than they ask; what is left goes in equal parts to those who ask more. Ties
    /// broken by `order` so that the answer does not depend on a dictionary's order.
    static func shares<Key: Hashable>(of slots: Int, demand: [Key: Int], order: (Key, Key) -> Bool) -> [Key: Int] {
        let claimants = demand.filter { $0.value > 0 }.sorted { $0.value != $1.value ? $0.value < $1.value : order($0.key, $1.key) }
        var left = max(0, slots)
        var result: [Key: Int] = [:]
        for (index, claimant) in claimants.enumerated() {
            let part = left / (claimants.count - index)
            let given = min(claimant.value, part)
            result[claimant.key] = given
            left -= given
        }
        return result
    }

    /// The transfers to stop so that sessions waiting below their share get a slot:
    /// `running` are the transfers in flight, `waiting` the tasks of each session ready to
    /// start now (with room at their host). Empty while a slot is free.
    func transfersToGiveBack(running: [Running], waiting: [SessionKey: Int], now: Date) -> [TaskKey] {
        guard running.count >= limit, waiting.values.contains(where: { $0 > 0 }) else { return [] }
        var sessionDemand = waiting.filter { $0.value > 0 }
        for transfer in running { sessionDemand[transfer.task.session, default: 0] += 1 }
        var appDemand: [BundleIdentifier: Int] = [:]
        for (session, demand) in sessionDemand { appDemand[session.family, default: 0] += demand }
        let appShares = Self.shares(of: limit, demand: appDemand) { $0.rawValue < $1.rawValue }
        var result: [TaskKey] = []
        for (app, share) in appShares {
            let sessions = sessionDemand.filter { $0.key.family == app }
            let sessionShares = Self.shares(of: share, demand: sessions) { $0.description < $1.description }
            for (session, sessionShare) in sessionShares {
                // Youngest first: it has the least to lose.
                let mine = running.filter { $0.task.session == session }.sorted { $0.startedAt > $1.startedAt }
                guard mine.count > sessionShare else { continue }
                let stoppable = mine.filter { now.timeIntervalSince($0.startedAt) >= minimumRun }
                result += stoppable.prefix(mine.count - sessionShare).map(\.task)
            }
        }
        return result
    }
}
