#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TransferPOSIX

/// How `JournalContents` turns a journal's bytes into decoded lines: found with `memchr`,
/// decoded and checked on every core, handed back in order for the replay.
extension JournalContents {
    /// The ranges of the whole lines of `data`, without their newlines (`memchr`: a byte at
    /// a time through `Data`'s index was a tenth of a long journal's start-up).
    static func lineRanges(of data: Data) -> [Range<Data.Index>] {
        data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> [Range<Data.Index>] in
            guard let base = buffer.baseAddress else { return [] }
            var lines: [Range<Data.Index>] = []
            lines.reserveCapacity(buffer.count / 512)
            var offset = 0
            while offset < buffer.count, let found = memchr(base + offset, Int32(UInt8(ascii: "\n")), buffer.count - offset) {
                let newline = base.distance(to: UnsafeRawPointer(found))
                lines.append(data.startIndex + offset ..< data.startIndex + newline)
                offset = newline + 1
            }
            return lines
        }
    }

    /// One line of the journal, decoded. A task line, nearly every line of a long journal,
    /// is its record alone and any other line is boxed, so that an element takes 17 bytes:
    /// with the whole `JournalLine` inline (some 200 bytes, most of them an event's room)
    /// the parts of 100,000 lines were 20 MB to write, move and free.
    enum DecodedLine: Sendable {
        case blank
        case task(TaskRecord)
        indirect case line(JournalLine)
        case unreadable(String)
    }

    /// Decodes and checks each line; on several threads when there are many. The lines come
    /// back in order, in parts (one a thread).
    static func decode(_ lines: [Range<Data.Index>], of data: Data) -> [[DecodedLine]] {
        @Sendable func decodeLine(_ range: Range<Data.Index>) -> DecodedLine {
            let text = data[range]
            if text.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\r") }) { return .blank }
            do {
                let line = try checked(JournalLineReader.line(from: text))
                guard let task = line.task, line.event == nil, line.acknowledgedThrough == nil, line.counters == nil else { return .line(line) }
                return .task(task)
            } catch {
                return .unreadable("\(error)")
            }
        }
        let chunks = lines.count >= 4096 ? min(ProcessInfo.processInfo.activeProcessorCount, 8) : 1
        guard chunks > 1 else { return [lines.map(decodeLine)] }
        let results = Locked<[[DecodedLine]]>(Array(repeating: [], count: chunks))
        let size = (lines.count + chunks - 1) / chunks
        DispatchQueue.concurrentPerform(iterations: chunks) { chunk in
            let part = lines[min(chunk * size, lines.count)..<min((chunk + 1) * size, lines.count)].map(decodeLine)
            results.withLock { $0[chunk] = part }
        }
        return results.withLock { parts in
            defer { parts = [] } // the caller's copy is then the only one
            return parts
        }
    }
}
