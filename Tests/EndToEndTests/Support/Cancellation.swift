import Foundation
import BackgroundTransfer
import TransferPOSIX

/// Cancels `task` with `cancel(byProducingResumeData:)` once it has `bytes`: whether the
/// download got that far, whether the cancellation called back (within 10 s), and the data.
func cancelPartWay(_ task: URLSessionDownloadTask, after bytes: Int64) -> (reached: Bool, calledBack: Bool, data: Data?) {
    let reached = waitUntil(timeout: 20) { task.countOfBytesReceived >= bytes }
    let done = DispatchSemaphore(value: 0)
    let box = Locked<Data?>(nil)
    task.cancel { data in
        box.withLock { $0 = data }
        done.signal()
    }
    let calledBack = done.wait(timeout: .now() + 10) == .success
    return (reached, calledBack, box.withLock { $0 })
}
