import Foundation
import CPOSIX
import TransferCoding
import TransferPOSIX

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
        // The bytes as an array: `Data` made from a string's UTF-8 view asks at run time
        // whether the view is contiguous, a search of every conformance in the executable.
        let found = Array(text.utf8).withUnsafeBytes { scan($0, startingBefore: $0.count) }
        guard !found.isEmpty else { throw .noDeclaration(source: "the declaration") }
        return found
    }

    /// Every identity the executable at `path` declares; empty when it declares none. Read
    /// a window at a time: mapping a statically linked executable whole (80 MB) made it part
    /// of the reader's resident memory, the daemon's.
    public static func identities(inExecutableAt path: String) throws(EntitlementsError) -> [AppIdentity] {
        let file: FileDescriptor
        do { file = try FileDescriptor.open(path, O_RDONLY) } catch {
            throw .unreadable(source: path, reason: "\(error)")
        }
        defer { file.close() }
        // Each window also holds the longest declaration that can start in its first `step`
        // bytes; a declaration is taken from the window it starts in.
        let step = 1 << 20, reach = declarationLimit + beginMarker.utf8.count + endMarker.utf8.count
        var window = [UInt8](repeating: 0, count: step + reach)
        var found: [AppIdentity] = []
        var offset: Int64 = 0
        while true {
            let filled: Int
            do { filled = try window.withUnsafeMutableBytes { buffer throws(Errno) in try file.read(into: buffer, at: offset) } } catch {
                throw .unreadable(source: path, reason: "\(error)")
            }
            let isLast = filled < window.count // no window after this one: take every declaration
            found += window.withUnsafeBytes { buffer in
                scan(UnsafeRawBufferPointer(rebasing: buffer[..<filled]), startingBefore: isLast ? filled : step)
            }
            if isLast { return found }
            offset += Int64(step)
        }
    }

    /// The longest declaration body read.
    static let declarationLimit = 64 << 10

    /// Scans `bytes` for declarations. Marker text that is not a declaration (the markers
    /// themselves appear in any binary that links this file) is skipped.
    static func identities(in bytes: Data, source: String) throws(EntitlementsError) -> [AppIdentity] {
        bytes.withUnsafeBytes { scan($0, startingBefore: $0.count) }
    }

    /// The declarations in `raw` that begin before `limit`.
    private static func scan(_ raw: UnsafeRawBufferPointer, startingBefore limit: Int) -> [AppIdentity] {
        let begin = Array(beginMarker.utf8), end = Array(endMarker.utf8)
        var found: [AppIdentity] = []
        guard let base = raw.baseAddress else { return found }
        var offset = 0
        while offset < min(raw.count, limit), let start = find(begin, in: base + offset, count: raw.count - offset), start - base < limit {
            let bodyStart = start + begin.count
            let remaining = raw.count - (bodyStart - base)
            guard let stop = find(end, in: bodyStart, count: min(remaining, declarationLimit)) else {
                offset = bodyStart - base
                continue
            }
            let body = Data(bytes: bodyStart, count: stop - bodyStart)
            if let identities = try? RecordCoding.decode([AppIdentity].self, from: body) {
                found += identities
                offset = stop + end.count - base
            } else {
                offset = bodyStart - base  // not a declaration: a real one may start before `stop`
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
