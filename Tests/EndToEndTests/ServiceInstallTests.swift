import Foundation
import Testing

/// Examples/service/install.sh and uninstall.sh, and what they install (issue 30): the user
/// units pass `systemd-analyze verify`, the bash completion loads, the man pages render
/// without warnings, and the installed tree runs the demo. The script installs the
/// executables this test run was built with (`--from`): a release build, what it does by
/// default, takes many minutes on the CI's two cores.
@Suite(.serialized, .timeLimit(.minutes(20)))
struct ServiceInstallTests {
    static let scripts = ReaderExampleTests.repository.appendingPathComponent("Examples/service")
    /// The scripts refuse root unless told: the tests may run as root (in a container).
    static let allowRoot = getuid() == 0 ? " --allow-root" : ""

    @Test("install.sh --from the test build under a temporary prefix: units verify, completions load, man pages render, the demo runs from the prefix; uninstall.sh removes it all")
    func installVerifyUninstall() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let prefix = container.parent.appendingPathComponent("prefix")
        let shell = Executable(name: "bash", path: "/bin/bash")
        let builds = (Executable.transferd.path as NSString).deletingLastPathComponent
        // Every child below names the container on its command line, so teardown ends it.
        func run(_ script: String, environment: [String: String] = [:]) throws -> RunningProcess.Outcome {
            try shell.start(["-c", script, container.root], in: container, environment: environment, passContainer: false).wait(timeout: 120)
        }

        let script = "'\(Self.scripts.path)/install.sh'\(Self.allowRoot)"
        let installed = try run("\(script) --prefix '\(prefix.path)' --from '\(builds)'")
        try #require(installed.status == 0, "\(installed.stderr)")
        let share = prefix.appendingPathComponent("share")
        let units = share.appendingPathComponent("systemd/user")

        // Every unit verifies, the templates as an instance for this container. Without a user
        // manager, systemd-analyze --user needs a runtime directory only; Documentation=man:
        // is looked up in the man pages just installed (man finds them from PATH's prefix/bin).
        let runtime = container.parent.appendingPathComponent("runtime")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let escaped = try run("systemd-escape --path \"$0\"").stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        for kind in ["socket", "service"] {
            try FileManager.default.createSymbolicLink(atPath: units.appendingPathComponent("transferd@\(escaped).\(kind)").path, withDestinationPath: "transferd@.\(kind)")
        }
        let installedPath = "\(prefix.path)/bin:/usr/local/bin:/usr/bin:/bin"
        let environment = ["XDG_RUNTIME_DIR": runtime.path, "PATH": installedPath]
        let verified = try run("cd '\(units.path)' && systemd-analyze verify --user transferd.socket transferd.service 'transferd@\(escaped).socket' 'transferd@\(escaped).service'", environment: environment)
        #expect(verified.status == 0 && verified.stderr.isEmpty && verified.stdout.isEmpty, "systemd-analyze verify: \(verified.status ?? -1) \(verified.stdout) \(verified.stderr)")
        let service = try String(contentsOf: units.appendingPathComponent("transferd.service"), encoding: .utf8)
        #expect(service.contains("ExecStart=\(prefix.path)/bin/transferd --container %h/.local/share/BackgroundTransfer"), "the unit runs the installed daemon: \(service)")

        // The bash completion loads and completes a subcommand and its options.
        let completion = share.appendingPathComponent("bash-completion/completions/bgtransfer").path
        let loaded = try run("source '\(completion)' && complete -p bgtransfer && COMP_WORDS=(bgtransfer ti) COMP_CWORD=1 && _bgtransfer && echo \"${COMPREPLY[*]}\" && COMP_WORDS=(bgtransfer log --f) COMP_CWORD=2 && _bgtransfer && echo \"${COMPREPLY[*]}\"")
        #expect(loaded.status == 0 && loaded.stdout == "complete -F _bgtransfer bgtransfer\ntimeline\n--follow\n", "\(loaded.stdout) \(loaded.stderr)")
        for file in ["zsh/site-functions/_bgtransfer", "fish/vendor_completions.d/bgtransfer.fish"] {
            #expect(FileManager.default.fileExists(atPath: share.appendingPathComponent(file).path), "\(file) installed")
        }

