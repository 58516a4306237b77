import Foundation
import FoundationNetworking

// Apple sends a task delegate only the methods it implements; the rest go to the session's
// delegate. Swift protocols cannot say whether a method is implemented (no optional
// requirements without @objc), but a method left out is the protocol's default
// implementation: each task-level default first hands the call to the session's delegate
// when `self` is the task's own delegate (and not also the session's), and only does the
// default thing when there is none. A task delegate that implements a method is called
// for it alone, as on Apple's systems.
extension URLSessionTaskDelegate {
    /// The session's delegate, as a `Delegate`, when `self` is `task`'s own delegate and
    /// another object is the session's: where a method `self` leaves out goes. Runs on the
    /// delegate queue, as the call it is asked in.
    func sessionFallback<Delegate>(_ session: URLSession, _ task: URLSessionTask, as _: Delegate.Type = Delegate.self) -> Delegate? {
        guard task.delegate === self, let other = session.delegate, other !== self else { return nil }
        return other as? Delegate
    }
}
