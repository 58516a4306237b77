import Foundation
import Testing
@testable import TransferContainer

@Suite("Container layout")
struct ContainerLayoutTests {
    private var currentDirectory: URL { URL(fileURLWithPath: FileManager.default.currentDirectoryPath) }

    @Test("--container PATH wins over BGTRANSFER_CONTAINER and is removed from the arguments")
    func optionWithSeparateValue() throws {
        var arguments = ["tool", "inspect", "--container", "/tmp/from-option", "--json"]
        let layout = try ContainerLayout.resolve(arguments: &arguments, environment: ["BGTRANSFER_CONTAINER": "/tmp/from-environment"])
        #expect(layout.root.path == "/tmp/from-option")
        #expect(arguments == ["tool", "inspect", "--json"])
    }

    @Test("--container=PATH wins over BGTRANSFER_CONTAINER and is removed from the arguments")
    func optionWithEquals() throws {
        var arguments = ["tool", "--container=/tmp/from-option", "inspect"]
        let layout = try ContainerLayout.resolve(arguments: &arguments, environment: ["BGTRANSFER_CONTAINER": "/tmp/from-environment"])
        #expect(layout.root.path == "/tmp/from-option")
        #expect(arguments == ["tool", "inspect"])
    }

    @Test("BGTRANSFER_CONTAINER wins over ./SharedContainer; the arguments stay as they are")
    func environment() throws {
        var arguments = ["tool", "inspect"]
        let layout = try ContainerLayout.resolve(arguments: &arguments, environment: ["BGTRANSFER_CONTAINER": "/tmp/from-environment"])
        #expect(layout.root.path == "/tmp/from-environment")
        #expect(arguments == ["tool", "inspect"])
    }

    @Test("without option or environment the container is ./SharedContainer", arguments: [[:], ["BGTRANSFER_CONTAINER": ""], ["OTHER": "/tmp/x"]])
    func defaultContainer(_ environment: [String: String]) throws {
        var arguments = ["tool"]
        let layout = try ContainerLayout.resolve(arguments: &arguments, environment: environment)
        #expect(layout.root.path == currentDirectory.appendingPathComponent("SharedContainer").standardizedFileURL.path)
        #expect(arguments == ["tool"])
    }

    @Test("a relative --container path is taken from the current directory")
    func relativeOption() throws {
        var arguments = ["--container", "some/dir/../box"]
        let layout = try ContainerLayout.resolve(arguments: &arguments, environment: [:])
        #expect(layout.root.path == currentDirectory.appendingPathComponent("some/box").standardizedFileURL.path)
        #expect(arguments.isEmpty)
    }

