import Foundation

/// `Tests/PowerCut/powercutfs.c` mounted over a backing directory: a pass-through FUSE file
/// system that can cut the power (see the source for its model of what a disk keeps). It is
/// compiled at run time with the system's libfuse3, so that nothing else needs libfuse.
struct PowerCutFileSystem {
    let process: RunningProcess
    let mountPoint: String
    let survivors: URL
    let marker: URL
    let container: TestContainer

    /// Why the test cannot run here, or nil. Only a missing `/dev/fuse` is a reason to skip:
    /// a missing compiler or library is a failure (CI installs `fuse3 libfuse3-dev pkg-config`).
    static var unavailableReason: String? {
        FileManager.default.fileExists(atPath: "/dev/fuse") ? nil : "/dev/fuse is absent: the power-cut test needs FUSE"
    }

    static var source: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("PowerCut/powercutfs.c")
    }

    /// Compiles the file system into `directory`; returns the executable's path.
    static func build(into directory: URL, container: TestContainer) throws -> String {
        let output = directory.appendingPathComponent("powercutfs").path
        // $CC, else gcc or cc, else the clang that comes with the Swift toolchain.
        let toolchainClang = ((ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map { "\($0)/clang" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }) ?? "clang"
        let command = "for c in \"${CC:-}\" gcc cc '\(toolchainClang)'; do [ -n \"$c\" ] && command -v \"$c\" >/dev/null && break; done; "
            + "\"$c\" -O2 -Wall -o '\(output)' '\(source.path)' $(pkg-config --cflags --libs fuse3)"
        let outcome = try Executable(name: "sh", path: "/bin/sh").start(["-c", command], in: container, passContainer: false).wait(timeout: 120)
        guard outcome.status == 0 else {
            throw TestFailure("cannot compile \(source.path) (needs a C compiler, pkg-config and libfuse3-dev; fusermount3 from fuse3 to mount): \(outcome.stderr)")
        }
        return output
    }

    /// Mounts `backing` at `mountPoint`; a cut writes what survives into `survivors`.
    /// With `cutAt` ("OP:TEXT:N", see `POWERCUT_AT` in the source) it also cuts by itself
    /// right after the N-th such operation.
    /// With `torn` ("prefix" or "zeros", see `POWERCUT_TORN`) part of what was appended since
    /// the last sync survives, as some disks keep it.
    /// With `refuseDirect` every direct (`O_DIRECT`) write fails with EINVAL, as on file systems
    /// without direct I/O (see `POWERCUT_REFUSE_DIRECT`).
    static func mount(executable: String, backing: URL, at mountPoint: String, survivors: URL, marker: URL, container: TestContainer, cutAt: String? = nil,
                      torn: String? = nil, seed: UInt64 = 0, refuseDirect: Bool = false) throws -> PowerCutFileSystem {
        let process = try Executable(name: "powercutfs", path: executable)
            .start([backing.path, survivors.path, marker.path, mountPoint, "-o", "default_permissions,auto_unmount,fsname=powercutfs"], in: container,
                   environment: ["POWERCUT_AT": cutAt ?? "", "POWERCUT_TORN": torn ?? "", "POWERCUT_SEED": "\(seed)", "POWERCUT_REFUSE_DIRECT": refuseDirect ? "1" : ""],
                   passContainer: false)
        let fileSystem = PowerCutFileSystem(process: process, mountPoint: mountPoint, survivors: survivors, marker: marker, container: container)
        guard waitUntil(timeout: 10, { fileSystem.isMounted || !process.isRunning }), fileSystem.isMounted else {
            fileSystem.end()
            throw TestFailure("powercutfs did not mount \(mountPoint) within 10 s: \(process.stderr)")
        }
        return fileSystem
    }

    var isMounted: Bool {
        let mounts = (try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8)) ?? ""
        return mounts.split(separator: "\n").contains { $0.split(separator: " ").dropFirst().first.map(String.init) == mountPoint }
    }

    /// Whether the power is already off (a cut at a chosen operation).
    var hasCut: Bool { FileManager.default.fileExists(atPath: marker.path) }

    /// Cuts the power (unless it is off already) and waits until the survivors are written;
    /// returns the file system's summary ("ok files … fsyncs …; cut by …").
    func cut() throws -> String {
        if !hasCut { sendSignal(process.pid, SIGUSR1) }
        guard waitUntil(timeout: 60, { FileManager.default.fileExists(atPath: marker.path) }) else {
            throw TestFailure("powercutfs did not write the survivors within 60 s: \(process.stderr)")
        }
        let summary = (try? String(contentsOf: marker, encoding: .utf8)) ?? ""
        guard summary.hasPrefix("ok") else { throw TestFailure("powercutfs: \(summary)") }
        return summary.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// What the cut threw away: "entry PATH" (a name not made durable in its folder) and
    /// "data PATH size N durable M" (content not made durable), as paths in the container.
    var lost: [String] {
        ((try? String(contentsOf: URL(fileURLWithPath: marker.path + ".lost"), encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Unmounts (lazily: nothing may use it any more) and ends the file system's process.
    func end() {
        if isMounted {
            _ = try? Executable(name: "fusermount3", path: "/usr/bin/fusermount3").start(["-u", "-z", mountPoint], in: container, passContainer: false).wait(timeout: 20)
        }
        process.kill(signal: SIGTERM)
        if process.wait(timeout: 10).timedOut { process.kill() }
        if isMounted {
            _ = try? Executable(name: "umount", path: "/usr/bin/umount").start(["-l", mountPoint], in: container, passContainer: false).wait(timeout: 20)
        }
    }
}
