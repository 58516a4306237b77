import Foundation
import Testing
import TransferContainer
import TransferCoding

/// Task records as the daemon holds them in memory (one shared allocation a record, rare
/// fields `@Indirect`) against the journals it wrote before: the JSON must stay the same.
@Suite("Task records in memory and on disk")
struct TaskRecordStorageTests {
    /// Lines of a real journal written by transferd at aea15db, before task records were
    /// kept behind a reference (`fetch-extension download` of a finished download, of a
    /// URL that refuses connections and of one a day ahead; the daemon's own lines).
    static let oldJournal = #"""
{"task":{"version":1,"revision":3,"taskIdentifier":1,"kind":"download","originalRequest":{"url":"http://127.0.0.1:18931/file.bin","httpMethod":"GET","headers":[{"name":"User-Agent","value":"fetch-extension (com.example.host.fetch) BackgroundTransfer/1.0 Linux/6.18.44-fc-v657"}]},"taskDescription":"finished","priority":0.5,"state":0,"countOfBytesReceived":0,"countOfBytesExpectedToReceive":-1,"countOfBytesSent":0,"countOfBytesExpectedToSend":-1,"countOfBytesClientExpectsToReceive":-1,"countOfBytesClientExpectsToSend":-1,"createdAt":"2026-11-25T03:26:57.882Z","createdInBackground":true,"requirements":{"allowsCellularAccess":true,"allowsExpensiveNetworkAccess":true,"allowsConstrainedNetworkAccess":true,"isDiscretionary":true},"reportedWaitingForConnectivity":false,"delayedRequestAnswered":false,"authenticationFailures":0,"retryCount":0,"reportsResumeOffset":false}}
{"event":{"version":1,"number":1,"kind":"taskCompleted","createdAt":"2026-11-25T03:26:58.027Z","task":{"version":1,"revision":3,"taskIdentifier":1,"kind":"download","originalRequest":{"url":"http://127.0.0.1:18931/file.bin","httpMethod":"GET","headers":[{"name":"User-Agent","value":"fetch-extension (com.example.host.fetch) BackgroundTransfer/1.0 Linux/6.18.44-fc-v657"}]},"currentURL":"http://127.0.0.1:18931/file.bin","taskDescription":"finished","priority":0.5,"state":3,"countOfBytesReceived":20000,"countOfBytesExpectedToReceive":20000,"countOfBytesSent":0,"countOfBytesExpectedToSend":-1,"countOfBytesClientExpectsToReceive":-1,"countOfBytesClientExpectsToSend":-1,"validator":{"lastModified":"Wed, 25 Nov 2026 03:26:54 GMT"},"response":{"url":"http://127.0.0.1:18931/file.bin","statusCode":200,"headers":{"Content-type":"application/octet-stream","Server":"SimpleHTTP/0.6 Python/3.11.7","Date":"Wed, 25 Nov 2026 03:26:58 GMT","Content-Length":"20000","Last-Modified":"Wed, 25 Nov 2026 03:26:54 GMT"}},"createdAt":"2026-11-25T03:26:57.882Z","createdInBackground":true,"requirements":{"allowsCellularAccess":true,"allowsExpensiveNetworkAccess":true,"allowsConstrainedNetworkAccess":true,"isDiscretionary":true},"reportedWaitingForConnectivity":false,"delayedRequestAnswered":false,"authenticationFailures":0,"retryCount":0,"reportsResumeOffset":false,"networkProtocolName":"http/1.0"},"downloadedFile":"AppGroups/group.com.example.transfers/Library/Caches/BackgroundTransfer/com.example.host.fetch.background/CFNetworkDownload_1.tmp"}}
{"acknowledgedThrough":1}
{"task":{"version":1,"revision":4,"taskIdentifier":2,"kind":"download","originalRequest":{"url":"http://127.0.0.1:9/never.bin","httpMethod":"GET","headers":[{"name":"User-Agent","value":"fetch-extension (com.example.host.fetch) BackgroundTransfer/1.0 Linux/6.18.44-fc-v657"}]},"taskDescription":"retrying","priority":0.5,"state":0,"countOfBytesReceived":0,"countOfBytesExpectedToReceive":-1,"countOfBytesSent":0,"countOfBytesExpectedToSend":-1,"countOfBytesClientExpectsToReceive":-1,"countOfBytesClientExpectsToSend":-1,"createdAt":"2026-11-25T03:26:58.370Z","createdInBackground":true,"requirements":{"allowsCellularAccess":true,"allowsExpensiveNetworkAccess":true,"allowsConstrainedNetworkAccess":true,"isDiscretionary":true},"reportedWaitingForConnectivity":false,"delayedRequestAnswered":false,"authenticationFailures":0,"retryCount":1,"lastError":"curl transfer error 7 (couldNotConnect): Couldn't connect to server: Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server (-1004)","retryCause":{"networkTrouble":{"code":-1004,"message":"curl transfer error 7 (couldNotConnect): Couldn't connect to server: Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server"}},"retryNotBefore":"2026-11-25T03:26:58.622Z","reportsResumeOffset":false}}
{"task":{"version":1,"revision":5,"taskIdentifier":3,"kind":"download","originalRequest":{"url":"http://127.0.0.1:18931/later.bin","httpMethod":"GET","headers":[{"name":"User-Agent","value":"fetch-extension (com.example.host.fetch) BackgroundTransfer/1.0 Linux/6.18.44-fc-v657"}]},"taskDescription":"queued with a date","priority":0.9,"earliestBeginDate":"2026-11-26T03:26:58.705Z","state":0,"countOfBytesReceived":0,"countOfBytesExpectedToReceive":-1,"countOfBytesSent":0,"countOfBytesExpectedToSend":-1,"countOfBytesClientExpectsToReceive":-1,"countOfBytesClientExpectsToSend":-1,"createdAt":"2026-11-25T03:26:58.708Z","createdInBackground":true,"requirements":{"allowsCellularAccess":false,"allowsExpensiveNetworkAccess":true,"allowsConstrainedNetworkAccess":true,"isDiscretionary":true},"reportedWaitingForConnectivity":false,"delayedRequestAnswered":false,"authenticationFailures":0,"retryCount":0,"reportsResumeOffset":false}}
"""#

    @Test("a journal written before records were kept compactly loads field for field, and its lines encode to the same JSON again")
    func oldJournalLoads() throws {
        let lines = Self.oldJournal.split(separator: "\n").map(String.init)
        let contents = JournalContents(parsing: Data((Self.oldJournal + "\n").utf8))
        #expect(contents.unreadable.isEmpty)
        #expect(contents.tasks.keys.sorted() == [2, 3], "the finished task ended with its event")
        #expect(contents.events.isEmpty, "its event was acknowledged")

        let retrying = try #require(contents.tasks[2])
        #expect(retrying.retryCount == 1)
        #expect(retrying.retryCause == .networkTrouble(code: -1004, message: "curl transfer error 7 (couldNotConnect): Couldn't connect to server: Failed to connect to 127.0.0.1 port 9 after 0 ms: Couldn't connect to server"))
        #expect(retrying.retryNotBefore == ISO8601Format.date(from: "2026-11-25T03:26:58.622Z"))
        #expect(retrying.originalRequest.headers.map(\.name) == ["User-Agent"])

        let queued = try #require(contents.tasks[3])
        #expect(queued.taskDescription == "queued with a date")
        #expect(queued.priority == 0.9)
        #expect(queued.earliestBeginDate == ISO8601Format.date(from: "2026-11-26T03:26:58.705Z"))
        #expect(queued.requirements.allowsCellularAccess == false)
        #expect(queued.response == nil && queued.validator == nil && queued.pendingFailure == nil)

        let finished = try #require(RecordCoding.decode(JournalLine.self, from: Data(lines[1].utf8)).event?.task)
        #expect(finished.response?.statusCode == 200)
        #expect(finished.response?.header("content-length") == "20000")
        #expect(finished.validator == Validator(entityTag: nil, lastModified: "Wed, 25 Nov 2026 03:26:54 GMT"))
        #expect(finished.networkProtocolName == "http/1.0")

        for line in lines {
            let again = try RecordCoding.encodeCompact(RecordCoding.decode(JournalLine.self, from: Data(line.utf8)))
            if line.contains(#""headers":{"#) {
                #expect(try sameJSON(again, Data(line.utf8)), "a response's headers are a dictionary, in any order")
            } else {
                #expect(String(decoding: again, as: UTF8.self) == line, "the same bytes: an absent field is left out, not written as null")
            }
        }
    }

    @Test("a copy of a task record keeps its fields when the original changes, and the other way round")
    func copiesAreValues() {
        var original = TaskRecord(taskIdentifier: 7, kind: .download, originalRequest: RequestRecord(url: "http://127.0.0.1:9/a"))
        var copy = original
        original.state = .running
        original.retryCause = .unrecorded("refused")
        original.originalRequest.headers.append(HeaderField(name: "Accept", value: "*/*"))
        #expect(copy.state == .suspended)
        #expect(copy.retryCause == nil)
        #expect(copy.originalRequest.headers.isEmpty)
        #expect(copy != original)

        copy.taskDescription = "the copy's"
        #expect(original.taskDescription == nil)
        copy.state = .running
        copy.retryCause = .unrecorded("refused")
        copy.originalRequest.headers = original.originalRequest.headers
        copy.taskDescription = nil
        #expect(copy == original, "equal fields are equal records, whatever allocation holds them")
    }
}