    @Test("--container without a value is an error naming the option")
    func missingValue() throws {
        var arguments = ["tool", "inspect", "--container"]
        let error = try #require(throws: ContainerError.self) {
            try ContainerLayout.resolve(arguments: &arguments, environment: ["BGTRANSFER_CONTAINER": "/tmp/from-environment"])
        }
        guard case .missingArgument = error else {
            Issue.record("expected .missingArgument, got \(error)")
            return
        }
        #expect(error.description.contains("--container"))
    }

    @Test("--container= with an empty value is an error")
    func emptyValue() throws {
        var arguments = ["tool", "--container="]
        #expect(throws: ContainerError.self) {
            try ContainerLayout.resolve(arguments: &arguments, environment: ["BGTRANSFER_CONTAINER": "/tmp/from-environment"])
        }
    }

    @Test("every path is inside the root, where the layout says")
    func paths() throws {
        let layout = ContainerLayout(root: URL(fileURLWithPath: "/tmp/tct-layout-root"))
        let root = "/tmp/tct-layout-root"
        let all: [(URL, String)] = [
            (layout.appGroup(sampleGroup), "AppGroups/group.com.example.transfers"),
            (layout.privateContainer(sampleOwner), "Apps/com.example.host.fetch"),
            (layout.sessionsDirectory, "Sessions"),
            (layout.sessionDirectory(family: sampleFamily, identifier: sampleSession), "Sessions/com.example.host/com.example.host.fetch.background"),
            (layout.sessionLock(family: sampleFamily, identifier: sampleSession), "Sessions/com.example.host/com.example.host.fetch.background/session.lock"),
            (layout.downloadsDirectory(sharedContainer: sampleGroup, owner: sampleOwner, identifier: sampleSession),
             "AppGroups/group.com.example.transfers/Library/Caches/BackgroundTransfer/com.example.host.fetch.background"),
            (layout.downloadsDirectory(sharedContainer: nil, owner: sampleOwner, identifier: sampleSession),
             "Apps/com.example.host.fetch/Library/Caches/BackgroundTransfer/com.example.host.fetch.background"),
            (layout.daemonDirectory, "Daemon"),
            (layout.daemonLock, "Daemon/transferd.lock"),
            (layout.daemonSocket, "Daemon/transferd.sock"),
            (layout.appRegistry, "Daemon/apps.json"),
            (layout.logsDirectory, "Logs"),
            (layout.logFile, "Logs/transfer.log"),
        ]
        for (url, relative) in all {
            #expect(url.path == "\(root)/\(relative)")
            #expect(url.standardizedFileURL.path.hasPrefix(root + "/"))
        }
    }

    @Test("the root is standardised: dot-dot components are resolved")
    func standardisedRoot() {
        let layout = ContainerLayout(root: URL(fileURLWithPath: "/tmp/a/b/../c/./d"))
        #expect(layout.root.path == "/tmp/a/c/d")
        #expect(layout.logFile.path == "/tmp/a/c/d/Logs/transfer.log")
    }

    @Test("the default container is found upward, as git finds .git: the nearest folder of that name; a file of that name is passed over")
    func foundUpward() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let top = directory.path("top"), deep = directory.path("top/a/b/c")
        try FileManager.default.createDirectory(atPath: deep, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: top + "/SharedContainer", withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: top + "/a/b/SharedContainer", contents: Data()), "a file, not a folder")
        #expect(ContainerLayout.findUpward("SharedContainer", from: deep) == top + "/SharedContainer")
        #expect(ContainerLayout.findUpward("SharedContainer", from: deep + "/") == top + "/SharedContainer", "a trailing slash")
        #expect(ContainerLayout.findUpward("SharedContainer", from: top + "/a/./b//c") == top + "/SharedContainer", "dots and doubled slashes")
        try FileManager.default.createDirectory(atPath: top + "/a/SharedContainer", withIntermediateDirectories: true)
        #expect(ContainerLayout.findUpward("SharedContainer", from: deep) == top + "/a/SharedContainer", "the nearest wins")
        #expect(ContainerLayout.findUpward("NoSuchFolder-\(getpid())", from: deep) == nil, "up to / and no further")
    }

    @Test("prepare() makes the top-level folders with mode 0700, and may run twice")
    func prepare() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = ContainerLayout(root: directory.url.appendingPathComponent("nested/container"))
        try layout.prepare()
        try layout.prepare()
        let folders = [layout.root, layout.root.appendingPathComponent("AppGroups"), layout.root.appendingPathComponent("Apps"),
                       layout.sessionsDirectory, layout.daemonDirectory, layout.logsDirectory]
        for folder in folders {
            #expect(isDirectory(folder.path), "\(folder.path)")
            #expect(permissions(folder.path) == 0o700, "\(folder.path)")
        }
        #expect(permissions(directory.path("nested")) == 0o700)
    }

    @Test("a record's path resolves inside the root, or not at all: relative, absolute, doubled slashes, dots, and paths outside")
    func recordPaths() {
        let layout = ContainerLayout(root: URL(fileURLWithPath: "/srv/container"))
        // (stored, resolved): the spellings records hold, and the ones a hostile or old record may.
        let cases: [(String, String?)] = [
            ("AppGroups/g/Library/Caches/CFNetworkDownload_1.tmp", "/srv/container/AppGroups/g/Library/Caches/CFNetworkDownload_1.tmp"),
            ("a", "/srv/container/a"), ("a.b/.c/..d/...", "/srv/container/a.b/.c/..d/..."),
            ("a//b", "/srv/container/a/b"), ("a/b/", "/srv/container/a/b"), ("a///", "/srv/container/a"),
            ("/srv/container/a/b", "/srv/container/a/b"), ("/srv/container//a", "/srv/container//a"),
            ("", nil), ("/", nil), ("//", nil), (".", nil), ("..", nil), ("./a", nil), ("a/.", nil), ("a/../b", nil), ("../container/a", nil),
            ("/srv/container", nil), ("/srv/container/", nil), ("/srv/other/a", nil), ("/srv/container/../x", nil), ("/etc/passwd", nil),
        ]
        for (stored, resolved) in cases {
            #expect(layout.resolveRecordPath(stored) == resolved, "\(stored)")
        }
        // A path the layout hands to a record comes back as itself.
        let finished = layout.root.appendingPathComponent("AppGroups/g/x y/é.tmp").path
        #expect(layout.resolveRecordPath(layout.recordPath(finished)) == finished)
    }
}

