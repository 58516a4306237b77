import Foundation
import TestPeers
import Testing
import LoopbackServer
import TransferContainer
import TransferCoding
import Digests
import TransferLogging
import TransferPOSIX

/// Power cuts, not just SIGKILL: a SIGKILL keeps the page cache, a power cut does not. The
/// container lies on `powercutfs` (Tests/PowerCut/powercutfs.c), which passes everything
/// through but, when told to cut, keeps only what fsync/fdatasync made durable (file data,
/// and names made durable through their folder), as CrashMonkey and ALICE model a disk.
///
/// Each round mounts the file system over what the last cut left, starts transferd, drives
/// downloads, uploads, relaunches and acknowledgements through the stand-in processes (one
/// session's journal passes 4,096 lines and is compacted again and again), cuts the power at
/// a random instant, kills every process, and checks what survived: no accepted task lost, no
/// journal unreadable, no delivered or finished file corrupt, no event a delegate saw whose
/// acknowledgement was durable handed to a delegate again. At the end the survivors run to
/// completion without cuts, and every accepted task must have completed, each file whole.
///
/// CI runs `BGTRANSFER_POWERCUT_CUTS` (default 110) cuts with a fixed seed; by hand:
/// `BGTRANSFER_POWERCUT_CUTS=1000 BGTRANSFER_POWERCUT_SEED=N swift test --filter PowerCut`;
/// `BGTRANSFER_POWERCUT_TORN=prefix|zeros` lets part of what was appended since the last sync
/// survive (a torn tail, or the new size without the data), beyond the fsync-only model.
/// Skipped only where /dev/fuse is absent.
@Suite(.serialized, .timeLimit(.minutes(60)))
struct PowerCutTests {
    static let sessions = (fetch: "com.example.host.fetch.background", share: "com.example.host.share.background", host: "com.example.host.background")

    @Test("Power cuts at random instants lose no accepted task, corrupt no file or journal, and never repeat an acknowledged event",
          .enabled(if: PowerCutFileSystem.unavailableReason == nil, "skipped: /dev/fuse is absent (the power-cut test needs FUSE)"))
    func powerCuts() async throws {
        // Minutes of blocking waits: on a thread of its own, not one of the test runner's few.
        try await onOwnThread { try self.runPowerCuts() }
    }

