import Foundation

/// The bytes the handler writes, prepared beforehand: a signal handler may only write what
/// already exists, then `_exit`.
nonisolated(unsafe) private var farewell: UnsafeMutableBufferPointer<UInt8>?

/// Ends the process cleanly on Ctrl-C (SIGINT) or SIGTERM, with status 0, after writing a
/// last sequence to stdout (for the watch board: the cursor it hid). Installed once, on the
/// main thread.
enum InterruptExit {
    static func install(writing text: String) {
        let bytes = Array(text.utf8)
        let buffer = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, bytes.count))
        _ = buffer.initialize(from: bytes)
        farewell = UnsafeMutableBufferPointer(rebasing: buffer[0..<bytes.count])
        // A parent may have started us with these blocked (threads of a dispatch pool block
        // every signal, and the mask is inherited): then Ctrl-C would never arrive.
        var unblock = sigset_t()
        sigemptyset(&unblock)
        for sig in [SIGINT, SIGTERM] {
            sigaddset(&unblock, sig)
            signal(sig) { _ in
                if let farewell, let base = farewell.baseAddress, farewell.count > 0 {
                    _ = write(STDOUT_FILENO, base, farewell.count)
                }
                _exit(0)
            }
        }
        sigprocmask(SIG_UNBLOCK, &unblock, nil)
    }
}
