import Foundation
import Dispatch

/// The queue FoundationNetworking calls a default session's bridge on (`ForegroundBridge`):
/// an `OperationQueue`, as FoundationNetworking's `URLSession` takes, whose work runs in the
/// order it was added, one piece at a time, on one serial dispatch queue, without an
/// `Operation` object each. FoundationNetworking hands its delegate every call through
/// `addOperation(_:)` with a block, four or five for each small request; corelibs' operations
/// (an object, its state machine, its locks) made those calls cost more than the request's
/// own work (`transfer-bench foreground`, Benchmarks/README.md). Only blocks are given to it:
/// an `Operation` added runs in order too, with no regard to its dependencies. Thread-safe.
final class SerialCallbackQueue: OperationQueue, @unchecked Sendable {
    private let queue: DispatchQueue

    init(label: String) {
        queue = DispatchQueue(label: label)
        super.init()
        name = label
        maxConcurrentOperationCount = 1
    }

    override func addOperation(_ block: @escaping @Sendable () -> Void) {
        queue.async(execute: block)
    }

    override func addBarrierBlock(_ barrier: @escaping @Sendable () -> Void) {
        queue.async(execute: barrier)
    }

    override func addOperation(_ operation: Operation) {
        let operation = UncheckedSendable(operation)
        queue.async { operation.value.start() }
    }

    override func addOperations(_ operations: [Operation], waitUntilFinished wait: Bool) {
        let operations = UncheckedSendable(operations)
        let run: @Sendable () -> Void = { operations.value.forEach { $0.start() } }
        if wait { queue.sync(execute: run) } else { queue.async(execute: run) }
    }
}
