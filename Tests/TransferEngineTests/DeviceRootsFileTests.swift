import Foundation
import Testing
import TransferContainer
@testable import TransferEngine
import TransferPOSIX

/// Who may install a root every app trusts (`DeviceRootsFile`, WhoMayDoWhat.md), each rule at
/// its bound and one past it: the container's file only when root owns it, no group or other
/// may write it and it has one name; the file `--trusted-roots` names may also be the
/// daemon's own user's, and is read only as a regular file of at most 1 MiB, not a symlink.
@Suite struct DeviceRootsFileTests {
    private static func status(owner: uid_t = 0, mode: mode_t = 0o644, links: Int = 1) -> stat {
        var st = stat()
        st.st_uid = owner
        st.st_mode = S_IFREG | mode
        st.st_nlink = nlink_t(links)
        return st
    }

    /// The container's file, judged on a status only: nothing is read.
    private static func containerFile() throws -> DeviceRootsFile {
        let layout = ContainerLayout(root: URL(fileURLWithPath: "/nonexistent-container"))
        return .container(layout, root: try RootDirectory.open("/"))
    }

    @Test("""
        The container's file: owner root installs, uid 1 does not; mode 0644 and 0600 install, 0664 and \
        0646 do not; one link installs, two do not
        """)
    func containerRule() throws {
        let file = try Self.containerFile()
        #expect(file.refusal(of: Self.status()) == nil)
        #expect(file.refusal(of: Self.status(mode: 0o600)) == nil)
        #expect(file.refusal(of: Self.status(owner: 1)) == .owner(accepted: [0]))
        #expect(file.refusal(of: Self.status(owner: 65534)) != nil)
        #expect(file.refusal(of: Self.status(mode: 0o664)) == .writableByOthers)
        #expect(file.refusal(of: Self.status(mode: 0o646)) == .writableByOthers)
        #expect(file.refusal(of: Self.status(links: 2)) == .links)
    }

    @Test("""
        The --trusted-roots file: owner root or the daemon's user installs, another uid does not; 0664 \
        and 0646 do not; a second name does not matter
        """)
    func optionRule() {
        let file = DeviceRootsFile.option("/roots.pem")
        #expect(file.refusal(of: Self.status()) == nil)
        #expect(file.refusal(of: Self.status(owner: geteuid())) == nil)
        #expect(file.refusal(of: Self.status(owner: geteuid() == 65534 ? 65533 : 65534)) != nil)
        #expect(file.refusal(of: Self.status(mode: 0o664)) != nil)
        #expect(file.refusal(of: Self.status(mode: 0o646)) != nil)
        #expect(file.refusal(of: Self.status(links: 2)) == nil)
    }

    @Test("""
        A --trusted-roots file of 1 MiB is read, one of 1 MiB and a byte is not (EFBIG); a symlink to a \
        good file is not (ELOOP); a missing one is no roots
        """)
    func optionReads() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("roots-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        func file(_ name: String, bytes: Int) -> String {
            let path = folder.appendingPathComponent(name).path
            #expect(FileManager.default.createFile(atPath: path, contents: Data(count: bytes),
                                                   attributes: [.posixPermissions: 0o644]))
            return path
        }
        let atBound = file("bound.pem", bytes: StateFileLimits.trustedRoots)
        #expect(try DeviceRootsFile.option(atBound).read()?.count == 1 << 20)
        let past = file("past.pem", bytes: StateFileLimits.trustedRoots + 1)
        #expect(Self.errno(reading: past) == EFBIG)
        let link = folder.appendingPathComponent("link.pem").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: atBound)
        #expect(Self.errno(reading: link) == ELOOP)
        #expect(try DeviceRootsFile.option(folder.appendingPathComponent("missing.pem").path).read() == nil)
    }

    /// The errno of a refusal to read the file at `path`; nil when it was read or refused otherwise.
    private static func errno(reading path: String) -> Int32? {
        do {
            _ = try DeviceRootsFile.option(path).read()
            return nil
        } catch {
            guard case .unreadable(let error) = error.reason else { return nil }
            return error.code
        }
    }
}
