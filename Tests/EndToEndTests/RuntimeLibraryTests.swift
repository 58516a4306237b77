import Foundation
import Testing

/// Building needs no libcurl or OpenSSL headers: both libraries are loaded at run time. A
/// machine without one of them must say which, not crash somewhere later. Each library is
/// hidden from one process by mounting an empty file over it in a mount namespace of its own
/// (root only; `bash .ci/run` runs as root in CI).
@Suite(.enabled(if: getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare"),
                "needs root and unshare to hide a library from one process"))
struct RuntimeLibraryTests {
    /// The file the dynamic loader finds for `soname`, as `ldconfig -p` lists it.
    static func installedPath(of soname: String) -> String? {
        ["/usr/lib/x86_64-linux-gnu/", "/lib/x86_64-linux-gnu/", "/usr/lib64/", "/usr/lib/"]
            .map { $0 + soname }
            .first { FileManager.default.fileExists(atPath: $0) }
    }

    @Test("A missing libcurl or libcrypto stops an executable with an error that names the library",
          arguments: ["libcurl.so.4", "libcrypto.so.3"])
    func missingLibraryIsNamed(soname: String) throws {
        let library = try #require(Self.installedPath(of: soname), "\(soname) is not installed here")
        let real = (try? FileManager.default.destinationOfSymbolicLink(atPath: library))
            .map { URL(fileURLWithPath: $0, relativeTo: URL(fileURLWithPath: library).deletingLastPathComponent()) }
            .map(\.path)
            ?? library
        let container = try TestContainer()
        defer { container.tearDown() }
        let script = "mount --bind /dev/null \"$1\" && exec \"$2\" --container \"$3\" inspect"
        let outcome = try Executable(name: "unshare", path: "/usr/bin/unshare").start(
            ["--mount", "--propagation", "private", "sh", "-c", script, "sh", real, Executable.bgtransfer.path,
             container.root],
            in: container, passContainer: false).wait(timeout: 30)
        #expect(outcome.status != nil && outcome.status != 0, "it ran without \(soname): \(outcome.stdout)")
        #expect(outcome.stderr.contains(soname), "the error names \(soname): \(outcome.stderr)")
    }
}
