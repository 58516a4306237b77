import Foundation
import Testing

/// Examples/service/install.sh and uninstall.sh, and what they install (issue 30): the user
/// units pass `systemd-analyze verify`, the bash completion loads, the man pages render
/// without warnings, and the installed tree runs the demo. The script installs the
/// executables this test run was built with (`--from`): a release build, what it does by
/// default, takes many minutes on the CI's two cores.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct ServiceInstallTests {
    static let scripts = ReaderExampleTests.repository.appendingPathComponent("Examples/service")

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

        let installed = try run("'\(Self.scripts.path)/install.sh' --prefix '\(prefix.path)' --from '\(builds)'")
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

        let removed = try run("'\(Self.scripts.path)/uninstall.sh' --prefix '\(prefix.path)'")
        #expect(removed.status == 0, "\(removed.stderr)")
        let left = FileManager.default.enumerator(atPath: prefix.path)?.compactMap { $0 as? String }.filter {
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: prefix.appendingPathComponent($0).path, isDirectory: &isDirectory) && !isDirectory.boolValue
        } ?? []
        #expect(left.allSatisfy { $0.hasPrefix("share/systemd/user/transferd@\(escaped)") }, "only the test's own instance links are left: \(left)")
    }
}
