/// Downloads' view of the daemon (on the loop thread): the sessions are the daemon's own; the
/// rest is `ExchangeSurroundings`' and that of the other transfer parts' views
/// (`pushToHolder`, `transfersNeedScheduling`).
extension TransferDaemon: DownloadsSurroundings {}
