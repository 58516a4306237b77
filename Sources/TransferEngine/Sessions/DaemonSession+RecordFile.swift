import Foundation
import TransferCoding
import TransferContainer
import TransferPOSIX

/// A session's `session.json`, read and replaced through the container's root when the
/// daemon gives one: a session folder (or a folder on the way to it) that is a symlink is
/// refused (`ELOOP`) before the session's journal is opened in it. Called on the loop thread
/// that owns the session.
extension DaemonSession {
    /// A bigger record is refused unread: it holds a configuration and accepted server keys.
    static let recordSizeLimit = 16 << 20

    static func makeFolder(_ path: String, root: RootDirectory?) throws(Errno) {
        if let root { try root.makeDirectory(path) } else { try DurableFile.makeDirectory(path) }
    }

    static func readRecord(at path: String, root: RootDirectory?) throws(RecordError) -> SessionRecord {
        guard let root else { return try RecordCoding.read(SessionRecord.self, from: path) }
        let data: Data
        do { data = try root.read(path, limit: recordSizeLimit) } catch { throw .unreadable(path: path, reason: "\(error)") }
        do { return try RecordCoding.decoder().decode(SessionRecord.self, from: data) } catch { throw .corrupt(path: path, reason: "\(error)") }
    }

    static func writeRecord(_ record: SessionRecord, to path: String, root: RootDirectory?) throws {
        guard let root else { return try RecordCoding.write(record, to: path) }
        try root.write(RecordCoding.encoder().encode(record), to: path)
    }
}
