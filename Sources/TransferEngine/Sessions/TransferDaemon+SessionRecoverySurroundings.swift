/// Session recovery fills the daemon's table of sessions (on the loop thread).
extension TransferDaemon: SessionRecoverySurroundings {}
