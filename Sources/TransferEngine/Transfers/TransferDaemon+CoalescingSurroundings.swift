import TransferContainer
import TransferTransport

/// Coalescing's view of the daemon (on the loop thread): the scheduler's device conditions,
/// looked up when asked. `sessions` and `pushToHolder` are the daemon's own and the running
/// transfers' (`TransferDaemon+RunningTransfersSurroundings.swift`).
extension TransferDaemon: CoalescingSurroundings {
    var deviceConditions: DeviceConditions { scheduler.conditions }
}
