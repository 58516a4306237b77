import Foundation
import TransferPOSIX

/// One process per background session, one session object per identifier inside a process.
///
/// Across processes: an exclusive, non-blocking `flock` on the session's lock file, taken
/// when a process opens the session and released by the kernel when it dies, however it
/// dies (S1.5). Inside a process: a cache by identifier, so that opening an identifier
/// again returns the session already built (S1.3) — which is also how the containing app,
/// relaunched for an extension's identifier, rebuilds that session (S1.6).
/// Thread-safe: all state behind one lock.
public final class SessionCoordinator: @unchecked Sendable {
    public static let shared = SessionCoordinator()

    private struct Key: Hashable {
        var root: URL
        var family: BundleIdentifier
        var identifier: SessionIdentifier
    }

    private struct Entry {
        var lock: FileLock
        var session: AnyObject
    }

    private let lock = NSLock()
    private var entries: [Key: Entry] = [:]

    public init() {}

    /// The outcome of opening a session identifier in this process.
    public enum Claim<Session> {
        /// Newly opened: this process now holds the session's lock.
        case opened(Session)
        /// Already open in this process: the same session (S1.3).
        case existing(Session)
    }

    /// Returns the session cached for the identifier, or takes the session's lock and builds
    /// it with `make`. Throws `CoordinatorError.inUseByAnotherProcess` when another process
    /// holds the lock (S1.5, -996).
    public func claim<Session: AnyObject>(layout: ContainerLayout, family: BundleIdentifier, identifier: SessionIdentifier, make: () throws -> Session) throws -> Claim<Session> {
        let key = Key(root: layout.root, family: family, identifier: identifier)
        lock.lock()
        defer { lock.unlock() }
        if let entry = entries[key], let session = entry.session as? Session {
            return .existing(session)
        }
        let directory = layout.sessionDirectory(family: family, identifier: identifier)
        do { try DurableFile.makeDirectory(directory.path) } catch { throw CoordinatorError.cannotLock(identifier: identifier.rawValue, error) }
        let lockPath = layout.sessionLock(family: family, identifier: identifier).path
        let attempt: FileLock.Attempt
        do { attempt = try FileLock.tryAcquire(lockPath) } catch { throw CoordinatorError.cannotLock(identifier: identifier.rawValue, error) }
        switch attempt {
        case .heldByOther(let pid):
            throw CoordinatorError.inUseByAnotherProcess(identifier: identifier.rawValue, pid: pid)
        case .acquired(let fileLock):
            do {
                let session = try make()
                entries[key] = Entry(lock: fileLock, session: session)
                return .opened(session)
            } catch {
                fileLock.release()
                throw error
            }
        }
    }

    /// Forgets a session and releases its lock (after `didBecomeInvalidWithError` was
    /// delivered: not safe to reopen before, S1.3).
    public func release(layout: ContainerLayout, family: BundleIdentifier, identifier: SessionIdentifier) {
        let key = Key(root: layout.root, family: family, identifier: identifier)
        lock.lock()
        let entry = entries.removeValue(forKey: key)
        lock.unlock()
        entry?.lock.release()
    }

    /// The session cached for an identifier, if this process has it open.
    public func cachedSession<Session: AnyObject>(layout: ContainerLayout, family: BundleIdentifier, identifier: SessionIdentifier) -> Session? {
        let key = Key(root: layout.root, family: family, identifier: identifier)
        lock.lock()
        defer { lock.unlock() }
        return entries[key]?.session as? Session
    }

    /// The identifiers open in this process.
    public var openIdentifiers: [SessionIdentifier] {
        lock.lock()
        defer { lock.unlock() }
        return entries.keys.map(\.identifier)
    }
}

/// Why a session could not be opened.
public enum CoordinatorError: Error, CustomStringConvertible, Sendable {
    /// Another process holds the session (S1.5; `URLError` -996).
    case inUseByAnotherProcess(identifier: String, pid: Int32?)
    case cannotLock(identifier: String, Errno)

    public var description: String {
        switch self {
        case .inUseByAnotherProcess(let identifier, let pid):
            "background session \"\(identifier)\" is already in use by another process" + (pid.map { " (pid \($0))" } ?? "")
        case .cannotLock(let identifier, let error):
            "cannot lock background session \"\(identifier)\": \(error)"
        }
    }
}
