import TransferContainer

/// What the socket's server may see of the daemon (on the loop thread): the sessions, the
/// limit on open files, housekeeping, and the request handler its requests go to.
extension TransferDaemon: ClientServerSurroundings {
    func handleRequest(_ request: DaemonRequest, from connection: ClientConnection, afterReply: inout [() -> Void]) throws -> DaemonReply {
        try requests.handle(request, from: connection, afterReply: &afterReply)
    }
}
