import TransferTransport

/// What the watchers may see of the daemon (on the loop thread): the transfers in flight
/// (also the scheduler's, `SchedulerSurroundings`) and the connections that watch.
extension TransferDaemon: WatcherSurroundings {
    var transfersInFlight: [TaskKey: any Transfer] { transfers.transfersByTask }

    var watchingConnections: [ClientConnection] { clients.connections.values.filter(\.isWatching) }

    func disconnectWatcher(_ connection: ClientConnection) { clients.disconnect(connection) }
}
