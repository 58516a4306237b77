import BackgroundTransfer
import TransferContainer

/// The host app's stand-in for a keychain: passwords by realm, in its private container
/// (`Apps/com.example.host/Library/keychain.json`, 0600), written by
/// `host-app remember-password REALM USER PASSWORD`. The delegate answers challenges from it.
enum Keychain {
    struct Item: Codable {
        var user: String
        var password: String
    }

    static var file: URL {
        AppEnvironment.layout.privateContainer(StandInIdentities.hostBundle).appendingPathComponent("Library/keychain.json")
    }

    static func remember(realm: String, user: String, password: String) throws {
        var items = read()
        items[realm] = Item(user: user, password: password)
        try DurableFile.makeDirectory(file.deletingLastPathComponent().path)
        try RecordCoding.write(items, to: file.path)
    }

    static func item(realm: String?) -> Item? {
        read()[realm ?? ""]
    }

    private static func read() -> [String: Item] {
        (try? RecordCoding.read([String: Item].self, from: file.path)) ?? [:]
    }
}
