import Foundation
import Testing
import TransferContainer

@Suite("AcceptedServerKey")
struct AcceptedServerKeyTests {
    static func key(_ port: Int, _ byte: UInt8 = 1) -> AcceptedServerKey {
        AcceptedServerKey(scheme: "https", host: "127.0.0.1", port: port, pin: "sha256//" + Data(repeating: byte, count: 32).base64EncodedString())
    }

    @Test("a session keeps the latest key per origin, and at most 32: the oldest acceptance is forgotten first")
    func bounded() {
        var keys: [AcceptedServerKey] = []
        for port in 1...40 { keys = AcceptedServerKey.adding(Self.key(port), to: keys) }
        #expect(keys.count == AcceptedServerKey.limitPerSession)
        #expect(keys.first?.port == 9 && keys.last?.port == 40)
        keys = AcceptedServerKey.adding(Self.key(20, 2), to: keys)
        #expect(keys.count == 32 && keys.filter { $0.port == 20 } == [Self.key(20, 2)] && keys.last == Self.key(20, 2))
    }

    @Test("a key covers its own origin only, and a pin not of the form the daemon writes covers nothing")
    func covers() {
        #expect(Self.key(8443).covers(scheme: "https", host: "127.0.0.1", port: 8443))
        #expect(!Self.key(8443).covers(scheme: "https", host: "127.0.0.1", port: 8444))
        #expect(!Self.key(8443).covers(scheme: "http", host: "127.0.0.1", port: 8443))
        #expect(!Self.key(8443).covers(scheme: "https", host: "localhost", port: 8443),
                "a key accepted for 127.0.0.1 does not cover another name for loopback on the same port")
        #expect(!Self.key(8443).covers(scheme: "https", host: "127.0.0.2", port: 8443))
        var path = Self.key(8443)
        path.pin = "/etc/ssl/private/some.key"
        #expect(!path.covers(scheme: "https", host: "127.0.0.1", port: 8443))
    }
}
