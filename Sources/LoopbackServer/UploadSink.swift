import Foundation
import Glibc
import Digests

/// Where one request's upload body goes as it arrives: counted, hashed and/or written to
/// the upload's file at the right offset. Created for one request and used only on that
/// connection's thread; a resumable upload's hash is handed in and taken back out.
final class UploadSink {
    /// Opening or writing the upload's file failed.
    struct FileError: Error, CustomStringConvertible {
        let operation: String
        let code: Int32

        var description: String { "\(operation): \(String(cString: strerror(code)))" }
    }

    /// Bytes this request delivered.
    private(set) var received: Int64 = 0
    private(set) var hasher: SHA256?
    private let fd: Int32?
    /// Where the next byte goes in the file.
    private var fileOffset: Int64

    /// Counts (and hashes, given a hasher) without storing.
    init(hasher: SHA256? = nil) {
        self.hasher = hasher
        self.fd = nil
        self.fileOffset = 0
    }

    /// Also writes to `file` from `offset`; creates (truncates) the file when `create`,
    /// otherwise it must exist.
    init(hasher: SHA256?, file: URL, offset: Int64, create: Bool) throws(FileError) {
        let flags = O_WRONLY | O_CLOEXEC | (create ? O_CREAT | O_TRUNC : 0)
        let fd = open(file.path, flags, 0o644)
        guard fd >= 0 else { throw FileError(operation: "open \(file.path)", code: errno) }
        self.hasher = hasher
        self.fd = fd
        self.fileOffset = offset
    }

    deinit {
        if let fd { close(fd) }
    }

    func consume(_ bytes: UnsafeRawBufferPointer) throws(FileError) {
        hasher?.update(bytes)
        if let fd {
            var written = 0
            while written < bytes.count {
                let n = pwrite(fd, bytes.baseAddress! + written, bytes.count - written, off_t(fileOffset) + off_t(written))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw FileError(operation: "pwrite", code: errno)
                }
                written += n
            }
        }
        fileOffset += Int64(bytes.count)
        received += Int64(bytes.count)
    }

    /// Lowercase hex digest of everything hashed (consumes the hasher).
    func finishHash() -> String? {
        guard var hasher else { return nil }
        self.hasher = nil
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }
}
