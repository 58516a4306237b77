import Foundation
import TransferContainer
import TransferCoding
import TransferLogging

/// `Sessions/<family>/<identifier>/data-tasks.json`: the data tasks of a background session
/// that its process has made and not seen end (S2.2), and the highest identifier it gave one.
/// The daemon never hears of these tasks: this record is how the next process that opens the
/// session learns of the ones cut by the death of the last (each ends there with -997), and
/// numbers its own tasks above them. Written only by the process holding the session (the
/// session's lock), replaced whole and synced; read at open.
struct DataTaskLedger: Codable, Equatable, Sendable {
    /// One data task made and not seen end.
    struct Entry: Codable, Equatable, Sendable {
        var taskIdentifier: Int
        var url: String
        var taskDescription: String?
    }

    var version = 1
    /// The highest identifier a data task of the session was given (0: none yet).
    var highestIdentifier = 0
    var running: [Entry] = []

    /// The ledger at `path`: empty when there is none; a file that cannot be read or decoded,
    /// or holds identifiers out of range, is logged and taken as empty (it must not stop the
    /// session from opening).
    static func read(at path: String, log: TransferLog, session: String) -> DataTaskLedger {
        guard FileManager.default.fileExists(atPath: path) else { return DataTaskLedger() }
        do {
            var ledger = try RecordCoding.read(DataTaskLedger.self, from: path)
            let range = CheckedNumbers.taskIdentifiers
            guard range.contains(ledger.highestIdentifier) || ledger.highestIdentifier == 0 else {
                throw RecordError.corrupt(path: path, reason: "highestIdentifier \(ledger.highestIdentifier) is out of range")
            }
            ledger.running = ledger.running.filter { range.contains($0.taskIdentifier) }
            return ledger
        } catch {
            log.error("session", "data task record \(path) is unreadable (\(error)); taken as empty", session: session)
            return DataTaskLedger()
        }
    }

    /// Replaces the file at `path` with this ledger (atomically, synced); logs a failure,
    /// which costs only the -997 report of a task cut later.
    func write(to path: String, log: TransferLog, session: String) {
        do { try RecordCoding.write(self, to: path) } catch {
            log.error("session", "cannot write data task record \(path): \(error)", session: session)
        }
    }
}
