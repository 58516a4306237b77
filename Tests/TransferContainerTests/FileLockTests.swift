#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferPOSIX

/// The lock in an attempt, if it was acquired.
func acquiredLock(_ attempt: FileLock.Attempt) -> FileLock? {
    if case .acquired(let lock) = attempt { return lock }
    return nil
}

/// Whether an attempt was refused, and the holder's pid it named.
func refusal(_ attempt: FileLock.Attempt) -> (refused: Bool, pid: Int32?) {
    if case .heldByOther(let pid) = attempt { return (true, pid) }
    return (false, nil)
}

@Suite("FileLock")
struct FileLockTests {
    @Test("a second tryAcquire on the same path is refused, naming this process as the holder")
    func conflictInProcess() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("test.lock")
        let first = try #require(acquiredLock(try FileLock.tryAcquire(path)))
        #expect(first.path == path)
        #expect(FileLock.isHeld(path))
        #expect(FileLock.holderPID(path) == getpid())
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "\(getpid())\n")
        #expect(permissions(path) == 0o600)

        let second = refusal(try FileLock.tryAcquire(path))
        #expect(second.refused)
        #expect(second.pid == getpid())
        withExtendedLifetime(first) {}
    }

    @Test("after release, the lock can be taken again")
    func release() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("test.lock")
        let first = try #require(acquiredLock(try FileLock.tryAcquire(path)))
        first.release()
        #expect(!FileLock.isHeld(path))
        let second = try #require(acquiredLock(try FileLock.tryAcquire(path)))
        #expect(FileLock.isHeld(path))
        #expect(refusal(try FileLock.tryAcquire(path)).refused)
        second.release()
        #expect(!FileLock.isHeld(path))
        withExtendedLifetime(first) {}
    }

    @Test("when the lock object goes away, the lock is released")
    func deinitReleases() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("test.lock")
        do {
            let lock = try #require(acquiredLock(try FileLock.tryAcquire(path)))
            withExtendedLifetime(lock) {
                #expect(FileLock.isHeld(path))
            }
        }
        #expect(!FileLock.isHeld(path))
        let again = try #require(acquiredLock(try FileLock.tryAcquire(path)))
        withExtendedLifetime(again) {}
    }

    @Test("isHeld is false for a missing file and for a file nobody locks; holderPID is nil for an empty file")
    func probes() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("test.lock")
        #expect(!FileLock.isHeld(path))
        #expect(FileLock.holderPID(path) == nil)
        #expect(FileManager.default.createFile(atPath: path, contents: Data()))
        #expect(!FileLock.isHeld(path))
        #expect(FileLock.holderPID(path) == nil)
        #expect(FileManager.default.createFile(atPath: path, contents: Data("not a pid\n".utf8)))
        #expect(FileLock.holderPID(path) == nil)
    }

    @Test("tryAcquire in a missing folder throws")
    func missingFolder() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let error = try #require(throws: Errno.self) { try FileLock.tryAcquire(directory.path("missing/test.lock")) }
        #expect(error.code == ENOENT)
    }

    @Test("a lock held by another process is refused, and free once that process is SIGKILLed")
    func otherProcess() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = directory.path("test.lock")
        let holder = try await FlockHolder.holding(path)
        defer { holder.kill() }
        #expect(await holder.waitUntilHeld(), "flock child did not take the lock in time")

        // flock(1) writes no pid, so the refusal names none.
        let refused = refusal(try FileLock.tryAcquire(path))
        #expect(refused.refused)
        #expect(refused.pid == nil)

        // When the holder wrote its pid, the refusal names it.
        try Data("\(holder.pid)\n".utf8).write(to: URL(fileURLWithPath: path))
        let named = refusal(try FileLock.tryAcquire(path))
        #expect(named.refused)
        #expect(named.pid == holder.pid)

        holder.kill()
        #expect(await holder.waitUntilExited(), "flock child did not exit after SIGKILL")
        var lock: FileLock?
        let acquired = try await eventually {
            lock = acquiredLock(try FileLock.tryAcquire(path))
            return lock != nil
        }
        #expect(acquired, "the lock was not released after the holder died")
        #expect(FileLock.holderPID(path) == getpid())
        lock?.release()
    }
}
