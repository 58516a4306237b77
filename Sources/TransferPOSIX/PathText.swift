/// A path's folder and last name, split on its bytes. `NSString`'s `deletingLastPathComponent`
/// and `lastPathComponent` bridge the string and normalise all of it on every call; the
/// daemon splits a few paths for every download it starts and ends, where those calls were
/// a few per cent of the loop thread's work. The answers are `NSString`'s for every path the
/// tests compare (`PathTextTests`): trailing and doubled slashes, the root, a bare name.
/// Pure functions; any thread.
public enum PathText {
    /// The folder holding `path`'s last component: "/a/b" → "/a", "/a" → "/", "a" → "".
    public static func folder(of path: String) -> String {
        let bytes = Array(path.utf8)
        var end = trimmedEnd(bytes)
        guard end > 0 else { return bytes.isEmpty ? "" : "/" }
        while end > 0, bytes[end - 1] != slash { end -= 1 } // the last component
        guard end > 0 else { return "" } // a bare name
        while end > 1, bytes[end - 1] == slash { end -= 1 } // the slashes before it
        return String(decoding: bytes[..<end], as: UTF8.self)
    }

    /// `path`'s last component: "/a/b/" → "b", "/" → "/", "" → "".
    public static func lastComponent(of path: String) -> String {
        let bytes = Array(path.utf8)
        let end = trimmedEnd(bytes)
        guard end > 0 else { return bytes.isEmpty ? "" : "/" }
        var start = end
        while start > 0, bytes[start - 1] != slash { start -= 1 }
        return String(decoding: bytes[start..<end], as: UTF8.self)
    }

    /// An absolute path with its doubled slashes, `.` components and trailing slash taken out,
    /// as `URL.standardizedFileURL` spells it: "/a//b/./c/" → "/a/b/c". Nil for a relative
    /// path or one with a `..` component, which Foundation resolves (through symbolic links,
    /// when it is the last one): the caller asks Foundation then. Foundation's answer costs a
    /// process's start about 0.2 ms (its first use builds generic sets at run time).
    public static func standardized(_ path: String) -> String? {
        guard path.utf8.first == slash else { return nil }
        var kept: [Substring] = []
        for component in path.split(separator: "/", omittingEmptySubsequences: true) {
            if component == ".." { return nil }
            if component != "." { kept.append(component) }
        }
        return "/" + kept.joined(separator: "/")
    }

    private static let slash = UInt8(ascii: "/")

    /// Where `bytes` end without their trailing slashes (0 for "" or slashes only).
    private static func trimmedEnd(_ bytes: [UInt8]) -> Int {
        var end = bytes.count
        while end > 0, bytes[end - 1] == slash { end -= 1 }
        return end
    }
}
