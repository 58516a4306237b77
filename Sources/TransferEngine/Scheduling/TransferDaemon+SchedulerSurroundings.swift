import Foundation
import TransferContainer
import TransferTransport

/// What the scheduler may use of the daemon (on the loop thread). `transfersInFlight` is in
/// `TransferDaemon+WatcherSurroundings.swift`.
extension TransferDaemon: SchedulerSurroundings {
    func pauseTransfer(_ key: TaskKey) { transfers.stopTransfer(key) }

    func prepareSpareFiles(_ count: Int) { transfers.spareFiles.want(count) }

    func coalescedRequestsInFlight() -> Set<String> { coalescing.coalescedRequestsInFlight() }

    func coalescingKey(_ task: TaskRecord, in session: DaemonSession) -> String? { coalescing.coalescingKey(task, in: session) }

    func startDownload(_ task: TaskRecord, in session: DaemonSession) { downloads.startDownload(task, in: session) }

    func startUpload(_ task: TaskRecord, in session: DaemonSession, step: UploadTransfer.Step) {
        uploads.startUpload(task, in: session, step: step)
    }

    func wakeScheduler(at date: Date, _ action: @escaping () -> Void) { loop.schedule(at: date, action) }

    // pushToHolder(_:of:) is answered in TransferDaemon+RunningTransfersSurroundings.swift.
}
