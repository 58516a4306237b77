/// What the group commit may see of the daemon (on the loop thread): the sessions, and the
/// connected clients whose output waits for the commits.
extension TransferDaemon: CommitSurroundings {
    var clientConnections: Dictionary<Int32, ClientConnection>.Values { clients.connections.values }
}
