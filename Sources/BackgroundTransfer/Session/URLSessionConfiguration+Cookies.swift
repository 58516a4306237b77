import Foundation
import FoundationNetworking
import TransferContainer

extension URLSessionConfiguration {
    /// What the daemon does with cookies for this background configuration (S9.4): none
    /// without `httpCookieStorage`; the store of the app group `appGroups` names when the
    /// storage is that group's (`HTTPCookieStorage.sharedCookieStorage(forGroupContainerIdentifier:)`,
    /// which hands out one object per group), else the app's own store (for `.shared` and any
    /// other storage: the daemon cannot reach an object in this process). `httpShouldSetCookies`
    /// and `httpCookieAcceptPolicy` go with it.
    func cookieSettings(appGroups: [BundleIdentifier]) -> CookieSettings? {
        // The shared storage, unless the app set another, is known without making it (FoundationStores).
        let shared = usesSharedCookieStorage
        guard shared || httpCookieStorage != nil else { return nil }
        let policy: CookieSettings.AcceptPolicy = switch httpCookieAcceptPolicy {
        case .never: .never
        case .onlyFromMainDocumentDomain: .onlyFromMainDocumentDomain
        default: .always
        }
        let group = shared ? nil
            : appGroups.first { HTTPCookieStorage.sharedCookieStorage(forGroupContainerIdentifier: $0.rawValue) === httpCookieStorage }
        return CookieSettings(appGroup: group, sendsCookies: httpShouldSetCookies, acceptPolicy: policy)
    }
}
