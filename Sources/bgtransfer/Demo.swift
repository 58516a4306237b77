import Foundation
import LoopbackServer
import TransferContainer
import ProgressDisplay
import ContainerInspection
import Digests
import TransferLogging
import TransferPOSIX

/// `bgtransfer demo`: the story of a background download from an extension, told as a
/// timeline read from the container's log, checked by SHA-256 at the end.
struct Demo {
    let layout: ContainerLayout
    let start = Date()
    private let log: TransferLog

    init(layout: ContainerLayout) {
        self.layout = layout
        self.log = TransferLog(layout: layout, process: "bgtransfer", subsystem: "com.example.bgtransfer")
    }
    static let payloadSize = 8 << 20
    static let fileName = "demo-payload.bin"
    static let fetchSession = "com.example.host.fetch.background"

    /// The demo's own steps go into the container's log, so that one timeline, in time
    /// order, is printed from the log for every process.
    func step(_ text: String) {
        log.notice("demo", text)
    }

    func say(_ process: String, _ pid: Int32, _ text: String, at time: Date = Date()) {
        let offset = String(format: "%7.3f s", time.timeIntervalSince(start))
        print("\(offset)  \(process.padding(toLength: 16, withPad: " ", startingAt: 0)) \(String(pid).padding(toLength: 7, withPad: " ", startingAt: 0)) \(text)")
    }

    func run() -> Int32 {
        let me = getpid()
        print("BackgroundTransfer demo on \(layout.root.path)\n")
        print("   time     process          pid     event")
        do { try layout.prepare() } catch {
            say("bgtransfer", me, "cannot prepare the container: \(error)")
            return 1
        }
        let downloads = layout.appGroup(try! BundleIdentifier("group.com.example.transfers")).appendingPathComponent("Downloads/\(Self.fileName)")
        try? FileManager.default.removeItem(at: downloads)
        let daemonWasRunning = FileLock.isHeld(layout.daemonLock.path)

        // 1. A loopback server with a few MiB to serve, throttled so the transfer is visible.
        let payload = Self.payload()
        let digest = SHA256.hexDigest(of: payload)
        let server: LoopbackServer
        do { server = try LoopbackServer() } catch {
            say("bgtransfer", me, "cannot start the loopback server: \(error)")
            return 1
        }
        defer { server.stop() }
        var options = RouteOptions()
        options.bytesPerSecond = 16 << 20
        server.serve("/files/\(Self.fileName)", data: payload, options: options)
        let url = server.url(for: "/files/\(Self.fileName)")
        var follower = LogFollower(layout: layout)
        step("loopback server on \(server.baseURL.absoluteString) serves \(ProgressFormat.bytes(Int64(payload.count))) (sha256 \(digest.prefix(16))…)")

        // 2. The extension starts the download and exits at once; the rest is read from the log.
        let fetch = Tool.executablesDirectory + "/fetch-extension"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: fetch)
        process.arguments = ["--container", layout.root.path, "download", url.absoluteString]
        let output = Pipe()
        process.standardOutput = output
        do { try process.run() } catch {
            say("bgtransfer", me, "cannot run \(fetch): \(error) (build with `swift build` first)")
            return 1
        }
        step("ran fetch-extension download \(url.absoluteString) (pid \(process.processIdentifier))")
        process.waitUntilExit()
        // `readToEnd()`: corelibs' `readDataToEndOfFile()` traps on a read error.
        let taskLine = String(decoding: (try? output.fileHandleForReading.readToEnd()) ?? Data(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        step("fetch-extension exited with status \(process.terminationStatus), having printed task identifier \(taskLine)")
        guard process.terminationStatus == 0 else { return 1 }

        // 3. Follow the timeline until the relaunched host has called its completion handler,
        //    saying why the wait goes on whenever that changes (on a used container the
        //    resume rate limiter may hold the relaunch back: then it is waited out).
        var deadline = Date().addingTimeInterval(60)
        var acknowledged = false
        var lastWait: String?
        var lastLook = Date.distantPast
        while Date() < deadline && !acknowledged {
            for entry in follower.next().sorted(by: { $0.time < $1.time }) where entry.level >= .notice {
                say(entry.process, entry.pid, entry.message, at: entry.time)
                if entry.process == "host-app" && entry.message.hasPrefix("completion handler called") && entry.session == Self.fetchSession {
                    acknowledged = true
                }
            }
            if !acknowledged && Date().timeIntervalSince(lastLook) >= 0.5 {
                lastLook = Date()
                let snapshot = ContainerSnapshot.read(layout, sessionFilter: Self.fetchSession)
                if let wait = snapshot.sessions.first?.deliveryWait, wait != lastWait {
                    lastWait = wait
                    say("bgtransfer", me, "the event waits: \(wait)")
                }
                if let host = snapshot.apps.first(where: { $0.bundleIdentifier == "com.example.host" }), let delay = host.relaunchDelay, let last = host.lastRelaunch {
                    deadline = max(deadline, last.addingTimeInterval(delay + 30))
                }
            }
            if !acknowledged { usleep(50_000) }
        }
        guard acknowledged else {
            say("bgtransfer", me, "FAILED: the host was not relaunched and acknowledged in time (see `bgtransfer inspect`)")
            return 1
        }

        // 4. Check the delivered file.
        let delivered = (try? SHA256.hexDigest(ofFile: downloads.path)) ?? "missing"
        if !daemonWasRunning, let pid = FileLock.holderPID(layout.daemonLock.path), FileLock.isHeld(layout.daemonLock.path) {
            kill(pid, SIGTERM) // the daemon the demo started on demand goes, as launchd would let it
        }
        print("")
        print("served    sha256 \(digest)")
        print("delivered sha256 \(delivered)  (\(downloads.path))")
        if delivered == digest {
            print("demo passed: the file reached the app group's Downloads/ intact")
            return 0
        }
        print("demo FAILED: the delivered file does not match")
        return 1
    }

    /// Deterministic bytes (xorshift), so every run serves the same file.
    static func payload() -> Data {
        var state: UInt64 = 0x9E3779B97F4A7C15
        var data = Data(count: payloadSize)
        data.withUnsafeMutableBytes { raw in
            let words = raw.bindMemory(to: UInt64.self)
            for i in 0..<words.count {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17
                words[i] = state
            }
        }
        return data
    }
}
