import BackgroundTransfer
import TransferContainer
import TransferCoding
import TransferPOSIX

/// The host app's stand-in for a keychain: passwords by realm, in its private container
/// (`Apps/com.example.host/Library/keychain.json`, 0600), written by
/// `host-app remember-password REALM USER PASSWORD`; and trust anchors
/// (`Library/trust-anchors.pem`), added by `host-app trust-certificate FILE.pem`. The
/// delegates of the host and its extensions answer challenges from it.
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

    static var anchorsFile: URL {
        AppEnvironment.layout.privateContainer(StandInIdentities.hostBundle).appendingPathComponent("Library/trust-anchors.pem")
    }

    /// Adds the certificates of a PEM file as trust anchors; how many were added. A file with
    /// no certificate in it is an error, naming the file.
    static func trust(certificatesIn path: String) throws -> Int {
        let text: String
        do { text = try String(contentsOfFile: path, encoding: .utf8) } catch {
            throw KeychainError("cannot read \(path): \(error.localizedDescription)")
        }
        let added = CertificatePEM.certificates(in: text)
        guard !added.isEmpty else { throw KeychainError("\(path) holds no PEM certificate") }
        let kept = anchors()
        let all = kept + added.filter { !kept.contains($0) }
        try DurableFile.makeDirectory(anchorsFile.deletingLastPathComponent().path)
        try DurableFile.write(Data(all.map(CertificatePEM.pem(of:)).joined().utf8), to: anchorsFile.path)
        return added.count
    }

    /// The trust anchors the host keeps (DER).
    static func anchors() -> [Data] {
        guard let text = try? String(contentsOf: anchorsFile, encoding: .utf8) else { return [] }
        return CertificatePEM.certificates(in: text)
    }

    private static func read() -> [String: Item] {
        (try? RecordCoding.read([String: Item].self, from: file.path)) ?? [:]
    }
}

/// Why the keychain could not take a certificate.
struct KeychainError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
