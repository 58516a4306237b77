import Foundation
import FoundationNetworking
import TransferPOSIX

/// The stores a configuration starts with, FoundationNetworking's: the cookie storage, the
/// credential storage, the URL cache and the protocol classes of its `.default` configuration
/// (the shared ones) or of an `.ephemeral` one (in memory, this configuration's own). Made
/// when first asked for, not with the configuration: FoundationNetworking's `.default` makes
/// the shared cookie storage, which reads a file in the user's home (0.8 ms), and the shared
/// cache, which makes a folder in `~/.cache` (0.25 ms), and a background session needs neither
/// (an extension's start, `transfer-bench extension-start`). Shared by a configuration and its
/// copies, as the stores themselves are. Thread-safe (one lock).
final class FoundationStores: @unchecked Sendable {
    private let ephemeral: Bool
    private let made = Locked<FoundationNetworking.URLSessionConfiguration?>(nil)

    init(ephemeral: Bool) {
        self.ephemeral = ephemeral
    }

    /// FoundationNetworking's configuration the stores come from, made on first use.
    var configuration: FoundationNetworking.URLSessionConfiguration {
        made.withLock { made in
            if let made { return made }
            let configuration: FoundationNetworking.URLSessionConfiguration = ephemeral ? .ephemeral : .default
            made = configuration
            return configuration
        }
    }
}

/// What the app set of the settings that default to FoundationNetworking's stores; nil: not
/// set, the store is `FoundationStores`'. A value, kept by its configuration.
struct StoreSettings {
    var httpCookieStorage: HTTPCookieStorage??
    var urlCredentialStorage: URLCredentialStorage??
    var urlCache: URLCache??
    var protocolClasses: [AnyClass]??
}
