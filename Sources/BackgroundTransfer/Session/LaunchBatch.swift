import TransferContainer

/// Where a process launched for a session's events stands with the batch it was launched
/// for (S3.2): the events handed to the delegate, then `urlSessionDidFinishEvents` once, then
/// the completion handler, which acknowledges them. An event that comes after its batch was
/// announced belongs to the next one: on iOS the app, suspended once it calls the handler, is
/// woken again for it, with a new `handleEventsForBackgroundURLSession`. Such events are
/// held here, neither delivered nor acknowledged, until the app is woken in this process
/// (one that stays once it called the handler), or the process ends and the daemon launches
/// the app again for them. A value, kept in `SessionCore.State` and changed on the delivery queue.
struct LaunchBatch {
    enum Phase: Equatable {
        /// Events go to the delegate; the completion handler will acknowledge them.
        case delivering
        /// `urlSessionDidFinishEvents` was called; the completion handler not yet.
        case announced
        /// The app called the completion handler: it is suspended.
        case suspended
        /// Woken again: `handleEventsForBackgroundURLSession` first, then the held events.
        case waking
    }

    /// What a backlog word (`DaemonPush.backlogDelivered`) or a completion handler calls for.
    enum Step: Equatable {
        case nothing
        /// Call `urlSessionDidFinishEvents`.
        case announce
        /// Wake the app again in this process; the wake is `generation`.
        case wake(generation: Int)
    }

    private(set) var phase = Phase.delivering
    /// The launch (0) or the wake of this process the batch belongs to: the completion
    /// handler of an earlier one changes nothing.
    private(set) var generation = 0
    /// Events of the next batch, in order.
    private(set) var held: [EventRecord] = []
    /// A backlog word came after the last held event: the next batch is whole.
    private(set) var heldIsWhole = false
    /// The process stays once the app called its completion handler (it is woken in place).
    private(set) var staying = false

    /// Whether the completion handler acknowledges the events delivered now.
    var acknowledgesOnCompletionHandler: Bool { phase == .delivering || phase == .announced }

    /// Whether `event` is held for the next batch instead of delivered. An event the delegate
    /// saw already (through `deliveredThrough`) is not: it only counts as received.
    mutating func holds(_ event: EventRecord, deliveredThrough: UInt64) -> Bool {
        guard phase != .delivering, event.number > deliveredThrough else { return false }
        // Sent again after the daemon restarted: held already.
        if let last = held.last, event.number <= last.number { return true }
        held.append(event)
        heldIsWhole = false
        return true
    }

    /// The daemon has sent every event of a batch.
    mutating func backlogWord() -> Step {
        switch phase {
        case .delivering:
            phase = .announced
            return .announce
        case .announced, .waking:
            if !held.isEmpty { heldIsWhole = true }
            return .nothing
        case .suspended:
            if !held.isEmpty { heldIsWhole = true }
            return staying && heldIsWhole ? startWake() : .nothing
        }
    }

    /// The app called the completion handler of `generation`; nil when it is an earlier
    /// launch's, or called again (it acknowledges nothing then).
    mutating func completionHandlerCalled(generation: Int, staying: Bool) -> Step? {
        guard generation == self.generation, phase != .suspended else { return nil }
        self.staying = staying
        // Called inside `handleEventsForBackgroundURLSession`: the held batch waits for a new word.
        let wasWaking = phase == .waking
        phase = .suspended
        return staying && !wasWaking && heldIsWhole ? startWake() : .nothing
    }

    private mutating func startWake() -> Step {
        phase = .waking
        generation += 1
        return .wake(generation: generation)
    }

    /// The app, woken for `generation`, returned from `handleEventsForBackgroundURLSession`:
    /// the held events to deliver now, in order, and whether `urlSessionDidFinishEvents`
    /// follows them (else the next backlog word announces them). Nothing when the app called
    /// the new completion handler already (it stays suspended).
    mutating func woken(generation: Int) -> (events: [EventRecord], announce: Bool) {
        guard phase == .waking, generation == self.generation else { return ([], false) }
        defer {
            held = []
            heldIsWhole = false
        }
        phase = heldIsWhole ? .announced : .delivering
        return (held, heldIsWhole)
    }
}
