import Foundation
import Testing
@testable import TransferContainer

/// Reading entitlement declarations out of an executable's bytes.
struct EntitlementsTests {
    private let begin = "BGTRANSFER-ENTITLEMENTS-" + "BEGIN"
    private let end = "BGTRANSFER-ENTITLEMENTS-" + "END"
    private let host = #"[{"bundleIdentifier": "com.example.host", "kind": "app", "containingApp": "com.example.host", "containingAppExecutable": "host-app", "appGroups": ["group.com.example.transfers"]}]"#
    private let share = #"[{"bundleIdentifier": "com.example.host.share", "kind": "extension", "containingApp": "com.example.host", "containingAppExecutable": "host-app", "appGroups": []}]"#

    @Test("Declarations are found among binary noise; marker text that is not one (a decoy BEGIN, bad JSON) is skipped")
    func scanning() throws {
        var bytes = Data((0..<4096).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        bytes += Data("error text mentioning \(begin) … END)\0".utf8)
        bytes += Data("\(begin)\n\(host)\n\(end)\0".utf8)
        bytes += Data("\(begin){not json}\(end)\0\(begin)".utf8)
        bytes += Data("\(begin)\(share)\(end)".utf8)
        let found = try Entitlements.identities(in: bytes, source: "test")
        #expect(found.map(\.bundleIdentifier.rawValue) == ["com.example.host", "com.example.host.share"])
        #expect(found.first?.appGroups.map(\.rawValue) == ["group.com.example.transfers"])
    }

    /// The daemon reads an executable a window at a time (1 MiB, overlapping by the longest
    /// declaration): one that straddles a window's edge, one past several windows and one at
    /// the file's very end are each found once.
    @Test("Declarations across the reader's window edges, deep in a large file and at its end are each found once")
    func windows() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("entitlements-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let step = 1 << 20
        var bytes = Data((0..<(step - 40)).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        bytes += Data("\(begin)\(host)\(end)".utf8)            // starts 40 bytes before the edge
        bytes += Data(repeating: 0, count: 3 * step + 12_345)
        bytes += Data("\(begin)\(share)\(end)".utf8)           // in the fifth window
        bytes += Data(repeating: 1, count: step - 7_000)
        let last = #"[{"bundleIdentifier": "com.example.last", "kind": "app", "containingApp": "com.example.last", "containingAppExecutable": "last", "appGroups": []}]"#
        bytes += Data("\(begin)\(last)\(end)".utf8) // the file's last bytes
        let file = directory.appendingPathComponent("large")
        try bytes.write(to: file)
        let found = try Entitlements.identities(inExecutableAt: file.path)
        #expect(found.map(\.bundleIdentifier.rawValue) == ["com.example.host", "com.example.host.share", "com.example.last"])
        #expect(try Entitlements.identities(in: bytes, source: "test") == found, "the same as scanning the bytes whole")
    }

    @Test("A file with no declaration declares nothing; an unreadable one is an error naming it")
    func files() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("entitlements-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let plain = directory.appendingPathComponent("plain")
        try Data(repeating: 7, count: 1 << 16).write(to: plain)
        #expect(try Entitlements.identities(inExecutableAt: plain.path).isEmpty)
        #expect(throws: EntitlementsError.self) { try Entitlements.identities(inExecutableAt: directory.appendingPathComponent("missing").path) }
        #expect(throws: EntitlementsError.noDeclaration(source: "the declaration")) { try Entitlements.identities(inDeclaration: "no markers here") }
    }
}
