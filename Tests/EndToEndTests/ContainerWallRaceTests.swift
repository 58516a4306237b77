import Foundation
import TransferPOSIX
import Digests
import Glibc
import Testing
import BackgroundTransfer
import TransferContainer
import LoopbackServer

/// The check of an upload's file and the opening of it are one step: a file or folder
/// swapped for a symlink out of the container while the daemon checks it never gets another
/// file uploaded (issue 28, item 7; once 1 in 300 tries got through).
extension InProcess {
@Suite(.serialized, .timeLimit(.minutes(20)))
final class ContainerWallRaceTests: InProcessSuite, @unchecked Sendable {
    @Test("300 uploads while their file, then its folder, flip between the real one and a symlink out: no upload sends the file outside")
    func swappedDuringTheCheck() throws {
        let tries = 300
        server.acceptUploads(at: "/put", options: UploadOptions(storage: .hash))
        let group = container.layout.appGroup(InProcess.group)
        let outbox = group.appendingPathComponent("Outbox")
        try FileManager.default.createDirectory(at: outbox, withIntermediateDirectories: true)
        let body = outbox.appendingPathComponent("body.bin")
        try testPayload(size: 4096, seed: 1).write(to: body)
        // The private file the symlinks lead to, with the same name in a folder outside.
        let outside = container.layout.root.deletingLastPathComponent().appendingPathComponent("elsewhere-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: outside) }
        let victim = outside.appendingPathComponent("body.bin")
        try testPayload(size: 4096, seed: 2).write(to: victim)
        let victimDigest = try SHA256.hexDigest(ofFile: victim.path)

        let stop = Locked(false)
        let flipped = Locked(0)
        let flipper = Thread {
            let (folder, real, link) = (outbox.path, outbox.path + ".real", outbox.path + ".link")
            let (file, fileLink, fileNew) = (body.path, body.path + ".link", body.path + ".new")
            symlink(outside.path, link)
            var round = 0
            while !stop.withLock({ $0 }) {
                if round % 2 == 0 {
                    // The file: a symlink out takes its name, then a regular file again.
                    symlink(victim.path, fileLink)
                    rename(fileLink, file)
                    sched_yield()
                    _ = try? testPayload(size: 4096, seed: 1).write(to: URL(fileURLWithPath: fileNew))
                    rename(fileNew, file)
                } else {
                    // The folder: a symlink to the folder outside takes its name, then back.
                    rename(folder, real)
                    rename(link, folder)
                    sched_yield()
                    rename(folder, link)
                    rename(real, folder)
                }
                round += 1
                flipped.withLock { $0 = round }
            }
        }
        flipper.start()

        let delegate = RecordingDelegate()
        let session = fixture.session("race", delegate: delegate)
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: server.url(for: "/put"))
        request.httpMethod = "PUT"
        var identifiers: [Int] = []
        for _ in 0..<tries {
            let task = session.uploadTask(with: request, fromFile: body)
            task.resume()
            identifiers.append(task.taskIdentifier)
        }
        let deadline = Date().addingTimeInterval(120)
        let ended = identifiers.allSatisfy { identifier in
            delegate.wait(timeout: max(0, deadline.timeIntervalSinceNow)) { if case .completed(identifier, _, _) = $0 { return true } else { return false } }
        }
        stop.withLock { $0 = true }
        #expect(ended, "all \(tries) uploads ended within 120 s")

        let received = server.receivedUploads(at: "/put")
        let through = received.count { $0.sha256 == victimDigest }
        print("ContainerWallRaceTests: \(tries) uploads, \(flipped.withLock { $0 }) flips; \(received.count) uploaded the app's file or the file outside, \(delegate.errors.count) refused or failed; \(through) sent the file outside")
        #expect(flipped.withLock { $0 } > 0, "the flipper flipped")
        #expect(through == 0, "\(through) of \(tries) uploads sent the file outside the container")
    }
}
}
