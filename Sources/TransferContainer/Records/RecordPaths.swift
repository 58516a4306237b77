import Foundation

/// How records name files: relative to the container's root (`AppGroups/<group>/Library/…`),
/// so that a container copied or moved elsewhere names its own files, not the old copy's.
/// Records written before were absolute; those inside the root are read the same, those
/// outside it are refused (`resolveRecordPath` gives nil): nobody hands out, reads or
/// removes a file outside the container because a record says so.
extension ContainerLayout {
    /// The path to keep in a record for `path`: relative to the root when it lies inside,
    /// else `path` unchanged (it will be refused when read).
    public func recordPath(_ path: String) -> String {
        let prefix = rootPrefix
        guard path.hasPrefix(prefix), path.utf8.count > prefix.utf8.count else { return path }
        return String(path.dropFirst(prefix.count))
    }

    /// The absolute path a record's path names in this container: a relative path below the
    /// root, or an absolute one (from a record written before paths were relative) that lies
    /// inside the root. Nil for an empty path, a path outside the container, or one that
    /// climbs with `..`.
    public func resolveRecordPath(_ stored: String) -> String? {
        guard !stored.isEmpty else { return nil }
        if Self.isPlainRelativePath(stored) { return rootPrefix + stored } // what records hold: no splitting
        let components = stored.split(separator: "/", omittingEmptySubsequences: true)
        guard !components.isEmpty, !components.contains(where: { $0 == ".." || $0 == "." }) else { return nil }
        let prefix = rootPrefix
        if stored.hasPrefix("/") {
            guard stored.hasPrefix(prefix), stored.utf8.count > prefix.utf8.count else { return nil }
            return stored
        }
        return prefix + components.joined(separator: "/")
    }

    /// Whether `path` is relative with every component a name: not empty (no leading,
    /// trailing or doubled slash), not "." or "..". Such a path is resolved as it is.
    static func isPlainRelativePath(_ path: String) -> Bool {
        var length = 0, dots = 0
        for byte in path.utf8 {
            if byte == UInt8(ascii: "/") {
                guard length > 0, dots < length || length > 2 else { return false }
                length = 0
                dots = 0
            } else {
                length += 1
                if byte == UInt8(ascii: ".") { dots += 1 }
            }
        }
        return length > 0 && (dots < length || length > 2)
    }

    /// Whether a record's path is the relative spelling (written since paths are relative).
    public static func isRelativeRecordPath(_ stored: String) -> Bool {
        !stored.isEmpty && !stored.hasPrefix("/")
    }
}
