internal import Glibc
import TransferPOSIX

/// The write end of the self-pipe; only the signal handler writes to it.
nonisolated(unsafe) private var signalPipeWriteEnd: Int32 = -1

/// Turns `SIGTERM`/`SIGINT`/`SIGHUP` into a readable descriptor the event loop can watch
/// (a signal handler may do almost nothing; writing one byte to a pipe is allowed).
/// Created once, on the loop's thread.
struct SignalPipe {
    let readEnd: FileDescriptor

    init() throws(Errno) {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { throw .current("pipe") }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        readEnd = FileDescriptor(rawValue: fds[0])
        signalPipeWriteEnd = fds[1]
        for sig in [SIGTERM, SIGINT, SIGHUP] {
            signal(sig) { _ in
                var byte: UInt8 = 1
                _ = write(signalPipeWriteEnd, &byte, 1)
            }
        }
        signal(SIGPIPE, SIG_IGN)
        // A file-size limit (a full quota) must fail the write, not kill the daemon.
        signal(SIGXFSZ, SIG_IGN)
    }

    /// Empties the pipe; returns whether a signal arrived.
    func drain() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 64)
        var any = false
        while read(readEnd.rawValue, &buffer, buffer.count) > 0 { any = true }
        return any
    }
}
