import Foundation
@testable import TransferPOSIX
import Glibc
import Testing
@testable import TransferContainer

/// RootDirectory: files below a root are reached without a symlink on the way and never
/// outside it, by openat2 and by the walk a kernel without openat2 gets.
@Suite final class RootDirectoryTests {
    let base = FileManager.default.temporaryDirectory.appendingPathComponent("root-\(UUID().uuidString)").path
    var root: String { base + "/root" }
    var outside: String { base + "/outside" }

    init() throws {
        try FileManager.default.createDirectory(atPath: root + "/a/b", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try Data("inside".utf8).write(to: URL(fileURLWithPath: root + "/a/b/file"))
        try Data("outside".utf8).write(to: URL(fileURLWithPath: outside + "/file"))
    }

    deinit {
        try? FileManager.default.removeItem(atPath: base)
    }

    private func directory(walking: Bool) throws -> RootDirectory {
        var directory = try RootDirectory.open(root)
        directory.walks = walking
        return directory
    }

    /// The error number `body` throws, nil when it throws none.
    private func code(_ body: () throws -> Void) -> Int32? {
        do { try body() } catch let error as Errno { return error.code } catch { return -1 }
        return nil
    }

    @Test("A file below the root opens and reads; a symlink on the way or at the end is ELOOP, a way out EXDEV", arguments: [false, true])
    func opens(walking: Bool) throws {
        let directory = try self.directory(walking: walking)
        #expect(try directory.read(root + "/a/b/file", limit: 100) == Data("inside".utf8))
        symlink(outside, root + "/a/out")
        symlink(outside + "/file", root + "/a/b/link")
        #expect(code { _ = try directory.open(root + "/a/out/file", O_RDONLY).close() } == ELOOP)
        #expect(code { _ = try directory.open(root + "/a/b/link", O_RDONLY).close() } == ELOOP)
        #expect(code { _ = try directory.open(root + "/a/../../outside/file", O_RDONLY).close() } == EXDEV)
        #expect(code { _ = try directory.open(outside + "/file", O_RDONLY).close() } == EXDEV)
        #expect(code { _ = try directory.open(root + "/a/new", O_WRONLY | O_CREAT).close() } == nil)
        #expect(code { try directory.makeDirectory(root + "/a/out/made") } == ELOOP)
        #expect(!FileManager.default.fileExists(atPath: outside + "/made"))
    }

    @Test("read refuses a file past its limit (EFBIG) and what is not a regular file (EINVAL) before reading")
    func readLimits() throws {
        let directory = try RootDirectory.open(root)
        #expect(code { _ = try directory.read(root + "/a/b/file", limit: 5) } == EFBIG)
        mkfifo(root + "/a/fifo", 0o600)
        #expect(code { _ = try directory.read(root + "/a/fifo", limit: 100) } == EINVAL)
    }

    @Test("remove and rename act on a symlink itself, never on what it points at; makeDirectory makes the folders on the way")
    func removeRenameMake() throws {
        let directory = try RootDirectory.open(root)
        symlink(outside + "/file", root + "/a/link")
        try directory.rename(root + "/a/link", to: root + "/a/b/moved")
        try directory.remove(root + "/a/b/moved")
        #expect(try String(contentsOfFile: outside + "/file", encoding: .utf8) == "outside")
        try directory.makeDirectory(root + "/x/y/z")
        var st = stat()
        #expect(lstat(root + "/x/y/z", &st) == 0 && st.st_mode & S_IFMT == S_IFDIR && st.st_mode & 0o777 == 0o700)
        #expect(try directory.names(in: root + "/a/b").sorted() == ["file"])
    }

    @Test("Renames and removals in a batch each give their own result: one folder opened for all, a bad name or a symlinked folder fails only its own", arguments: [false, true])
    func batches(walking: Bool) throws {
        let directory = try self.directory(walking: walking)
        for name in ["one", "two", "three"] { try Data(name.utf8).write(to: URL(fileURLWithPath: root + "/a/b/" + name)) }
        symlink(outside, root + "/a/out")
        let results = directory.rename([(root + "/a/b/one", root + "/a/b/1"),
                                        (root + "/a/b/missing", root + "/a/b/m"),
                                        (root + "/a/b/two", root + "/a/out/2"), // into a symlinked folder
                                        (root + "/a/b/..", root + "/a/b/up"), // no file's name
                                        (root + "/a/b/three", root + "/a/3"), // another folder
                                        (outside + "/file", root + "/a/stolen")]) // from outside the root
        #expect(results.map { $0?.code } == [nil, ENOENT, ELOOP, EINVAL, nil, EXDEV])
        #expect(try String(contentsOfFile: root + "/a/b/1", encoding: .utf8) == "one")
        #expect(try String(contentsOfFile: root + "/a/3", encoding: .utf8) == "three")
        #expect(try String(contentsOfFile: root + "/a/b/two", encoding: .utf8) == "two")
        #expect(try String(contentsOfFile: outside + "/file", encoding: .utf8) == "outside")
        #expect(!FileManager.default.fileExists(atPath: outside + "/2"))

        let removed = directory.remove([root + "/a/b/1", root + "/a/b/never-there", root + "/a/out/file", root + "/a/3", root + "/a/b"])
        #expect(removed.map { $0?.code } == [nil, nil, ELOOP, nil, EISDIR])
        #expect(try directory.names(in: root + "/a/b").sorted() == ["file", "two"])
        #expect(try directory.names(in: root + "/a").sorted() == ["b", "out"])
        #expect(FileManager.default.fileExists(atPath: outside + "/file"))
    }

    @Test("openMakingDirectory opens an existing folder, makes a missing one with its parents, and refuses a symlink on the way")
    func openMaking() throws {
        let directory = try RootDirectory.open(root)
        let existing = try directory.openMakingDirectory(root + "/a/b")
        #expect(faccessat(existing.rawValue, "file", F_OK, 0) == 0)
        existing.close()
        let made = try directory.openMakingDirectory(root + "/n/m")
        #expect(mkdirat(made.rawValue, "inside", 0o700) == 0)
        made.close()
        #expect(FileManager.default.fileExists(atPath: root + "/n/m/inside"))
        symlink(outside, root + "/a/out")
        #expect(code { _ = try directory.openMakingDirectory(root + "/a/out/new").close() } == ELOOP)
        #expect(!FileManager.default.fileExists(atPath: outside + "/new"))
    }

    @Test("PathText splits a path as NSString does, and slashes alone as the root")
    func pathText() {
        let paths = ["", "/", "/a", "/a/", "/a/b", "/a/b/", "/a//b", "/a//b//", "a/b", "a//b", "//a", "/a/b/c.tmp",
                     "/tmp/x y/é/CFNetworkDownload_7.tmp", "..", "/a/.", "/a/.."]
        for path in paths {
            #expect(PathText.folder(of: path) == (path as NSString).deletingLastPathComponent, "folder of \(path)")
            #expect(PathText.lastComponent(of: path) == (path as NSString).lastPathComponent, "last component of \(path)")
        }
        // Slashes alone are the root, as Darwin's NSString has it (corelibs' answers "" for "//"),
        // and a name of one character has no folder (corelibs' NSString traps on "a", "a/", ".").
        #expect(PathText.folder(of: "//") == "/" && PathText.lastComponent(of: "//") == "/")
        for (path, name) in [("a", "a"), ("a/", "a"), (".", ".")] {
            #expect(PathText.folder(of: path) == "" && PathText.lastComponent(of: path) == name)
        }
    }

    @Test("PathText standardises an absolute path as URL.standardizedFileURL does, and leaves relative ones and parent references to Foundation")
    func pathTextStandardized() throws {
        let plain = ["/", "//", "///", "/a", "/a/", "/a//b", "/a/./b/", "/a/b/.", "/./a", "/.a/b", "/a/.../b", "/a/..b/c", "/a/b../c",
                     "/tmp/x y/é/ü//./CFNetworkDownload_7.tmp", "/a/~/b", "/a/ /b", "/" + String(repeating: "d/", count: 300)]
        for path in plain {
            let answer = try #require(PathText.standardized(path), "\(path)")
            #expect(answer == URL(fileURLWithPath: path).standardizedFileURL.path, "\(path)")
        }
        for path in ["", "a/b", "./a", "~/a", "~", "/a/..", "/a/../b", "/..", "/a/b/../../..", ".."] {
            #expect(PathText.standardized(path) == nil, "\(path)")
        }
        // ".. " is a name, not a parent reference.
        #expect(PathText.standardized("/a/.. /b") == URL(fileURLWithPath: "/a/.. /b").standardizedFileURL.path)
        // The layout's root is Foundation's spelling either way, parent references and symbolic links included.
        let linked = FileManager.default.temporaryDirectory.appendingPathComponent("path-text-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: linked.appendingPathComponent("real/deep"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: linked) }
        try FileManager.default.createSymbolicLink(atPath: linked.path + "/link", withDestinationPath: linked.path + "/real/deep")
        for path in plain + ["/a/../b", "/..", linked.path + "/link/..", linked.path + "/link/../x", linked.path + "//link/./"] {
            #expect(ContainerLayout(root: URL(fileURLWithPath: path)).root.path == URL(fileURLWithPath: path).standardizedFileURL.path, "\(path)")
        }
    }
}
