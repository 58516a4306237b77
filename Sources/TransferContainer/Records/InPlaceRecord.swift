#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TransferCoding
import TransferPOSIX

/// A small JSON record that is rewritten often, in place: each write is one `pwrite` of the
/// record padded with spaces to a fixed size, within the file's first page. A reader after
/// the writer's death (however it died) finds the old record or the new one, never a mix;
/// unlike `DurableFile`, no write creates a file, and none survives a power cut until `sync`.
///
/// Thread-safe: writes are serialized by a lock.
public final class InPlaceRecord<Value: Codable>: @unchecked Sendable {
    public let path: String
    /// The file's fixed size; a record must encode to fewer bytes.
    public static var size: Int { 512 }
    private let lock = NSLock()
    private var descriptor: FileDescriptor?
    /// Whether the file's name is durable in its folder: not after this process created it.
    private var nameIsDurable = true

    public init(path: String) {
        self.path = path
    }

    deinit { descriptor?.close() }

    /// Reads the record; nil when there is none yet. Throws for a corrupt one.
    public func read() throws(RecordError) -> Value? {
        guard access(path, F_OK) == 0 else { return nil }
        return try RecordCoding.read(Value.self, from: path)
    }

    /// Replaces the record.
    public func write(_ value: Value) throws {
        var data = try RecordCoding.encodeCompact(value)
        guard data.count < Self.size else { throw RecordError.corrupt(path: path, reason: "a record of \(data.count) bytes does not fit in \(Self.size)") }
        data.append(contentsOf: repeatElement(UInt8(ascii: " "), count: Self.size - 1 - data.count))
        data.append(UInt8(ascii: "\n"))
        lock.lock()
        defer { lock.unlock() }
        guard let descriptor else {
            // The first write of this process: a whole new file of the fixed size, whatever was there.
            try DurableFile.write(data, to: path, sync: false)
            descriptor = try FileDescriptor.open(path, O_WRONLY)
            nameIsDurable = false
            return
        }
        let written = data.withUnsafeBytes { pwrite(descriptor.rawValue, $0.baseAddress, $0.count, 0) }
        guard written == data.count else { throw Errno.current("pwrite", path: path) }
    }

    /// Makes the last write survive a power cut: fsync of the file and, after this process
    /// created it, of its folder (which holds the new name). Nothing to do before a write.
    public func sync() throws(Errno) {
        lock.lock()
        defer { lock.unlock() }
        guard let descriptor else { return }
        try descriptor.sync()
        if !nameIsDurable {
            try DurableFile.syncDirectory((path as NSString).deletingLastPathComponent)
            nameIsDurable = true
        }
    }
}
