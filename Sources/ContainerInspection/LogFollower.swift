import Foundation
import TransferContainer
import TransferCoding
import TransferLogging

/// Reads the container's log as it grows: each call to `next()` returns the complete lines
/// written since the last call. Owned by one thread.
public struct LogFollower {
    private let path: String
    private var offset: UInt64
    private var partial = Data()

    /// Starts at the current end of the log (only what is written from now on).
    public init(layout: ContainerLayout, fromStart: Bool = false) {
        path = layout.logFile.path
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? NSNumber)?.uint64Value ?? 0
        offset = fromStart ? 0 : size
    }

    public mutating func next() -> [LogEntry] {
        guard let handle = FileHandle(forReadingAtPath: path) else { return [] }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        if size < offset { offset = 0 } // rotated
        try? handle.seek(toOffset: offset)
        guard let data = try? handle.readToEnd(), !data.isEmpty else { return [] }
        offset += UInt64(data.count)
        partial.append(data)
        var entries: [LogEntry] = []
        while let newline = partial.firstIndex(of: 0x0A) {
            let line = partial[partial.startIndex..<newline]
            partial.removeSubrange(partial.startIndex...newline)
            if let entry = TransferLog.entry(inLine: line) { entries.append(entry) }
        }
        return entries
    }
}
