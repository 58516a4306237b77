import Foundation
import TransferCoding
import TransferPOSIX

/// Records as files: written durably, read back with a typed error naming the path. Stateless.
extension RecordCoding {
    /// Writes a record durably as JSON.
    public static func write<T: Encodable>(_ value: T, to path: String, syncDirectory: Bool = true, sync: Bool = true) throws {
        try DurableFile.write(encoder().encode(value), to: path, syncDirectory: syncDirectory, sync: sync)
    }

    /// Reads a record; throws `RecordError` naming the path when it is missing, truncated or corrupt.
    public static func read<T: Decodable>(_ type: T.Type, from path: String) throws(RecordError) -> T {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch { throw .unreadable(path: path, reason: "\(error.localizedDescription)") }
        do { return try decoder().decode(T.self, from: data) } catch { throw .corrupt(path: path, reason: "\(error)") }
    }
}

/// A record on disk that cannot be used.
public enum RecordError: Error, CustomStringConvertible, Sendable {
    case unreadable(path: String, reason: String)
    case corrupt(path: String, reason: String)
    case unsupportedVersion(path: String, version: Int)

    public var description: String {
        switch self {
        case .unreadable(let path, let reason): "record \(path) cannot be read: \(reason)"
        case .corrupt(let path, let reason): "record \(path) is corrupt: \(reason)"
        case .unsupportedVersion(let path, let version): "record \(path) has unsupported version \(version)"
        }
    }
}

