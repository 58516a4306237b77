import Foundation
import TransferContainer
import TransferCoding

/// The records and frames the coding figures encode and decode, as the daemon and the library
/// make them: a download under way as journalled, a `createTask` request and the task it
/// creates, the push of a completion, a session record. Built once; read-only.
struct SampleRecords {
    let line: JournalLine
    let requestFrame: RequestFrame
    let createdTask: TaskRecord
    let frame: DaemonFrame
    let sessionRecord: SessionRecord
    /// Each of them as the compact coder writes it.
    let journalLine: Data
    let request: Data
    let eventFrame: Data
    let session: Data

    init() throws {
        let identifier = try SessionIdentifier("com.example.host.background")
        let task = Self.download()
        line = .task(task)
        var creation = TaskCreation(kind: .download, request: RequestRecord(url: "https://downloads.example.com/files/8/archive.tar.gz?token=abc123",
                                                                            headers: [HeaderField(name: "Accept", value: "*/*")]),
                                    taskDescription: "nightly archive", requirements: TaskRequirements(isDiscretionary: true))
        creation.taskIdentifier = 8
        requestFrame = RequestFrame(id: 12, request: .createTask(session: identifier, creation))
        createdTask = TaskRecord(taskIdentifier: 8, creation: creation)
        let event = EventRecord(number: 42, kind: .taskCompleted, createdAt: Date(), task: task,
                                downloadedFile: "/home/user/container/Sessions/com.example.host/com.example.host.background/downloads/7.download")
        frame = .push(.event(session: identifier, event))
        var configuration = SessionConfiguration()
        configuration.sharedContainerIdentifier = try BundleIdentifier("group.com.example.transfers")
        configuration.httpAdditionalHeaders = ["X-Client": "host-app/1.0"]
        sessionRecord = SessionRecord(identifier: identifier, owner: try BundleIdentifier("com.example.host"),
                                      family: try BundleIdentifier("com.example.host"), configuration: configuration, createdAt: Date())
        let compact = CompactJSONEncoder()
        journalLine = try compact.encode(line)
        request = try compact.encode(requestFrame)
        eventFrame = try compact.encode(frame)
        session = try compact.encode(sessionRecord)
    }

    /// Foundation's encoder as a replacement of the compact one would be set up: compact,
    /// members unsorted, `/` unescaped, dates as the records write them.
    static func foundationEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(ISO8601Format.string(from: date))
        }
        return encoder
    }

    /// A download as the daemon journals it once its response has arrived.
    private static func download() -> TaskRecord {
        var task = TaskRecord(taskIdentifier: 7, kind: .download, originalRequest: RequestRecord(
            url: "https://downloads.example.com/files/7/archive.tar.gz?token=abc123", headers: [HeaderField(name: "Accept", value: "*/*"), HeaderField(name: "User-Agent", value: "host-app/1.0")]))
        task.revision = 3
        task.currentURL = "https://cdn.example.net/files/7/archive.tar.gz"
        task.taskDescription = "nightly archive"
        task.state = .running
        task.countOfBytesReceived = 65_536
        task.countOfBytesExpectedToReceive = 1_048_576
        task.validator = Validator(entityTag: "\"5f3a-1000\"", lastModified: "Tue, 14 Nov 2023 22:13:20 GMT")
        task.response = ResponseRecord(url: "https://cdn.example.net/files/7/archive.tar.gz", statusCode: 200, headers: [
            "Content-Type": "application/gzip", "Content-Length": "1048576", "ETag": "\"5f3a-1000\"", "Accept-Ranges": "bytes",
            "Last-Modified": "Tue, 14 Nov 2023 22:13:20 GMT", "Cache-Control": "max-age=3600"])
        task.requirements = TaskRequirements(isDiscretionary: true)
        return task
    }
}
