import Foundation

/// A test container set up to live on `powercutfs`: the file system compiled, the prepared
/// container moved aside as the first backing folder, its own path left as the mount point.
/// Mounts one backing folder at a time; `end()` kills whatever names the container, unmounts
/// and removes it all. Used from one test's thread.
final class PowerCutStage {
    let container: TestContainer
    /// The compiled `powercutfs`.
    let executable: String
    /// The container as it was prepared, to be mounted first.
    let firstBacking: URL
    private(set) var fileSystem: PowerCutFileSystem?

    var base: URL { container.parent }

    init(firstBacking name: String) throws {
        container = try TestContainer()
        do {
            executable = try PowerCutFileSystem.build(into: container.parent, container: container)
            firstBacking = container.parent.appendingPathComponent(name)
            try FileManager.default.moveItem(atPath: container.root, toPath: firstBacking.path)
            try FileManager.default.createDirectory(atPath: container.root, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        } catch {
            container.tearDown()
            throw error
        }
    }

    /// Mounts `backing` at the container's path (see `PowerCutFileSystem.mount`).
    func mount(backing: URL, survivors: URL, marker: URL, cutAt: String? = nil, torn: String? = nil, seed: UInt64 = 0, refuseDirect: Bool = false) throws -> PowerCutFileSystem {
        let mounted = try PowerCutFileSystem.mount(executable: executable, backing: backing, at: container.root, survivors: survivors, marker: marker,
                                                   container: container, cutAt: cutAt, torn: torn, seed: seed, refuseDirect: refuseDirect)
        fileSystem = mounted
        return mounted
    }

    /// Kills every process that names the container, but the file system's own, until none
    /// is left (`TestContainer.endProcesses`): nothing may outlive the power and meet the
    /// next mount with what it knew before the cut.
    func killProcesses() {
        container.endProcesses(sparing: fileSystem?.process.pid, looksTwice: true)
    }

    /// What a process wrote into the bare mount point after the file system was unmounted
    /// (it should be empty: every process dies with the power), which is then removed so that
    /// the next mount covers an empty folder.
    func clearBareMountPoint() -> [String] {
        let written = (try? FileManager.default.contentsOfDirectory(atPath: container.root)) ?? []
        for name in written { try? FileManager.default.removeItem(atPath: container.root + "/" + name) }
        return written.sorted()
    }

    /// Unmounts the file system mounted last.
    func unmount() {
        fileSystem?.end()
        fileSystem = nil
    }

    func end() {
        killProcesses()
        unmount()
        container.tearDown()
    }
}