    func runPowerCuts() throws {
        let environment = ProcessInfo.processInfo.environment
        let seed = environment["BGTRANSFER_POWERCUT_SEED"].flatMap(UInt64.init) ?? 20_261_123
        let cuts = environment["BGTRANSFER_POWERCUT_CUTS"].flatMap(Int.init) ?? 110
        print("power-cut seed \(seed), \(cuts) cuts (BGTRANSFER_POWERCUT_SEED, BGTRANSFER_POWERCUT_CUTS)")
        var random = SeededRandom(seed: seed)
        let began = Date()

        let stage = try PowerCutStage(firstBacking: "backing-0")
        defer { stage.end() }
        let container = stage.container, base = stage.base
        let server = try LoopbackServer()
        defer { server.stop() }
        var backing = stage.firstBacking
        let uploadSources = base.appendingPathComponent("upload-sources")
        try FileManager.default.createDirectory(at: uploadSources, withIntermediateDirectories: true)

        var ledger = PowerCutLedger(containerRoot: container.root)
        var summaries: [String] = []
        var checkedDirectWrites = false

        for round in 0..<cuts {
            let survivors = base.appendingPathComponent("backing-\(round + 1)")
            let marker = base.appendingPathComponent("cut-\(round).done")
            // Every few rounds the fetch session's journal is brought near the compaction floor
            // (DaemonSession.compactionFloor, 4,096 lines) with stale lines, as thousands of
            // finished tasks would leave it, so that compactions happen, and cuts during them.
            let padded = round % 5 == 1 && PowerCutLedger.padJournal(backing: backing, session: Self.sessions.fetch, to: 4_090)
            ledger.beginRound(round, backing: backing)
            // Some cuts come right after a chosen operation, where a random instant rarely lands:
            // the steps of a compaction after padding, and elsewhere the steps that make a file,
            // a name or a journal line durable.
            let fetch = "Sessions/com.example.host/\(Self.sessions.fetch)"
            let compactionSteps = ["create:\(fetch)/.journal.jsonl.", "write:\(fetch)/.journal.jsonl.", "fsync:\(fetch)/.journal.jsonl.",
                                   "rename:\(fetch)/journal.jsonl", "fsyncdir:\(fetch)", "write:\(fetch)/journal.jsonl"]
            let otherSteps = ["write:journal.jsonl", "fsync:journal.jsonl", "rename:CFNetworkDownload_", "fsync:CFNetworkDownload_", "fsyncdir:Library/Caches/BackgroundTransfer/",
                              "link:.upload", "fsync:.upload", "unlink:CFNetworkDownload_", "rename:Downloads/", "fsyncdir:Downloads", "fsync:.partial", "rename:session.json",
                              "write:delivered.json", "mkdir:Sessions/", "fsyncdir:Sessions/com.example.host"]
            var cutAt: String?
            if padded {
                let step = compactionSteps[Int(random.next(below: UInt64(compactionSteps.count + 1))) % compactionSteps.count]
                cutAt = step + ":1"
            } else if random.chance(0.35) {
                cutAt = otherSteps[Int(random.next(below: UInt64(otherSteps.count)))] + ":\(1 + random.next(below: 4))"
            }
            let mounted = try stage.mount(backing: backing, survivors: survivors, marker: marker, cutAt: cutAt, torn: environment["BGTRANSFER_POWERCUT_TORN"], seed: random.next())
            if !checkedDirectWrites {
                // The rounds' largest downloads are written direct, as on a disk: checked once.
                try DirectWriteTests.expectDirectWrites(under: URL(fileURLWithPath: container.root), taken: true)
                checkedDirectWrites = true
            }
            let roundStart = Date()
            let workload = PowerCutWorkload(round: round, seed: random.next(), container: container, server: server, uploadSources: uploadSources)
            // A third of the cuts come while the daemon starts and recovers; the rest while work goes on.
            // After padding, soon after the compaction starts.
            let window = padded ? 0.05 + Double(random.next(below: 700)) / 1000
                : random.chance(0.3) ? Double(random.next(below: 400)) / 1000 : 0.2 + Double(random.next(below: 1_600)) / 1000
            let daemonStarted = workload.startDaemon()
            // A cut at a chosen operation may come before the daemon answers: nothing to drive then.
            let cutWhileStarting = !daemonStarted && mounted.hasCut
            if daemonStarted { workload.start() }
            // The instant of the cut: the chosen operation, or the end of the window. After padding,
            // the chosen step of the compaction is waited for: beside two CPU hogs, no padded round of
            // a 40-cut run reached it within its window, and the check for a cut during one failed.
            _ = waitUntil(timeout: padded && daemonStarted ? max(window, 15) : window) { mounted.hasCut }
            workload.stop()
            let summary = try mounted.cut()
            // Everything dies with the power.
            stage.killProcesses()
            try #require(workload.waitUntilEnded(timeout: 30), "round \(round): the workload's processes did not end")
            stage.killProcesses() // an app launched meanwhile
            stage.unmount()
            // A process that outlived the power would have written into the bare mount point,
            // and could meet the next round's daemon with what it knew before the cut.
            let outlived = container.processesNamingContainer()
            let written = stage.clearBareMountPoint()
            if !outlived.isEmpty || !written.isEmpty {
                ledger.problems.append("round \(round): processes outlived the cut (\(outlived.map { ProcessSpawner.commandLine(of: $0)?.joined(separator: " ") ?? "\($0)" }.prefix(3))) or wrote into the bare mount point after it (\(written.prefix(5)))")
                stage.killProcesses()
            }
            summaries.append(summary)
            if let range = summary.range(of: #"torn [0-9]+"#, options: .regularExpression) { ledger.tornFiles += Int(summary[range].dropFirst(5)) ?? 0 }
            if let range = summary.range(of: #"fallocates [0-9]+"#, options: .regularExpression) { ledger.reservations += Int(summary[range].dropFirst(11)) ?? 0 }
            if let range = summary.range(of: #"direct writes [0-9]+"#, options: .regularExpression) { ledger.directWrites += Int(summary[range].dropFirst(14)) ?? 0 }
            if let cause = summary.range(of: "; cut by ").map({ String(summary[$0.upperBound...]) }) {
                ledger.cutCauses[cause == "a signal" ? "a random instant" : "after " + (cause.split(separator: " ").first.map(String.init) ?? cause), default: 0] += 1
                if cause.contains("/.journal.jsonl.") || cause.contains("\(fetch)/journal.jsonl") || (padded && cause.hasPrefix("fsyncdir")) { ledger.cutsDuringCompaction += 1 }
            }
            let problemsBefore = ledger.problems.count
            ledger.endRound(round, preCut: backing, survivors: survivors, started: workload.started, lost: mounted.lost, since: roundStart, server: server)
            if !daemonStarted && !cutWhileStarting { ledger.problems.append("round \(round): transferd did not start on the survivors of the previous cut: \(workload.daemonError ?? "")") }
            if let evidence = environment["BGTRANSFER_POWERCUT_EVIDENCE"], ledger.problems.count > problemsBefore {
                // The folders before and after the cut, kept where no test's clean-up goes.
                let folder = URL(fileURLWithPath: evidence).appendingPathComponent("round-\(round)")
                try? FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
                _ = try? Executable(name: "cp", path: "/bin/cp").start(["-a", backing.path, folder.appendingPathComponent("before-cut").path], in: container, passContainer: false).wait(timeout: 60)
                _ = try? Executable(name: "cp", path: "/bin/cp").start(["-a", survivors.path, folder.appendingPathComponent("after-cut").path], in: container, passContainer: false).wait(timeout: 60)
                try? (ledger.problems[problemsBefore...].joined(separator: "\n") + "\n").write(to: folder.appendingPathComponent("problems.txt"), atomically: true, encoding: .utf8)
                for process in workload.started { try? FileManager.default.copyItem(at: process.process.stdoutPath, to: folder.appendingPathComponent(process.process.stdoutPath.lastPathComponent)) }
            }
            if environment["BGTRANSFER_KEEP_TEST_CONTAINERS"] == nil { try? FileManager.default.removeItem(at: backing) }
            // The user clears out the downloads already checked, so that rounds stay as quick
            // (the file system reads the whole tree at each mount and writes it at each cut).
            ledger.removeCheckedDownloads(root: survivors)
            backing = survivors
            if !ledger.problems.isEmpty && environment["BGTRANSFER_POWERCUT_KEEP_GOING"] == nil { break }
        }

        // No more cuts: the survivors run to the end, and every accepted task must complete.
        let drained = try drain(backing: backing, stage: stage, server: server, ledger: &ledger)

        let seconds = Date().timeIntervalSince(began)
        print(ledger.report(seconds: seconds, cuts: summaries.count, seed: seed))
        // The problems first: CI shows only the output around the first failure.
        let problems = ledger.problems.prefix(40).joined(separator: "\n")
        #expect(ledger.problems.isEmpty, "seed \(seed):\n\(problems)")
        #expect(summaries.count >= min(cuts, 100) || !ledger.problems.isEmpty, "only \(summaries.count) cuts ran")
        #expect(drained, "the survivors did not run to completion (seed \(seed)); accepted tasks never completed: \(ledger.unfinishedAccepted.sorted())")
        #expect(ledger.compactions > 0, "no journal was compacted: the test did not reach \(4096) lines in a session")
        #expect(ledger.reservations > 0, "no download had its blocks reserved ahead: the cuts did not reach that path")
        #expect(ledger.directWrites > 0, "no download was written direct (O_DIRECT): the cuts did not reach that path")
        #expect(ledger.cutsDuringCompaction > 0 || cuts < 20, "no cut came during a compaction")
    }

    /// Mounts the last survivors (no cut), runs the daemon and opens the app until every
    /// accepted task has been completed for a delegate and no event waits.
    private func drain(backing: URL, stage: PowerCutStage, server: LoopbackServer, ledger: inout PowerCutLedger) throws -> Bool {
        let container = stage.container
        let round = ledger.round + 1
        ledger.beginRound(round, backing: backing)
        _ = try stage.mount(backing: backing, survivors: stage.base.appendingPathComponent("final"), marker: stage.base.appendingPathComponent("final.done"))
        let start = Date()
        _ = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.05"])
        let deadline = Date().addingTimeInterval(120)
        var done = false
        var launches: [String] = []
        while Date() < deadline {
            // The journals before the log: a delegate's completion is in the log before its
            // acknowledgement takes the event out of the journal.
            let journals = ledger.journals(root: URL(fileURLWithPath: container.root))
            ledger.observe(log: container.layout, since: start, round: round)
            ledger.noteAcknowledged(root: URL(fileURLWithPath: container.root))
            // Tasks nobody was told of may stay suspended (created, then killed before resume()).
            let pending = journals.values.reduce(0) { $0 + $1.events.count }
            if ledger.unfinishedAccepted.isEmpty && pending == 0 { done = true; break }
            // An accepted task no journal names any more can never complete: no use waiting.
            if pending == 0 && ledger.unfinishedAccepted.isDisjoint(with: PowerCutLedger.namedTasks(journals)) { break }
            let launch = try Executable.hostApp.run([], in: container, timeout: 60)
            launches.append(launch.timedOut ? "timed out" : "exit \(launch.status ?? -1)")
            _ = waitUntil(timeout: 1) { false } // the relaunched app and the transfers go on meanwhile
        }
        ledger.observe(log: container.layout, since: start, round: round)
        if !done {
            print("after the last round: \(Int(Date().timeIntervalSince(start))) s, \(launches.count) launches of the host app: \(launches.suffix(10))")
            for (session, journal) in ledger.journals(root: URL(fileURLWithPath: container.root)) {
                print("after the last round: \(session): events pending \(journal.events.keys.sorted()), unfinished tasks \(journal.tasks.values.map { "\($0.taskIdentifier) state \($0.state.rawValue)" }.sorted())")
            }
        }
        ledger.checkFiles(root: URL(fileURLWithPath: container.root), label: "after the last round")
        // Not a loss, but disk space: files of tasks and events nobody names any more (an
        // unlink after an acknowledgement that a cut undid, a partial file of a forgotten task).
        let caches = URL(fileURLWithPath: container.root).appendingPathComponent("AppGroups/group.com.example.transfers/Library/Caches/BackgroundTransfer")
        let named = Set(ledger.journals(root: URL(fileURLWithPath: container.root)).values.flatMap { journal in
            (journal.events.values.compactMap(\.downloadedFile) + journal.tasks.values.compactMap(\.uploadFile)).compactMap(container.layout.resolveRecordPath)
        })
        let leftovers = ((FileManager.default.enumerator(atPath: caches.path)?.allObjects as? [String]) ?? [])
            .filter { ["CFNetworkDownload_", "task-"].contains(where: ($0 as NSString).lastPathComponent.hasPrefix) && !named.contains(caches.appendingPathComponent($0).path) }
        ledger.leftovers = leftovers.count
        print("after the last round: \(leftovers.count) files in the sessions' caches named by no task or event, e.g. \(leftovers.sorted().prefix(5))")
        ledger.checkUploads(server: server)
        for key in ledger.unfinishedAccepted.sorted() {
            ledger.problems.append("after the last round: accepted task \(key) (\(ledger.accepted[key]!.name)) never completed for a delegate")
        }
        stage.killProcesses()
        stage.unmount()
        return done
    }

    @Test("An upload's body is removed only once the task's end is on disk: a cut at that instant leaves the task ended, never unfinished without its body",
          .enabled(if: PowerCutFileSystem.unavailableReason == nil, "skipped: /dev/fuse is absent (the power-cut test needs FUSE)"))
    func uploadBodyOutlivesItsTask() async throws {
        try await onOwnThread { try self.runUploadBodyCut() }
    }

    /// The random cuts found it: the body went at the upload's end, before the line ending the
    /// task was durable; a cut then brought the task back without its body, and it failed
    /// (-1100) although the server had every byte. Here the power goes right after that unlink.
    func runUploadBodyCut() throws {
        let stage = try PowerCutStage(firstBacking: "backing")
        defer { stage.end() }
        let container = stage.container, base = stage.base
        let server = try LoopbackServer()
        defer { server.stop() }
        let source = base.appendingPathComponent("body.bin")
        let body = PowerCutLedger.payload(name: "u-body-40000.bin")
        try body.write(to: source)
        server.acceptUploads(at: "/up/body")

        let survivors = base.appendingPathComponent("survivors")
        let mounted = try stage.mount(backing: stage.firstBacking, survivors: survivors, marker: base.appendingPathComponent("cut.done"), cutAt: "unlink:.upload:1")
        _ = try DaemonUnderTest.start(container)
        let upload = try Executable.shareExtension.start(["upload", source.path, server.url(for: "/up/body").absoluteString, "--wait"], in: container)
        let cut = waitUntil(timeout: 30) { mounted.hasCut }
        let summary = try mounted.cut()
        stage.killProcesses()
        upload.kill()
        stage.unmount()
        try #require(cut, "the upload's body was never removed (no cut): \(summary); extension: \(upload.stdout)")
        let received = server.receivedUploads(at: "/up/body").last
        #expect(received?.byteCount == Int64(body.count) && received?.sha256 == SHA256.hexDigest(of: body), "the server did not get the whole body: \(received?.byteCount ?? 0) bytes")

        let journal = try JournalContents.read(session: survivors.appendingPathComponent("Sessions/com.example.host/\(Self.sessions.share)"))
        let unfinished = journal.tasks.values.map(\.taskIdentifier)
        let ended = journal.events.values.filter { $0.task.kind == .upload }
        #expect(unfinished.isEmpty, "tasks unfinished on disk when the body went: \(unfinished) (\(summary))")
        #expect(ended.count == 1 && ended.first?.error == nil, "the upload's end on disk: \(ended.map { "\($0.task.taskIdentifier) \($0.error?.message ?? "ok")" })")
    }
}

/// One round's clients: two threads, each starting stand-in processes one after another
/// (an extension's session admits one process at a time) until the cut.
final class PowerCutWorkload: @unchecked Sendable {
    enum Kind: String { case download, upload, userLaunch }

    struct Started {
        var process: RunningProcess
        var executable: String
        var session: String
        var name: String
        var kind: Kind
    }

    let round: Int
    let container: TestContainer
    let server: LoopbackServer
    let uploadSources: URL
    private let lock = NSLock()
    private var stopping = false
    private var random: SeededRandom
    private var _started: [Started] = []
    private var counter = 0
    private var largeForced = false
    private let ended = DispatchGroup()
    private(set) var daemonError: String?

    init(round: Int, seed: UInt64, container: TestContainer, server: LoopbackServer, uploadSources: URL) {
        self.round = round
        self.random = SeededRandom(seed: seed)
        self.container = container
        self.server = server
        self.uploadSources = uploadSources
    }

    var started: [Started] { lock.withLock { _started } }

    func startDaemon() -> Bool {
        do {
            // Info: the lines about each task's creation, resumption and events, which a lost
            // task's problem quotes (`PowerCutLedger.evidence`).
            _ = try DaemonUnderTest.start(container, extraArguments: ["--relaunch-delay", "0.05", "--log-level", "info"])
            return true
        } catch {
            daemonError = "\(error)"
            return false
        }
    }

    func start() {
        for lane in 0..<2 {
            ended.enter()
            let thread = Thread { [self] in
                defer { ended.leave() }
                while !isStopping {
                    runOne(lane: lane)
                }
            }
            thread.start()
        }
    }

    var isStopping: Bool { lock.withLock { stopping } }

    func stop() { lock.withLock { stopping = true } }

    func waitUntilEnded(timeout: TimeInterval) -> Bool {
        ended.wait(timeout: .now() + timeout) == .success
    }

    private func next(below bound: UInt64) -> UInt64 { lock.withLock { random.next(below: bound) } }
    private func nextNumber() -> Int { lock.withLock { counter += 1; return counter } }

    /// The largest download size: long enough to be written direct (`BodyFileWriter.directThreshold`)
    /// and to have its blocks reserved, and it ends off a block.
    static let largest = (2 << 20) + 4_321

    /// Whether this download is the one of the round made one of the largest whatever the draw:
    /// the first of lane 0 in every eighth round. With 40 cuts the draws once made no download
    /// large enough to reserve blocks, and the test's check that the cuts reached that path failed.
    /// The draws are made as before, so a seed's other choices stay the same.
    private func forceLarge() -> Bool {
        guard round % 8 == 3 else { return false }
        return lock.withLock {
            defer { largeForced = true }
            return !largeForced
        }
    }

    /// A download size: mostly small, some large enough to be cut part-way, a few the largest.
    private func downloadSize() -> Int {
        let pick = next(below: 100)
        if pick < 80 { return 1 + Int(next(below: 48 << 10)) }
        if pick < 96 { return 192 << 10 }
        return Self.largest
    }

    private func runOne(lane: Int) {
        let pick = next(below: 100)
        let number = nextNumber()
        var arguments: [String]
        let executable: Executable
        let session: String
        var name = ""
        let kind: Kind
        if lane == 0 || pick < 30 {
            // Downloads in the fetch extension's session: its journal grows past 4,096 lines.
            var size = downloadSize()
            if lane == 0 && forceLarge() { size = Self.largest }
            name = "d-\(round)-\(lane)-\(number)-\(size).bin"
            server.serve("/pc/\(name)", data: PowerCutLedger.payload(name: name))
            executable = lane == 0 ? .fetchExtension : .hostApp
            session = lane == 0 ? PowerCutTests.sessions.fetch : PowerCutTests.sessions.host
            arguments = ["download", server.url(for: "/pc/\(name)").absoluteString]
            if next(below: 100) < 65 { arguments.append("--wait") }
            kind = .download
        } else if pick < 85 {
            let size = next(below: 10) == 0 ? 512 << 10 : 1 + Int(next(below: 64 << 10))
            name = "u-\(round)-\(number)-\(size).bin"
            let source = uploadSources.appendingPathComponent(name)
            try? PowerCutLedger.payload(name: name).write(to: source)
            var options = UploadOptions()
            if next(below: 2) == 0 { options.resumable = [6] }
            server.acceptUploads(at: "/up/\(name)", options: options)
            executable = .shareExtension
            session = PowerCutTests.sessions.share
            arguments = ["upload", source.path, server.url(for: "/up/\(name)").absoluteString]
            if next(below: 100) < 50 { arguments.append("--wait") }
            kind = .upload
        } else {
            executable = .hostApp
            session = PowerCutTests.sessions.host
            arguments = []
            kind = .userLaunch
        }
        // Started under the lock that stop() takes: after stop() no new process starts, so the
        // kill that follows the cut finds every one.
        let process = lock.withLock { () -> RunningProcess? in
            // Info: a delivery a holder skips as already seen (then acknowledges) says so only at info.
            guard !stopping, let process = try? executable.start(arguments, in: container, environment: ["BGTRANSFER_LOG_LEVEL": "info"]) else { return nil }
            _started.append(Started(process: process, executable: executable.name, session: session, name: name, kind: kind))
            return process
        }
        _ = process?.wait(timeout: 30)
    }
}

/// What the rounds saw and what the cuts left, and every problem found.
struct PowerCutLedger {
    struct Accepted {
        var name: String
        var kind: PowerCutWorkload.Kind
        var round: Int
    }

    let containerRoot: String
    var round = 0
    var problems: [String] = []
    /// "session#task" → what the client was told the daemon had.
    var accepted: [String: Accepted] = [:]
    /// Completions a delegate saw, by "session#task": how many times in all.
    var completionsSeen: [String: Int] = [:]
    /// Events pending in the journals when the round began.
    var pendingAtStart: Set<String> = []
    var linesAtStart: [String: Int] = [:]
    var compactions = 0
    var cutsDuringCompaction = 0
    var cutCauses: [String: Int] = [:]
    var leftovers = 0
    var tornFiles = 0
    /// Downloads of known length whose blocks the daemon reserved ahead (`fallocate` calls).
    var reservations = 0
    /// Writes that reached the file system through `O_DIRECT` (a long download's chunks).
    var directWrites = 0
    /// Events whose body a cut left under its working name, to be renamed at the daemon's start.
    var renamedAtStart = 0
    var maxLines = 0
    var deliveredFiles = 0
    var redeliveredAfterCut = 0
    var lostByKind: [String: Int] = [:]
    private var checkedFiles: Set<String> = []
    private var uploadDigests: [String: String] = [:]
    private var reportedLost: Set<String> = []
    private var reportedCorrupt: Set<String> = []
    /// Downloads a delegate took, by "session#task": the name it moved the file to in Downloads/.
    var finishedSeen: [String: String] = [:]
    /// Events the library found interrupted in didFinishDownloadingTo by the death of a holder.
    var interruptedInFinishing: Set<String> = []
    var diedWhileMoving: Set<String> = []
    var cutShort: Set<String> = []
    /// Tasks whose event a journal line acknowledged, by "session#task": delivered, whether or
    /// not the log kept the delegate's lines (a torn line can hide them, issue 44).
    var acknowledged: Set<String> = []

    init(containerRoot: String) {
        self.containerRoot = containerRoot
    }

    /// Deterministic bytes for a file name ("d-…-SIZE.bin", "u-…-SIZE.bin").
    static func payload(name: String) -> Data {
        if let cached = payloads.withLock({ $0[name] }) { return cached }
        let data = makePayload(name: name)
        payloads.withLock { $0[name] = data }
        return data
    }
    private static let payloads = Locked<[String: Data]>([:])

    private static func makePayload(name: String) -> Data {
        let size = Int(name.split(separator: "-").last?.split(separator: ".").first ?? "") ?? 0
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return testPayload(size: size, seed: hash)
    }

    /// The event and phase a session's `delivered.json` says a delegate call was under way for.
    static func deliveryInProgress(preCut: URL, session: String) -> (UInt64, String)? {
        let path = preCut.appendingPathComponent("Sessions/com.example.host/\(session)/delivered.json")
        guard let data = FileManager.default.contents(atPath: path.path),
              let object = try? JSONSerialization.jsonObject(with: Data(data.filter { $0 != 0 })) as? [String: Any],
              let number = (object["inProgress"] as? NSNumber)?.uint64Value, let phase = object["phase"] as? String else { return nil }
        return (number, phase)
    }

    /// Appends `{"acknowledgedThrough":0}` lines (valid and stale: they change nothing) to a
    /// session's journal in a backing folder until it has `lines` lines. Only a journal that
    /// ends with a whole line is padded. Returns whether it was.
    static func padJournal(backing: URL, session: String, to lines: Int) -> Bool {
        let path = backing.appendingPathComponent("Sessions/com.example.host/\(session)/journal.jsonl").path
        guard let data = FileManager.default.contents(atPath: path), data.last == UInt8(ascii: "\n") else { return false }
        let count = data.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
        guard count < lines, let handle = FileHandle(forWritingAtPath: path) else { return false }
        defer { try? handle.close() }
        handle.seekToEndOfFile()
        handle.write(Data(String(repeating: "{\"acknowledgedThrough\":0}\n", count: lines - count).utf8))
        return true
    }

    var unfinishedAccepted: Set<String> {
        Set(accepted.keys).subtracting(completionsSeen.keys).subtracting(cutShort).subtracting(acknowledged)
    }

    /// Notes the events an `acknowledgedThrough` line reaches in the journals under `root`: a
    /// client acknowledges an event only once its delegate had it (or had it before).
    mutating func noteAcknowledged(root: URL) {
        let sessions = root.appendingPathComponent("Sessions")
        for family in (try? FileManager.default.contentsOfDirectory(atPath: sessions.path)) ?? [] {
            let folder = sessions.appendingPathComponent(family)
            for session in (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? [] {
                let path = JournalContents.path(inSession: folder.appendingPathComponent(session))
                guard let data = FileManager.default.contents(atPath: path) else { continue }
                for task in Self.acknowledgedTasks(journal: data) { acknowledged.insert("\(session)#\(task)") }
            }
        }
    }

    /// The tasks whose event number a later `acknowledgedThrough` line of the journal reaches.
    static func acknowledgedTasks(journal data: Data) -> Set<Int> {
        var waiting: [UInt64: Int] = [:]
        var done: Set<Int> = []
        for text in data.split(separator: UInt8(ascii: "\n")) {
            guard let line = try? RecordCoding.decode(JournalLine.self, from: Data(text)) else { continue }
            if let event = line.event { waiting[event.number] = event.task.taskIdentifier }
            if let through = line.acknowledgedThrough {
                for (number, task) in waiting where number <= through {
                    done.insert(task)
                    waiting[number] = nil
                }
            }
        }
        return done
    }

    /// The tasks the journals name, unfinished or ended by an event still waiting, as the
    /// ledger's "session#task" keys: an accepted task not among them is lost.
    static func namedTasks(_ journals: [String: JournalContents]) -> Set<String> {
        Set(journals.flatMap { session, journal in
            journal.tasks.keys.map { "\(session)#\($0)" } + journal.events.values.map { "\(session)#\($0.task.taskIdentifier)" }
        })
    }

    /// Every session's journal under `root` (a container, or a backing folder standing for one).
    func journals(root: URL) -> [String: JournalContents] {
        let sessions = root.appendingPathComponent("Sessions")
        var result: [String: JournalContents] = [:]
        for family in (try? FileManager.default.contentsOfDirectory(atPath: sessions.path)) ?? [] {
            for session in (try? FileManager.default.contentsOfDirectory(atPath: sessions.appendingPathComponent(family).path)) ?? [] {
                let directory = sessions.appendingPathComponent(family).appendingPathComponent(session)
                if let contents = try? JournalContents.read(session: directory) { result[session] = contents }
            }
        }
        return result
    }

    mutating func beginRound(_ round: Int, backing: URL) {
        self.round = round
        let journals = journals(root: backing)
        pendingAtStart = Set(journals.flatMap { session, contents in contents.events.values.map { "\(session)#\($0.task.taskIdentifier)" } })
        linesAtStart = journals.mapValues(\.lineCount)
    }

    mutating func endRound(_ round: Int, preCut: URL, survivors: URL, started: [PowerCutWorkload.Started], lost: [String], since: Date, server: LoopbackServer) {
        // What the clients were told: an identifier printed once the daemon had the task on disk.
        var acceptedBy: [String: PowerCutWorkload.Started] = [:]
        for process in started where process.kind != .userLaunch {
            // The identifier's line: a fast task's delegate lines may come before it.
            guard let task = process.process.stdout.split(separator: "\n").lazy.compactMap({ Int($0) }).first else { continue }
            let key = "\(process.session)#\(task)"
            if let earlier = accepted[key] {
                problems.append("round \(round): task identifier \(key) handed out again (\(process.name), before \(earlier.name) in round \(earlier.round))")
            }
            accepted[key] = Accepted(name: process.name, kind: process.kind, round: round)
            acceptedBy[key] = process
        }
        // What delegates saw before the cut: the complete log, as the processes wrote it, and
        // the acknowledgements in the journals (before the cut, and kept by it).
        observe(log: ContainerLayout(root: preCut), since: since, round: round)
        noteAcknowledged(root: preCut)
        noteAcknowledged(root: survivors)

        // Journals: readable (a torn last line is allowed), nothing set aside.
        let after = journals(root: survivors)
        let sessionsDirectory = survivors.appendingPathComponent("Sessions")
        for family in (try? FileManager.default.contentsOfDirectory(atPath: sessionsDirectory.path)) ?? [] {
            for session in (try? FileManager.default.contentsOfDirectory(atPath: sessionsDirectory.appendingPathComponent(family).path)) ?? [] {
                let directory = sessionsDirectory.appendingPathComponent(family).appendingPathComponent(session)
                do {
                    let contents = try JournalContents.read(session: directory)
                    for bad in contents.unreadable {
                        problems.append("round \(round): \(session) journal line \(bad.line) unreadable after the cut: \(bad.reason)")
                    }
                } catch {
                    problems.append("round \(round): \(session) journal unreadable after the cut: \(error)")
                }
                if FileManager.default.fileExists(atPath: directory.appendingPathComponent("journal.corrupt").path) {
                    problems.append("round \(round): \(session) has a journal.corrupt")
                }
                let record = directory.appendingPathComponent("session.json")
                if FileManager.default.fileExists(atPath: record.path), (try? JSONSerialization.jsonObject(with: Data(contentsOf: record))) == nil {
                    problems.append("round \(round): \(session)/session.json unreadable after the cut")
                }
            }
        }
        // Compactions: a journal shorter before the cut than at the start of the round was rewritten.
        let before = journals(root: preCut)
        for (session, contents) in before {
            maxLines = max(maxLines, contents.lineCount)
            if let start = linesAtStart[session], contents.lineCount < start { compactions += 1 }
        }

        // No accepted task lost: it is unfinished, its event waits, or a delegate has had it.
        let namedAfter = Self.namedTasks(after)
        let delivered = Set(completionsSeen.keys).union(cutShort).union(acknowledged)
        for (key, task) in accepted where !delivered.contains(key) {
            let parts = key.split(separator: "#")
            let session = String(parts[0]), identifier = Int(parts[1])!
            if !namedAfter.contains(key), reportedLost.insert(key).inserted {
                let journalBefore = before[session]
                let where_ = journalBefore?.tasks[identifier] != nil ? "unfinished" : (journalBefore?.events.values.contains { $0.task.taskIdentifier == identifier } ?? false) ? "its event pending" : "absent"
                problems.append("round \(round): accepted task \(key) (\(task.name), accepted in round \(task.round)) lost by the cut (before the cut: \(where_))"
                                + Self.evidence(of: key, by: acceptedBy[key], log: ContainerLayout(root: preCut), since: since, survivors: survivors))
            }
        }
        // Files: finished files waiting for their event and delivered files, whole.
        for (session, contents) in after {
            for event in contents.events.values {
                guard let file = event.downloadedFile, event.error == nil else { continue }
                let name = URL(string: event.task.originalRequest.url)?.lastPathComponent ?? "?"
                // Records name files relative to the container (absolute in older records).
                let local = file.hasPrefix("/") ? survivors.path + file.dropFirst(containerRoot.count) : survivors.appendingPathComponent(file).path
                let key = "\(session)#\(event.task.taskIdentifier)"
                if !FileManager.default.fileExists(atPath: local), let moved = finishedSeen[key] {
                    // A delegate took the file before the cut and the acknowledgement was not
                    // durable: the app's copy must be.
                    check(file: survivors.appendingPathComponent("AppGroups/group.com.example.transfers/Downloads/\(moved)").path, expected: name,
                          label: "round \(round): \(key) (event \(event.number) pending) was moved into Downloads/ before the cut; the app's copy after the cut")
                    continue
                }
                if !FileManager.default.fileExists(atPath: local), diedWhileMoving.contains(key) {
                    // Found in an earlier round (below): the file went with that cut, and its event
                    // waits until an acknowledgement is durable, which this cut took again.
                    continue
                }
                if !FileManager.default.fileExists(atPath: local), interruptedInFinishing.contains(key) || Self.deliveryInProgress(preCut: preCut, session: session).map({ $0 == (event.number, "finishingDownload") }) == true,
                   FileManager.default.contents(atPath: preCut.appendingPathComponent("AppGroups/group.com.example.transfers/Downloads/\(name)").path) == Self.payload(name: name) {
                    // A holder died inside didFinishDownloadingTo after moving the file, before
                    // it synced Downloads/ (an extension exiting while its delegate ran); the
                    // library rightly does not repeat the call; the cut took the app's move.
                    diedWhileMoving.insert(key)
                    continue
                }
                // The body takes its final name after the event's line: a cut between the two
                // leaves it under its working name, which the daemon renames when it starts.
                let working = (local as NSString).deletingLastPathComponent + "/task-\(event.task.taskIdentifier).partial"
                if !FileManager.default.fileExists(atPath: local), FileManager.default.fileExists(atPath: working) {
                    renamedAtStart += 1
                    check(file: working, expected: name, label: "round \(round): finished file of \(key) (event \(event.number)) after the cut, under its working name")
                    continue
                }
                check(file: local, expected: name, label: "round \(round): finished file of \(key) (event \(event.number)) after the cut")
            }
        }
        checkFiles(root: preCut, label: "round \(round): before the cut")
        checkFiles(root: survivors, label: "round \(round): after the cut")
        checkUploads(server: server)

        for line in lost {
            let pattern = line.split(separator: " ").prefix(2).joined(separator: " ")
                .replacingOccurrences(of: #"[0-9A-F]{8}-[0-9A-F-]{27}"#, with: "UUID", options: .regularExpression)
                .replacingOccurrences(of: #"[0-9]+"#, with: "N", options: .regularExpression)
            lostByKind[pattern, default: 0] += 1
        }
    }

    /// Delegate calls in a container's log since `since`: a completion is seen at most once in
    /// a round, and again in a later round only if its event was still pending when that round
    /// began (its acknowledgement was not durable).
    mutating func observe(log layout: ContainerLayout, since: Date, round: Int) {
        var thisRound: [String: Int] = [:]
        var failures: [String: String] = [:]
        for entry in TransferLog.entries(layout: layout) where entry.time >= since && (entry.category == "delegate" || entry.category == "delivery") {
            guard let session = entry.session, let task = entry.task else { continue }
            let key = "\(session)#\(task)"
            if entry.category == "delivery" {
                if entry.message.contains("interrupted in finishingDownload") { interruptedInFinishing.insert(key) }
                // A holder died inside didCompleteWithError (an extension exiting while its
                // delegate ran): the call may have run, and is not repeated (at most once).
                if entry.message.contains("interrupted in completing") { cutShort.insert(key) }
                continue
            }
            if entry.isDidFinishDownloading, let range = entry.message.range(of: "moved to Downloads/") {
                finishedSeen[key] = String(entry.message[range.upperBound...])
            }
            if entry.isDidCompleteWithError {
                thisRound[key, default: 0] += 1
                if entry.message.contains("failed:") { failures[key] = entry.message }
            }
        }
        if round != observedRound {
            observedRound = round
            observedInRound = [:]
        }
        for (key, count) in thisRound {
            // The drain reads its log again and again: only what is new since the last look counts.
            let new = count - (observedInRound[key] ?? 0)
            guard new > 0 else { continue }
            let already = completionsSeen[key] ?? 0
            observedInRound[key] = count
            if let failure = failures[key] {
                problems.append("round \(round): accepted task \(key) (\(accepted[key]?.name ?? "?")) failed: \(failure)")
            }
            if count > 1 {
                problems.append("round \(round): \(key) (\(accepted[key]?.name ?? "?")) completed for a delegate \(count) times in one round")
            } else if already > 0 {
                if pendingAtStart.contains(key) {
                    redeliveredAfterCut += 1
                } else {
                    problems.append("round \(round): \(key) (\(accepted[key]?.name ?? "?")) completed for a delegate again although its acknowledgement was durable")
                }
            }
            completionsSeen[key] = already + new
        }
    }
    private var observedInRound: [String: Int] = [:]
    private var observedRound = -1

    /// Every file in the app group's Downloads/ (under a container or backing folder) holds
    /// exactly what the server served under its name.
    mutating func checkFiles(root: URL, label: String) {
        let downloads = root.appendingPathComponent("AppGroups/group.com.example.transfers/Downloads")
        for name in (try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? [] where name.hasPrefix("d-") {
            check(file: downloads.appendingPathComponent(name).path, expected: name, label: "\(label): Downloads/\(name)")
        }
    }

    /// Removes from Downloads/ under `root` the files already found whole, except those whose
    /// event still waits (a cut took the acknowledgement: the next round checks the copy).
    func removeCheckedDownloads(root: URL) {
        let downloads = root.appendingPathComponent("AppGroups/group.com.example.transfers/Downloads")
        let pending = Set(journals(root: root).values.flatMap { $0.events.values.compactMap { URL(string: $0.task.originalRequest.url)?.lastPathComponent } })
        for name in (try? FileManager.default.contentsOfDirectory(atPath: downloads.path)) ?? [] where checkedFiles.contains(name) && !pending.contains(name) {
            try? FileManager.default.removeItem(at: downloads.appendingPathComponent(name))
        }
    }

    private mutating func check(file path: String, expected name: String, label: String) {
        guard let data = FileManager.default.contents(atPath: path) else {
            if reportedCorrupt.insert(name).inserted { problems.append("\(label): missing") }
            return
        }
        let expected = Self.payload(name: name)
        if data == expected {
            if checkedFiles.insert(name).inserted { deliveredFiles += 1 }
        } else if reportedCorrupt.insert(name).inserted { // once per file, not in every round after
            let firstDifference = zip(data, expected).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(data.count, expected.count)
            problems.append("\(label): corrupt: \(data.count) bytes, expected \(expected.count); first difference at byte \(firstDifference)")
        }
    }

    /// Every upload the server received whole carried the file's bytes.
    mutating func checkUploads(server: LoopbackServer) {
        for (key, accepted) in accepted where accepted.kind == .upload {
            let received = server.receivedUploads(at: "/up/\(accepted.name)")
            guard !received.isEmpty else { continue }
            let expected = Self.payload(name: accepted.name)
            if uploadDigests[accepted.name] == nil { uploadDigests[accepted.name] = SHA256.hexDigest(of: expected) }
            for upload in received {
                if upload.byteCount != Int64(expected.count) || upload.sha256 != uploadDigests[accepted.name] {
                    let problem = "upload \(key) (\(accepted.name)) reached the server corrupt: \(upload.byteCount) bytes, expected \(expected.count)"
                    if !problems.contains(problem) { problems.append(problem) }
                }
            }
        }
    }

    /// What a lost task's problem carries, so that one failure in CI says what happened: what
    /// the session's journal said of it before and after the cut, the output of the process
    /// that printed its identifier, and every line the round's log has
    /// about the task or about its session as a whole (who opened it, which acknowledgements
    /// the daemon took), the daemon's and the clients'.
    static func evidence(of key: String, by process: PowerCutWorkload.Started?, log layout: ContainerLayout, since: Date, survivors: URL) -> String {
        let parts = key.split(separator: "#")
        guard parts.count == 2, let identifier = Int(parts[1]) else { return "" }
        let session = String(parts[0])
        let lines = TransferLog.entries(layout: layout).filter { $0.time >= since && $0.session == session && ($0.task == identifier || $0.task == nil) }
            .map { "    \($0.time.timeIntervalSince(since).formatted(.number.precision(.fractionLength(3)))) s \($0.process)[\($0.pid)] \($0.category): \($0.message)" }
        let journal = "Sessions/com.example.host/\(session)/journal.jsonl"
        var text = "\n  its journal before the cut: " + journalHistory(of: identifier, at: layout.root.appendingPathComponent(journal).path)
        text += "\n  its journal after the cut: " + journalHistory(of: identifier, at: survivors.appendingPathComponent(journal).path)
        text += "\n  its log this round (\(lines.count) lines, the last 60):\n" + lines.suffix(60).joined(separator: "\n")
        if let process {
            text += "\n  \(process.executable) (pid \(process.process.pid)) stdout: \(process.process.stdout.prefix(400)) stderr: \(process.process.stderr.suffix(400))"
        }
        return text
    }

    /// The lines of a journal file about one task, in order (its records' states, its event's
    /// number), and the acknowledgements that reached that event: whether the task ended, and
    /// who took its event away.
    static func journalHistory(of identifier: Int, at path: String) -> String {
        guard let data = FileManager.default.contents(atPath: path) else { return "no journal" }
        var said: [String] = []
        var eventNumber: UInt64?
        for (index, text) in data.split(separator: UInt8(ascii: "\n")).enumerated() {
            guard let line = try? RecordCoding.decode(JournalLine.self, from: Data(text)) else { continue }
            if let task = line.task, task.taskIdentifier == identifier {
                said.append("line \(index + 1) task \(task.state.rawValue)")
            } else if let event = line.event, event.task.taskIdentifier == identifier {
                eventNumber = event.number
                said.append("line \(index + 1) event \(event.number)\(event.error.map { " failed \($0.code)" } ?? "")")
            } else if let through = line.acknowledgedThrough, let number = eventNumber, through >= number {
                said.append("line \(index + 1) acknowledgedThrough \(through)")
                eventNumber = nil
            } else if let counters = line.counters {
                if said.isEmpty { continue }
                said.append("line \(index + 1) counters (a compaction) next task \(counters.nextTaskIdentifier), next event \(counters.nextEventNumber)")
            }
        }
        return said.isEmpty ? "no line names it" : said.joined(separator: "; ")
    }

    /// Accepted tasks no delegate line shows completed, whose event a journal acknowledged.
    var unseenButAcknowledged: Int {
        acknowledged.intersection(accepted.keys).subtracting(completionsSeen.keys).subtracting(cutShort).count
    }

    func report(seconds: TimeInterval, cuts: Int, seed: UInt64) -> String {
        var lines = ["power-cut seed \(seed): \(cuts) cuts in \(Int(seconds)) s; \(accepted.count) tasks accepted (\(accepted.values.filter { $0.kind == .download }.count) downloads, \(accepted.values.filter { $0.kind == .upload }.count) uploads), \(completionsSeen.count) completed for a delegate, \(unseenButAcknowledged) known delivered only by their journal's acknowledgement (the log lost the delegate's line), \(redeliveredAfterCut) redelivered after a cut lost their acknowledgement, \(diedWhileMoving.count) moved into Downloads/ by a holder that died before syncing it (the cut took the move), \(cutShort.count) completions cut short by a holder's death inside didCompleteWithError (not repeated); \(deliveredFiles) files checked whole; journals up to \(maxLines) lines, \(compactions) compactions seen, \(cutsDuringCompaction) cuts during one; \(tornFiles) files kept part of their unsynced appends (BGTRANSFER_POWERCUT_TORN); \(reservations) downloads with their blocks reserved ahead; \(directWrites) direct writes; \(renamedAtStart) finished bodies left under their working names by a cut (renamed at start); \(leftovers) files left in the caches named by nothing; \(problems.count) problems"]
        // Each problem's first line, before the figures: CI shows only part of the output.
        for problem in problems.prefix(10) { lines.append("problem: " + (problem.split(separator: "\n").first.map(String.init) ?? problem)) }
        lines.append("cuts: " + cutCauses.sorted { $0.value > $1.value }.map { "\($0.value) at \($0.key)" }.joined(separator: ", "))
        lines.append("what the cuts threw away (entries not made durable in their folder, data not synced), by kind:")
        for (pattern, count) in lostByKind.sorted(by: { $0.value > $1.value }).prefix(30) { lines.append("  \(count) × \(pattern)") }
        return lines.joined(separator: "\n")
    }
}
