extension LogEvent {
    /// Why a file of root certificates installed none (`deviceRootsRefused`), and what the
    /// file was when it was opened: its owner, mode and links, read on the descriptor.
    public struct RootsRefusal: Codable, Sendable, Equatable {
        public enum Reason: String, Codable, Sendable {
            /// Its owner may not install roots for every app.
            case owner
            /// Its group or others may write it.
            case writableByOthers
            /// It has more than one name (a hard link).
            case links
            /// It was not read: a symlink, not a regular file, too big, or not opened
            /// (the line's `code` is the errno).
            case unreadable
        }

        public var reason: Reason
        public var path: String
        /// The owner's uid, nil when the file was not opened.
        public var owner: UInt32?
        /// The permission bits (`st_mode & 0o7777`), nil when the file was not opened.
        public var mode: UInt32?
        /// How many names the file has, nil when it was not opened.
        public var links: Int?

        public init(_ reason: Reason, path: String, owner: UInt32? = nil, mode: UInt32? = nil, links: Int? = nil) {
            self.reason = reason
            self.path = path
            self.owner = owner
            self.mode = mode
            self.links = links
        }
    }
}
