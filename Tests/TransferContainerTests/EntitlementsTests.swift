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
