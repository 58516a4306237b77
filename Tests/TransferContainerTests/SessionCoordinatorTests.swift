#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import TransferContainer
import TransferPOSIX

/// What the coordinator caches: any class.
final class FakeSession {
    let name: String
    init(_ name: String) { self.name = name }
}

struct MakeFailed: Error, Equatable {}

/// The session in a claim, and whether it was newly opened.
func unpack<S>(_ claim: SessionCoordinator.Claim<S>) -> (session: S, opened: Bool) {
    switch claim {
    case .opened(let session): (session, true)
    case .existing(let session): (session, false)
    }
}

@Suite("SessionCoordinator")
struct SessionCoordinatorTests {
    let other = try! SessionIdentifier("com.example.host.share.background")

    @Test("claiming an identifier twice returns .opened then .existing with the same object")
    func claimTwice() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let coordinator = SessionCoordinator()
        var makes = 0
        let first = unpack(try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { makes += 1; return FakeSession("first") })
        let second = unpack(try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { makes += 1; return FakeSession("second") })
        #expect(first.opened)
        #expect(!second.opened)
        #expect(first.session === second.session)
        #expect(second.session.name == "first")
        #expect(makes == 1)
        let cached: FakeSession? = coordinator.cachedSession(layout: layout, family: sampleFamily, identifier: sampleSession)
        #expect(cached === first.session)
        #expect(coordinator.openIdentifiers == [sampleSession])
        // The process holds the session's lock file, with its pid in it.
        let lockPath = layout.sessionLock(family: sampleFamily, identifier: sampleSession).path
        #expect(FileLock.isHeld(lockPath))
        #expect(FileLock.holderPID(lockPath) == getpid())
        coordinator.release(layout: layout, family: sampleFamily, identifier: sampleSession)
    }

    @Test("a different identifier gets a different object")
    func differentIdentifier() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let coordinator = SessionCoordinator()
        let a = unpack(try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { FakeSession("a") })
        let b = unpack(try coordinator.claim(layout: layout, family: sampleFamily, identifier: other) { FakeSession("b") })
        #expect(a.opened && b.opened)
        #expect(a.session !== b.session)
        #expect(Set(coordinator.openIdentifiers) == [sampleSession, other])
        // The same identifier in another family is another session too.
        let otherFamily = try BundleIdentifier("com.example.other")
        let c = unpack(try coordinator.claim(layout: layout, family: otherFamily, identifier: sampleSession) { FakeSession("c") })
        #expect(c.opened)
        #expect(c.session !== a.session)
        for (family, identifier) in [(sampleFamily, sampleSession), (sampleFamily, other), (otherFamily, sampleSession)] {
            coordinator.release(layout: layout, family: family, identifier: identifier)
        }
        #expect(coordinator.openIdentifiers.isEmpty)
    }

    @Test("after release, claim builds a new session and the lock was free in between")
    func releaseThenClaim() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let coordinator = SessionCoordinator()
        let lockPath = layout.sessionLock(family: sampleFamily, identifier: sampleSession).path
        let first = unpack(try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { FakeSession("first") })
        coordinator.release(layout: layout, family: sampleFamily, identifier: sampleSession)
        #expect(!FileLock.isHeld(lockPath))
        let none: FakeSession? = coordinator.cachedSession(layout: layout, family: sampleFamily, identifier: sampleSession)
        #expect(none == nil)
        #expect(coordinator.openIdentifiers.isEmpty)

        let second = unpack(try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { FakeSession("second") })
        #expect(second.opened)
        #expect(second.session !== first.session)
        #expect(second.session.name == "second")
        #expect(FileLock.isHeld(lockPath))
        coordinator.release(layout: layout, family: sampleFamily, identifier: sampleSession)
        // Releasing twice, or an identifier never claimed, is harmless.
        coordinator.release(layout: layout, family: sampleFamily, identifier: sampleSession)
        coordinator.release(layout: layout, family: sampleFamily, identifier: other)
    }

    @Test("claim creates the session folder in a container that has none yet")
    func createsFolder() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = ContainerLayout(root: directory.url.appendingPathComponent("fresh"))
        let coordinator = SessionCoordinator()
        _ = try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { FakeSession("s") }
        #expect(isDirectory(layout.sessionDirectory(family: sampleFamily, identifier: sampleSession).path))
        #expect(permissions(layout.sessionDirectory(family: sampleFamily, identifier: sampleSession).path) == 0o700)
        coordinator.release(layout: layout, family: sampleFamily, identifier: sampleSession)
    }

    @Test("when another holder has the lock, claim throws inUseByAnotherProcess with its pid, naming identifier and pid")
    func heldByLock() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let lockPath = layout.sessionLock(family: sampleFamily, identifier: sampleSession).path
        try DurableFile.makeDirectory(layout.sessionDirectory(family: sampleFamily, identifier: sampleSession).path)
        let holder = try #require(acquiredLock(try FileLock.tryAcquire(lockPath)))
        let coordinator = SessionCoordinator()
        var madeOne = false
        let error = try #require(throws: CoordinatorError.self) {
            try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { madeOne = true; return FakeSession("x") }
        }
        #expect(!madeOne)
        guard case .inUseByAnotherProcess(let identifier, let pid) = error else {
            Issue.record("expected inUseByAnotherProcess, got \(error)")
            return
        }
        #expect(identifier == sampleSession.rawValue)
        #expect(pid == getpid())
        #expect(error.description.contains("\"com.example.host.fetch.background\""))
        #expect(error.description.contains("pid \(getpid())"))
        #expect(coordinator.openIdentifiers.isEmpty)

        // Once the holder lets go, the claim succeeds.
        holder.release()
        let claim = unpack(try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { FakeSession("y") })
        #expect(claim.opened)
        coordinator.release(layout: layout, family: sampleFamily, identifier: sampleSession)
    }

    @Test("two coordinators (as two processes would) cannot both hold a session")
    func twoCoordinators() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let one = SessionCoordinator()
        let two = SessionCoordinator()
        _ = try one.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { FakeSession("one") }
        #expect(throws: CoordinatorError.self) {
            try two.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { FakeSession("two") }
        }
        one.release(layout: layout, family: sampleFamily, identifier: sampleSession)
        let claim = unpack(try two.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { FakeSession("two") })
        #expect(claim.opened && claim.session.name == "two")
        two.release(layout: layout, family: sampleFamily, identifier: sampleSession)
    }

    @Test("a session held by another process: -996 naming its pid, and free after it is SIGKILLed")
    func heldByChildProcess() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        try DurableFile.makeDirectory(layout.sessionDirectory(family: sampleFamily, identifier: sampleSession).path)
        let lockPath = layout.sessionLock(family: sampleFamily, identifier: sampleSession).path
        let holder = try await FlockHolder.holding(lockPath)
        defer { holder.kill() }
        #expect(await holder.waitUntilHeld(), "flock child did not take the lock in time")
        try Data("\(holder.pid)\n".utf8).write(to: URL(fileURLWithPath: lockPath))

        let coordinator = SessionCoordinator()
        let error = try #require(throws: CoordinatorError.self) {
            try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { FakeSession("x") }
        }
        guard case .inUseByAnotherProcess(_, let pid) = error else {
            Issue.record("expected inUseByAnotherProcess, got \(error)")
            return
        }
        #expect(pid == holder.pid)
        #expect(error.description.contains("pid \(holder.pid)"))

        holder.kill()
        #expect(await holder.waitUntilExited())
        var opened = false
        _ = await eventually {
            guard let claim = try? coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession, make: { FakeSession("y") }) else { return false }
            opened = unpack(claim).opened
            return true
        }
        #expect(opened, "the session was not free after its holder died")
        coordinator.release(layout: layout, family: sampleFamily, identifier: sampleSession)
    }

    @Test("a make that throws releases the lock and caches nothing")
    func makeThrows() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let coordinator = SessionCoordinator()
        let lockPath = layout.sessionLock(family: sampleFamily, identifier: sampleSession).path
        #expect(throws: MakeFailed()) {
            try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { () throws -> FakeSession in throw MakeFailed() }
        }
        #expect(!FileLock.isHeld(lockPath))
        #expect(coordinator.openIdentifiers.isEmpty)
        // Another holder (another process) can take it.
        let lock = try #require(acquiredLock(try FileLock.tryAcquire(lockPath)))
        lock.release()
        // And this coordinator can open it now.
        let claim = unpack(try coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession) { FakeSession("ok") })
        #expect(claim.opened)
        coordinator.release(layout: layout, family: sampleFamily, identifier: sampleSession)
    }

    @Test("the coordinator is safe to use from many threads at once: one session is made")
    func concurrentClaims() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = try directory.preparedLayout()
        let coordinator = SessionCoordinator()
        let results = await withTaskGroup(of: (ObjectIdentifier, Bool)?.self) { group in
            for index in 0..<32 {
                group.addTask {
                    guard let claim = try? coordinator.claim(layout: layout, family: sampleFamily, identifier: sampleSession, make: { FakeSession("\(index)") }) else { return nil }
                    let (session, opened) = unpack(claim)
                    return (ObjectIdentifier(session), opened)
                }
            }
            var all: [(ObjectIdentifier, Bool)?] = []
            for await result in group { all.append(result) }
            return all
        }
        let claims = results.compactMap { $0 }
        #expect(claims.count == 32)
        #expect(Set(claims.map(\.0)).count == 1)
        #expect(claims.filter(\.1).count == 1)
        coordinator.release(layout: layout, family: sampleFamily, identifier: sampleSession)
    }

    @Test("the same container named before and after its folder existed is the same container")
    func sameRootSpelledTwice() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let rootPath = directory.path("container")
        let before = ContainerLayout(root: URL(fileURLWithPath: rootPath)) // the folder does not exist yet
        try before.prepare()
        let after = ContainerLayout(root: URL(fileURLWithPath: rootPath))  // now it does
        #expect(before.root.path == after.root.path)
        let coordinator = SessionCoordinator()
        let first = unpack(try coordinator.claim(layout: before, family: sampleFamily, identifier: sampleSession) { FakeSession("first") })
        #expect(first.opened)
        #expect(before == after)
        let second = try coordinator.claim(layout: after, family: sampleFamily, identifier: sampleSession) { FakeSession("second") }
        #expect(unpack(second).session === first.session)

        coordinator.release(layout: before, family: sampleFamily, identifier: sampleSession)
        coordinator.release(layout: after, family: sampleFamily, identifier: sampleSession)
    }
}
