import Foundation
import CPOSIX

/// What an executable is entitled to: the bundles it may act as, each with its kind,
/// containing app and app groups (an Info.plist and entitlements, in effect).
///
/// Declared inside the executable itself, as one string literal the compiler stores whole in
/// the binary (see `StandInSupport`'s executables):
///
///     BGTRANSFER-ENTITLEMENTS-BEGIN [ {AppIdentity as JSON}, … ] BGTRANSFER-ENTITLEMENTS-END
///
/// The daemon reads the declarations back from `/proc/<pid>/exe` of each peer, so a process
/// can claim only what the executable it runs declares: it cannot change that file while it
/// runs (the kernel refuses writes to a running executable) and `/proc/<pid>/exe` names the
/// file actually executed, whatever the path says now. A value type; no shared state.
public enum Entitlements {
    static let beginMarker = "BGTRANSFER-ENTITLEMENTS-" + "BEGIN"
    static let endMarker = "BGTRANSFER-ENTITLEMENTS-" + "END"

    /// The identities in one declaration (the literal an executable passes at launch).
    public static func identities(inDeclaration text: String) throws(EntitlementsError) -> [AppIdentity] {
        let found = try identities(in: Data(text.utf8), source: "the declaration")
        guard !found.isEmpty else { throw .noDeclaration(source: "the declaration") }
        return found
    }

    /// Every identity the executable at `path` declares; empty when it declares none.
    public static func identities(inExecutableAt path: String) throws(EntitlementsError) -> [AppIdentity] {
        let data: Data
        do { data = try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped) } catch {
            throw .unreadable(source: path, reason: "\(error)")
        }
        return try identities(in: data, source: path)
    }

    /// Scans `bytes` for declarations. Marker text that is not a declaration (the markers
    /// themselves appear in any binary that links this file) is skipped.
    static func identities(in bytes: Data, source: String) throws(EntitlementsError) -> [AppIdentity] {
        let begin = Array(beginMarker.utf8), end = Array(endMarker.utf8)
        var found: [AppIdentity] = []
        bytes.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count, let start = find(begin, in: base + offset, count: raw.count - offset) {
                let bodyStart = start + begin.count
                let remaining = raw.count - (bodyStart - base)
                guard let stop = find(end, in: bodyStart, count: min(remaining, 64 << 10)) else {
                    offset = bodyStart - base
                    continue
                }
                let body = Data(bytes: bodyStart, count: stop - bodyStart)
                if let identities = try? JSONDecoder().decode([AppIdentity].self, from: body) {
                    found += identities
                    offset = stop + end.count - base
                } else {
                    offset = bodyStart - base  // not a declaration: a real one may start before `stop`
                }
            }
        }
        return found
    }

    private static func find(_ needle: [UInt8], in haystack: UnsafeRawPointer, count: Int) -> UnsafeRawPointer? {
        needle.withUnsafeBytes { needle in
            cposix_memmem(haystack, count, needle.baseAddress, needle.count)
        }
    }
}

/// Why an executable's entitlements could not be read.
public enum EntitlementsError: Error, CustomStringConvertible, Sendable, Equatable {
    case unreadable(source: String, reason: String)
    case noDeclaration(source: String)
    case notOneIdentity(count: Int)

    public var description: String {
        switch self {
        case .unreadable(let source, let reason): "cannot read the entitlements of \(source): \(reason)"
        case .noDeclaration(let source): "\(source) declares no entitlements (BGTRANSFER-ENTITLEMENTS-BEGIN … END)"
        case .notOneIdentity(let count): "an app or extension executable declares exactly one bundle, not \(count)"
        }
    }
}
