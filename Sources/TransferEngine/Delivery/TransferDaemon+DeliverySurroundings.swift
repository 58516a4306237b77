import TransferContainer

/// What event delivery may see of the daemon (on the loop thread): whether commits fail, the
/// holders it cuts off, housekeeping, and the challenges a new holder is asked.
extension TransferDaemon: DeliverySurroundings {
    var commitsFailing: Bool { commits.failure != nil }

    func disconnectHolder(_ holder: ClientConnection) { clients.disconnect(holder) }

    func askAboutChallenge(_ task: TaskRecord, in session: DaemonSession) {
        challenges.askAboutChallenge(task, in: session)
    }
}