        // The man pages render at 80 columns without a warning, with the --help text in them.
        for (page, title, fromHelp) in [("man/man8/transferd.8", "TRANSFERD(8)", "--free-space-reserve"), ("man/man1/bgtransfer.1", "BGTRANSFER(1)", "force-quit")] {
            let rendered = try run("MANWIDTH=80 man --warnings -l '\(share.appendingPathComponent(page).path)' 2>&1 >/dev/null; MANWIDTH=80 man -l '\(share.appendingPathComponent(page).path)'")
            #expect(rendered.status == 0 && rendered.stdout.hasPrefix(title) && rendered.stdout.contains(fromHelp), "\(page): \(rendered.stdout.prefix(300)) \(rendered.stderr)")
        }

        // The installed tree runs the README's demo on its own: no transferd is named, and the
        // only one to be found (beside bgtransfer, or on PATH) is the installed one.
        let demo = try run("exec '\(prefix.path)/bin/bgtransfer' --container \"$0\" demo", environment: ["PATH": installedPath, "BGTRANSFER_TRANSFERD": ""])
        #expect(demo.status == 0, "\(demo.stdout.suffix(600)) \(demo.stderr)")

        let removed = try run("'\(Self.scripts.path)/uninstall.sh'\(Self.allowRoot) --prefix '\(prefix.path)'")
        #expect(removed.status == 0, "\(removed.stderr)")
        let left = FileManager.default.enumerator(atPath: prefix.path)?.compactMap { $0 as? String }.filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: prefix.appendingPathComponent($0).path, isDirectory: &isDirectory) && !isDirectory.boolValue
        } ?? []
        #expect(left.allSatisfy { $0.hasPrefix("share/systemd/user/transferd@\(escaped)") }, "only the test's own instance links are left: \(left)")
    }

    @Test("install.sh replaces symlinks planted at its files and refuses a symlinked folder; a prefix with & and a space gives an ExecStart systemd runs; uninstall.sh removes nothing outside the prefix its list names; both refuse root unless told")
    func walls() throws {
        let container = try TestContainer()
        defer { container.tearDown() }
        let shell = Executable(name: "bash", path: "/bin/bash")
        let builds = (Executable.transferd.path as NSString).deletingLastPathComponent
        func run(_ script: String, environment: [String: String] = [:]) throws -> RunningProcess.Outcome {
            try shell.start(["-c", script, container.root], in: container, environment: environment,
                            passContainer: false).wait(timeout: 120)
        }
        let install = "'\(Self.scripts.path)/install.sh'\(Self.allowRoot) --from '\(builds)' --prefix"
        let uninstall = "'\(Self.scripts.path)/uninstall.sh'\(Self.allowRoot) --prefix"
        let outside = container.parent.appendingPathComponent("outside")
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        let victim = outside.appendingPathComponent("victim")
        try Data("victim\n".utf8).write(to: victim)

        // A prefix with & and a space (and %): the unit names the installed daemon, which
        // systemd-analyze finds (it says "is not executable" for a path it cannot find).
        let odd = container.parent.appendingPathComponent("odd & spaced %prefix")
        let installed = try run("\(install) '\(odd.path)'")
        try #require(installed.status == 0, "\(installed.stderr)")
        let units = odd.appendingPathComponent("share/systemd/user")
        let service = try String(contentsOf: units.appendingPathComponent("transferd.service"), encoding: .utf8)
        let quoted = "\"\(odd.path.replacingOccurrences(of: "%", with: "%%"))/bin/transferd\""
        #expect(service.contains("ExecStart=\(quoted) --container"), "\(service)")
        let runtime = container.parent.appendingPathComponent("runtime")
        try FileManager.default.createDirectory(at: runtime, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let environment = ["XDG_RUNTIME_DIR": runtime.path, "PATH": "\(odd.path)/bin:/usr/local/bin:/usr/bin:/bin"]
        let verify = "cd '\(units.path)' && systemd-analyze verify --user transferd.socket transferd.service"
        let verified = try run(verify, environment: environment)
        #expect(verified.status == 0 && verified.stderr.isEmpty, "\(verified.stdout) \(verified.stderr)")

        // Symlinks planted where install.sh writes are replaced, never written through; a
        // symlinked folder under the prefix is refused before anything is made through it.
        let planted = container.parent.appendingPathComponent("planted")
        for file in ["share/systemd/user/transferd.service", "share/backgroundtransfer/installed-files",
                     "bin/transferd"] {
            let link = planted.appendingPathComponent(file)
            try FileManager.default.createDirectory(at: link.deletingLastPathComponent(),
                                                    withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: victim.path)
        }
        let over = try run("\(install) '\(planted.path)'")
        #expect(over.status == 0, "\(over.stderr)")
        #expect(try String(contentsOf: victim, encoding: .utf8) == "victim\n", "install.sh wrote through a symlink")
        let unitPath = planted.appendingPathComponent("share/systemd/user/transferd.service").path
        let unit = try FileManager.default.attributesOfItem(atPath: unitPath)
        #expect(unit[.type] as? FileAttributeType == .typeRegular)
        let linkedFolder = container.parent.appendingPathComponent("linked-folder")
        let share = linkedFolder.appendingPathComponent("share")
        try FileManager.default.createDirectory(at: share, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: share.appendingPathComponent("man").path,
                                                   withDestinationPath: outside.path)
        let refusedFolder = try run("\(install) '\(linkedFolder.path)'")
        #expect(refusedFolder.status == 73 && refusedFolder.stderr.contains("share/man is a symlink"),
                "\(refusedFolder.status ?? -1) \(refusedFolder.stderr)")
        let made = try? FileManager.default.contentsOfDirectory(atPath: outside.path)
        #expect(made == ["victim"], "made something through the link: \(String(describing: made))")

        try uninstallStaysInside(planted, outside: outside, beside: container.parent.appendingPathComponent("beside"),
                                 uninstall: uninstall, run: { try run($0) })

        // Root is refused without --allow-root (only checkable when the tests run as root).
        if getuid() == 0 {
            let elsewhere = container.parent.appendingPathComponent("as-root")
            let asRoot = try run("'\(Self.scripts.path)/install.sh' --from '\(builds)' --prefix '\(elsewhere.path)'")
            #expect(asRoot.status == 77 && asRoot.stderr.contains("refusing to run as root"), "\(asRoot.stderr)")
            #expect(!FileManager.default.fileExists(atPath: elsewhere.path))
            let off = try run("'\(Self.scripts.path)/uninstall.sh' --prefix '\(odd.path)'")
            #expect(off.status == 77 && off.stderr.contains("refusing to run as root"), "\(off.stderr)")
        }
    }

    /// uninstall.sh under `planted`, whose list also names files outside it: through `..`,
    /// absolutely, through a symlinked folder. None of those is removed; its own files are.
    private func uninstallStaysInside(_ planted: URL, outside: URL, beside: URL, uninstall: String,
                                      run: (String) throws -> RunningProcess.Outcome) throws {
        let victim = outside.appendingPathComponent("victim")
        let list = planted.appendingPathComponent("share/backgroundtransfer/installed-files")
        try Data("beside\n".utf8).write(to: beside)
        try FileManager.default.createSymbolicLink(atPath: planted.appendingPathComponent("share/out").path,
                                                   withDestinationPath: outside.path)
        let forged = ["\(planted.path)/../beside", victim.path, "\(planted.path)/share/out/victim"]
        let handle = try FileHandle(forWritingTo: list)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((forged.joined(separator: "\n") + "\n").utf8))
        try handle.close()
        let removed = try run("\(uninstall) '\(planted.path)'")
        #expect(removed.status == 65, "\(removed.status ?? -1) \(removed.stderr)")
        for file in forged { #expect(removed.stderr.contains("not removing \(file)"), "\(removed.stderr)") }
        #expect(FileManager.default.fileExists(atPath: beside.path))
        #expect(FileManager.default.fileExists(atPath: victim.path))
        let own = planted.appendingPathComponent("bin/transferd").path
        #expect(!FileManager.default.fileExists(atPath: own), "its own files are removed")
    }
}
