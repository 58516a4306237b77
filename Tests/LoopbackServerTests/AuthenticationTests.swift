import Foundation
import Testing
@testable import LoopbackServer

/// Protected paths (Basic and Digest with MD5 and SHA-256), proxy authentication (407), the
/// authentication log, and what happens to the body of a request that is turned away. Real
/// curl where a client's behaviour matters, raw sockets where exact bytes do.
@Suite(.timeLimit(.minutes(20)))
struct AuthenticationTests {
    static let users = ["alice": "wonder land", "bob": "bu:ilder"]
    static let content = Data("the protected content\n".utf8)

    /// A server with `content` at `/vault/file` and `/open/file`.
    static func server() throws -> LoopbackServer {
        let server = try LoopbackServer()
        server.serve("/vault/file", data: content)
        server.serve("/open/file", data: content)
        return server
    }

    /// Runs curl and splits what it wrote into the body and the final status (`-w`).
    static func curl(_ arguments: [String], in directory: TempDirectory) throws -> (status: Int, body: String, stderr: String) {
        let run = try runCurl(["-sS", "-w", "\n%{http_code}"] + arguments, in: directory)
        #expect(run.exitCode == 0, "\(run.stderr)")
        let end = run.stdout.lastIndex(of: "\n") ?? run.stdout.startIndex
        let status = Int(run.stdout[end...].dropFirst()) ?? -1
        return (status, String(run.stdout[..<end]), run.stderr)
    }

    static func basic(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    /// The auth-params of a challenge such as `Digest realm="r", nonce="n"`.
    static func parameters(_ challenge: String?) -> [String: String] {
        challenge.flatMap { Credentials($0)?.parameters } ?? [:]
    }

    /// Digest credentials for `target`, answering `challenge` as a client would.
    static func digestAuthorization(_ challenge: [String: String], algorithm: Protection.DigestAlgorithm,
                                    user: String, password: String, method: String, target: String) -> String {
        let nonce = challenge["nonce"] ?? "", realm = challenge["realm"] ?? ""
        let response = DigestChallenge.response(algorithm: algorithm, user: user, realm: realm, password: password,
                                                method: method, uri: target, nonce: nonce, nc: "00000001",
                                                cnonce: "c0ffee")
        return "Digest username=\"\(user)\", realm=\"\(realm)\", nonce=\"\(nonce)\", uri=\"\(target)\", "
            + "algorithm=\(algorithm.rawValue), response=\"\(response)\", qop=auth, nc=00000001, "
            + "cnonce=\"c0ffee\", opaque=\"\(challenge["opaque"] ?? "")\""
    }

    // MARK: Hashes and parsing

    @Test func md5MatchesRFC1321() {
        let vectors = [
            "": "d41d8cd98f00b204e9800998ecf8427e",
            "a": "0cc175b9c0f1b6a831c399e269772661",
            "abc": "900150983cd24fb0d6963f7d28e17f72",
            "message digest": "f96b697d7cb7938d525a2f31aaf161d0",
            "abcdefghijklmnopqrstuvwxyz": "c3fcd3d76192e4007dfb496cca67e13b",
            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789": "d174ab98d277d9f5a5611c2c9f419d9f",
            String(repeating: "1234567890", count: 8): "57edf4a22be3c955ac49da2e2107b67a",
        ]
        for (input, digest) in vectors {
            #expect(MD5.hexDigest(of: input) == digest, "MD5(\"\(input)\")")
        }
        // Lengths around the 56-byte padding boundary.
        #expect(MD5.hexDigest(of: String(repeating: "a", count: 55)) == "ef1772b6dff9a122358552954ad0df65")
        #expect(MD5.hexDigest(of: String(repeating: "a", count: 56)) == "3b0c8ac703f828b04c6c197006d17218")
        #expect(MD5.hexDigest(of: String(repeating: "a", count: 64)) == "014842d480b571495a4a0363793f7367")
    }

    /// RFC 7616 §3.9.1: the same request answered with MD5 and with SHA-256.
    @Test(arguments: [(Protection.DigestAlgorithm.md5, "8ca523f5e9506fed4657c9700eebdbec"),
                      (.sha256, "753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1")])
    func digestResponseMatchesRFC7616(algorithm: Protection.DigestAlgorithm, expected: String) {
        let response = DigestChallenge.response(algorithm: algorithm, user: "Mufasa", realm: "http-auth@example.org",
                                                password: "Circle of Life", method: "GET", uri: "/dir/index.html",
                                                nonce: "7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v", nc: "00000001",
                                                cnonce: "f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ")
        #expect(response == expected)
    }

    @Test func credentialParameters() {
        let parsed = Credentials(#"digest  username="a \"b\" c",realm=r , , qop=auth, empty="""#)
        #expect(parsed?.isScheme("Digest") == true)
        #expect(parsed?.parameters == ["username": #"a "b" c"#, "realm": "r", "qop": "auth", "empty": ""])
        for malformed in [#"Digest a="unterminated"#, "Digest a=1, a=2", "Digest a", "Digest =b", "Digest a=b c=d"] {
            #expect(Credentials(malformed)?.parameters == nil, "\(malformed)")
        }
        #expect(Credentials("") == nil)
        #expect(Credentials("Basic YTpi")?.rest == "YTpi")
    }

    @Test func absoluteFormTargetsAreTakenApart() throws {
        let cases: [(String, HTTPRequestParser.Target)] = [
            ("/a%20b?x=1", .init(path: "/a b", query: "x=1")),
            ("HTTP://User:pw@127.0.0.1:8080/a%20b?x=1", .init(path: "/a b", query: "x=1", scheme: "http", authority: "127.0.0.1:8080")),
            ("https://Example.org", .init(path: "/", scheme: "https", authority: "example.org")),
            ("http://[::1]:80?q", .init(path: "/", query: "q", scheme: "http", authority: "[::1]:80")),
            ("*", .init(path: "*")),
        ]
        for (target, expected) in cases {
            #expect(try HTTPRequestParser.splitTarget(target) == expected, "\(target)")
        }
        for bad in ["http:///x", "ftp://host/x", "host/x"] {
            #expect(throws: HTTPParseError.self, "\(bad)") { try HTTPRequestParser.splitTarget(bad) }
        }
        let head = try HTTPRequestParser.parseHead(ArraySlice("GET hTTp://127.0.0.1:9/p HTTP/1.1\r\nHost: h\r\n\r\n".utf8))
        #expect(head.authority == "127.0.0.1:9" && head.scheme == "http" && head.path == "/p")
    }

    @Test func noncesAreCheckedWithoutATable() {
        let source = NonceSource()
        let nonce = source.make(now: Date(timeIntervalSince1970: 1_700_000_000.25))
        #expect(source.issueTime(of: nonce) == Date(timeIntervalSince1970: 1_700_000_000.25))
        #expect(source.issueTime(of: NonceSource().make()) == nil, "another server's nonce")
        var altered = Array(nonce)
        altered[3] = altered[3] == "0" ? "1" : "0"
        #expect(source.issueTime(of: String(altered)) == nil)
        #expect(source.make() != source.make())
    }

    // MARK: Basic

    @Test(.enabled(if: curlAvailable)) func basicWithCurl() throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try Self.server()
        server.protect("/vault", with: .basic(realm: "Vault", users: Self.users))
        let url = server.url(for: "/vault/file").absoluteString

        let ok = try Self.curl(["-u", "alice:wonder land", url], in: directory)
        #expect(ok.status == 200)
        #expect(ok.body == String(decoding: Self.content, as: UTF8.self))
        let colon = try Self.curl(["-u", "bob:bu:ilder", url], in: directory)
        #expect(colon.status == 200, "a password may contain a colon")

        let wrong = try Self.curl(["-u", "alice:wonderland", url], in: directory)
        #expect(wrong.status == 401)
        #expect(wrong.body == "401 Unauthorized\n")
        let none = try Self.curl([url], in: directory)
        #expect(none.status == 401)

        #expect(server.authenticationCounts(at: "/vault/file")
                == AuthenticationCounts(challenges: 2, failures: 1, acceptedUsers: ["alice", "bob"]))
        let log = server.authenticationLog
        #expect(log.map(\.outcome) == [.accepted(user: "alice"), .accepted(user: "bob"),
                                       .rejected(reason: "wrong password"), .challenged])
        #expect(log.map(\.status) == [nil, nil, 401, 401])
        #expect(log.allSatisfy { $0.scheme == .basic && $0.realm == "Vault" && $0.protectedPrefix == "/vault" && !$0.proxy })
        #expect(log.first?.credentials == Self.basic("alice", "wonder land"))
        #expect(server.credentialsSeen == [Self.basic("alice", "wonder land"), Self.basic("bob", "bu:ilder"),
                                           Self.basic("alice", "wonderland")])
    }

    @Test func basicChallengeAndRejections() throws {
        let server = try Self.server()
        server.protect("/vault/", with: .basic(realm: #"The "Vault""#, users: Self.users))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/vault/file")
        let challenge = try client.readResponse()
        #expect(challenge.status == 401)
        #expect(challenge.header("WWW-Authenticate") == #"Basic realm="The \"Vault\"", charset="UTF-8""#)
        #expect(challenge.header("Content-Type") == "text/plain; charset=utf-8")
        #expect(String(decoding: challenge.body, as: UTF8.self) == "401 Unauthorized\n")

        for (value, reason) in [(Self.basic("carol", "x"), "unknown user"),
                                ("Basic !!!", "malformed Basic credentials"),
                                ("Bearer abc", "not Basic credentials")] {
            try client.request("GET", "/vault/file", ["Authorization: \(value)"])
            #expect(try client.readResponse().status == 401)
            #expect(server.authenticationLog.last?.outcome == .rejected(reason: reason))
        }
        try client.request("GET", "/vault/file", ["authorization: bAsIc " + Data("alice:wonder land".utf8).base64EncodedString()])
        #expect(try client.readResponse().status == 200, "scheme and field name in any case")
        #expect(Set(server.requests.map(\.connectionID)).count == 1, "challenges keep the connection")
    }

    @Test func unprotectedPathsAreUnaffected() throws {
        let server = try Self.server()
        server.serve("/vaulted", data: Self.content)
        server.protect("/vault", with: .basic(users: Self.users))
        let client = try RawHTTPClient(port: server.port)
        for path in ["/open/file", "/vaulted", "/vault-not"] {
            try client.request("GET", path)
            #expect(try client.readResponse().status == (path == "/vault-not" ? 404 : 200), "\(path)")
        }
        try client.request("GET", "/vault")
        #expect(try client.readResponse().status == 401, "the prefix itself is covered")
        #expect(server.authenticationLog.map(\.path) == ["/vault"])

        server.unprotect("/vault")
        try client.request("GET", "/vault/file")
        #expect(try client.readResponse().status == 200)

        // The longest prefix applies.
        server.protect("/", with: .basic(realm: "all", users: ["root": "r"]))
        server.protect("/vault", with: .basic(realm: "vault", users: Self.users))
        try client.request("GET", "/vault/file")
        #expect(try client.readResponse().header("WWW-Authenticate")?.contains(#"realm="vault""#) == true)
        try client.request("GET", "/open/file")
        #expect(try client.readResponse().header("WWW-Authenticate")?.contains(#"realm="all""#) == true)
    }

    // MARK: Digest

    @Test(.enabled(if: curlAvailable), arguments: Protection.DigestAlgorithm.allCases)
    func digestWithCurl(algorithm: Protection.DigestAlgorithm) throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try Self.server()
        server.protect("/vault", with: .digest(algorithm, realm: "digest realm", users: Self.users))
        let url = server.url(for: "/vault/file").absoluteString + "?q=1"

        let ok = try Self.curl(["--digest", "-u", "alice:wonder land", url], in: directory)
        #expect(ok.status == 200)
        #expect(ok.body == String(decoding: Self.content, as: UTF8.self))
        #expect(server.authenticationCounts(at: "/vault/file")
                == AuthenticationCounts(challenges: 1, acceptedUsers: ["alice"]), "challenged once, then let in")

        let wrong = try Self.curl(["--digest", "-u", "alice:wonderland", url], in: directory)
        #expect(wrong.status == 401)
        #expect(server.authenticationCounts(at: "/vault/file")
                == AuthenticationCounts(challenges: 3, failures: 1, acceptedUsers: ["alice"]))
        #expect(server.authenticationLog.last?.outcome == .rejected(reason: "wrong response"))

        let challenge = try #require(server.authenticationLog.first { $0.outcome == .challenged })
        #expect(challenge.status == 401 && challenge.credentials == nil)
        let accepted = try #require(server.authenticationLog.first { $0.status == nil }?.credentials)
        #expect(accepted.hasPrefix("Digest "))
        #expect(Self.parameters(accepted)["algorithm"] == algorithm.rawValue)
        #expect(server.credentialsSeen.contains(accepted))
    }

    @Test(arguments: Protection.DigestAlgorithm.allCases)
    func digestChallengeShape(algorithm: Protection.DigestAlgorithm) throws {
        let server = try Self.server()
        server.protect("/vault", with: .digest(algorithm, realm: "r", users: Self.users))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/vault/file")
        let first = try client.readResponse()
        #expect(first.status == 401)
        let header = try #require(first.header("WWW-Authenticate"))
        #expect(header.hasPrefix(#"Digest realm="r", qop="auth", algorithm=\#(algorithm.rawValue), nonce=""#))
        let challenge = Self.parameters(header)
        #expect(challenge.keys.sorted() == ["algorithm", "nonce", "opaque", "qop", "realm"])

        try client.request("GET", "/vault/file")
        let second = Self.parameters(try client.readResponse().header("WWW-Authenticate"))
        #expect(second["nonce"] != challenge["nonce"], "a fresh nonce for every challenge")
        #expect(second["opaque"] == challenge["opaque"])

        let authorization = Self.digestAuthorization(challenge, algorithm: algorithm, user: "bob",
                                                     password: "bu:ilder", method: "GET", target: "/vault/file")
        try client.request("GET", "/vault/file", ["Authorization: \(authorization)"])
        #expect(try client.readResponse().status == 200)
        try client.request("GET", "/vault/other", ["Authorization: \(authorization)"])
        #expect(try client.readResponse().status == 401)
        #expect(server.authenticationLog.last?.outcome == .rejected(reason: "uri does not match the request"))
        try client.request("HEAD", "/vault/file", ["Authorization: \(authorization)"])
        #expect(try client.readResponse(forHead: true).status == 401, "the method is part of the digest")
    }

    @Test func staleNonceGetsStaleTrue() throws {
        let server = try Self.server()
        server.protect("/vault", with: .digest(.sha256, users: Self.users, nonceLifetime: 0.3))
        let client = try RawHTTPClient(port: server.port)
        try client.request("GET", "/vault/file")
        let challenge = Self.parameters(try client.readResponse().header("WWW-Authenticate"))
        let authorization = Self.digestAuthorization(challenge, algorithm: .sha256, user: "alice",
                                                     password: "wonder land", method: "GET", target: "/vault/file")
        Thread.sleep(forTimeInterval: 0.5)
        try client.request("GET", "/vault/file", ["Authorization: \(authorization)"])
        let stale = try client.readResponse()
        #expect(stale.status == 401)
        let renewed = Self.parameters(stale.header("WWW-Authenticate"))
        #expect(renewed["stale"] == "true")
        #expect(renewed["nonce"] != challenge["nonce"])
        #expect(server.authenticationLog.last?.outcome == .stale)

        let retry = Self.digestAuthorization(renewed, algorithm: .sha256, user: "alice", password: "wonder land",
                                             method: "GET", target: "/vault/file")
        try client.request("GET", "/vault/file", ["Authorization: \(retry)"])
        #expect(try client.readResponse().status == 200)

        // A nonce this server never issued, with the right password: stale too.
        var forged = challenge
        forged["nonce"] = NonceSource().make()
        let foreign = Self.digestAuthorization(forged, algorithm: .sha256, user: "alice", password: "wonder land",
                                               method: "GET", target: "/vault/file")
        try client.request("GET", "/vault/file", ["Authorization: \(foreign)"])
        #expect(try client.readResponse().status == 401)
        #expect(server.authenticationCounts(at: "/vault/file")
                == AuthenticationCounts(challenges: 3, stale: 2, acceptedUsers: ["alice"]))
    }

    // MARK: Uploads behind protection

    @Test(.enabled(if: curlAvailable)) func digestUploadWithCurl() throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try LoopbackServer()
        server.acceptUploads(at: "/vault/up")
        server.protect("/vault", with: .digest(.sha256, users: Self.users))
        let body = testBytes(300_000, seed: 11)
        let file = directory.file("body.bin")
        try body.write(to: file)

        let put = try Self.curl(["--digest", "-u", "alice:wonder land", "-T", file.path,
                                 server.url(for: "/vault/up").absoluteString], in: directory)
        #expect(put.status == 201)
        #expect(UploadAnswer(Array(put.body.utf8)) == UploadAnswer(bytes: Int64(body.count), sha256: sha256Hex(body)))
        #expect(server.receivedUploads(at: "/vault/up").count == 1, "the probe before the challenge stores nothing")
        #expect(server.uploadBytesReceived == Int64(body.count))
        #expect(server.authenticationCounts(at: "/vault/up") == AuthenticationCounts(challenges: 1, acceptedUsers: ["alice"]))
    }

    /// A turned-away upload never reaches the route, and the client does not hang: a large
    /// body (with and without `Expect: 100-continue`) closes the connection after the 401.
    @Test(.enabled(if: curlAvailable), arguments: [true, false])
    func rejectedLargeUploadIsNotStored(expectContinue: Bool) throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try LoopbackServer()
        server.acceptUploads(at: "/vault/up", options: UploadOptions(storage: .countOnly))
        server.protect("/vault", with: .basic(users: Self.users))
        let file = directory.file("body.bin")
        try testBytes(3 * 1024 * 1024, seed: 12).write(to: file)

        let put = try Self.curl(["-u", "alice:nope", "-T", file.path, "-H", expectContinue ? "Expect: 100-continue" : "Expect:",
                                 server.url(for: "/vault/up").absoluteString], in: directory)
        #expect(put.status == 401)
        #expect(server.receivedUploads(at: "/vault/up").isEmpty)
        #expect(server.uploadBytesReceived == 0)
        #expect(server.authenticationCounts(at: "/vault/up") == AuthenticationCounts(challenges: 1, failures: 1))
    }

    @Test func rejectedSmallBodyIsDrainedAndTheConnectionKept() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/vault/up")
        server.protect("/vault", with: .basic(users: Self.users))
        let client = try RawHTTPClient(port: server.port)
        try client.request("PUT", "/vault/up", ["Content-Length: 10"])
        try client.send("0123456789")
        let refused = try client.readResponse()
        #expect(refused.status == 401)
        #expect(refused.header("Connection") == nil)
        #expect(server.requests.last?.bodyLength == 10)

        try client.request("PUT", "/vault/up", ["Content-Length: 3", "Authorization: \(Self.basic("alice", "wonder land"))"])
        try client.send("abc")
        #expect(try client.readResponse().status == 201)
        #expect(server.uploadBytesReceived == 3)

        // Behind Expect: 100-continue the body is never asked for; the connection closes.
        try client.request("PUT", "/vault/up", ["Content-Length: 10", "Expect: 100-continue"])
        let early = try client.readResponse()
        #expect(early.status == 401)
        #expect(early.header("Connection") == "close")
        #expect(client.isClosedByServer())
        #expect(server.uploadBytesReceived == 3)
    }

    @Test func resumePathsFollowTheirRoutesProtection() throws {
        let server = try LoopbackServer()
        server.acceptUploads(at: "/vault/up", options: UploadOptions(resumable: [6]))
        server.protect("/vault", with: .basic(users: Self.users))
        let authorization = "Authorization: \(Self.basic("alice", "wonder land"))"
        let client = try RawHTTPClient(port: server.port)
        try client.request("POST", "/vault/up", ["Upload-Draft-Interop-Version: 6", "Upload-Complete: ?0",
                                                 "Content-Length: 3", authorization])
        let interim = try client.readResponse()
        let path = try #require(interim.header("Location").flatMap { URL(string: $0)?.path })
        try client.send("abc")
        #expect(try client.readResponse().status == 201)

        try client.request("HEAD", path, ["Upload-Draft-Interop-Version: 6"])
        #expect(try client.readResponse(forHead: true).status == 401)
        try client.request("HEAD", path, ["Upload-Draft-Interop-Version: 6", authorization])
        let offset = try client.readResponse(forHead: true)
        #expect(offset.status == 204)
        #expect(offset.header("Upload-Offset") == "3")
        #expect(server.authenticationLog.last?.protectedPrefix == "/vault")
    }

    // MARK: Proxy

    @Test(.enabled(if: curlAvailable)) func proxyBasicWithCurl() throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try Self.server()
        server.requireProxyAuthentication(.basic(realm: "proxy", users: ["p": "secret"]))
        let proxy = server.baseURL.absoluteString
        let url = server.url(for: "/open/file").absoluteString

        let ok = try Self.curl(["-x", proxy, "--proxy-user", "p:secret", "--proxy-basic", url], in: directory)
        #expect(ok.status == 200)
        #expect(ok.body == String(decoding: Self.content, as: UTF8.self))
        #expect(server.requests.first?.target == url, "absolute form")

        let none = try Self.curl(["-x", proxy, url], in: directory)
        #expect(none.status == 407)
        let wrong = try Self.curl(["-x", proxy, "--proxy-user", "p:guess", "--proxy-basic", url], in: directory)
        #expect(wrong.status == 407)

        let direct = try Self.curl([url], in: directory)
        #expect(direct.status == 200, "origin-form requests need no proxy credentials")

        #expect(server.authenticationCounts(at: "/open/file", proxy: true)
                == AuthenticationCounts(challenges: 2, failures: 1, acceptedUsers: ["p"]))
        #expect(server.authenticationCounts(at: "/open/file") == AuthenticationCounts())
        #expect(server.authenticationLog.map(\.status) == [nil, 407, 407])
        #expect(server.credentialsSeen.first == Self.basic("p", "secret"))
    }

    @Test(.enabled(if: curlAvailable), arguments: Protection.DigestAlgorithm.allCases)
    func proxyDigestAndOriginDigestWithCurl(algorithm: Protection.DigestAlgorithm) throws {
        let directory = try TempDirectory()
        defer { directory.remove() }
        let server = try Self.server()
        server.requireProxyAuthentication(.digest(algorithm, realm: "proxy", users: ["p": "secret"]))
        server.protect("/vault", with: .digest(algorithm, realm: "origin", users: Self.users))
        let url = server.url(for: "/vault/file").absoluteString

        let ok = try Self.curl(["-x", server.baseURL.absoluteString, "--proxy-user", "p:secret", "--proxy-digest",
                                "--digest", "-u", "alice:wonder land", url], in: directory)
        #expect(ok.status == 200, "\(ok.stderr)")
        #expect(ok.body == String(decoding: Self.content, as: UTF8.self))
        #expect(server.authenticationCounts(at: "/vault/file", proxy: true).acceptedUsers.last == "p")
        #expect(server.authenticationCounts(at: "/vault/file").acceptedUsers == ["alice"])
        #expect(server.authenticationCounts(at: "/vault/file").challenges == 1)
    }

    @Test func proxyRequestsInRawForm() throws {
        let server = try Self.server()
        let client = try RawHTTPClient(port: server.port)
        // Without proxy mode an absolute-form target is served by its path, any scheme case.
        try client.send("GET HTTP://Example.Invalid/open/file HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)

        server.requireProxyAuthentication(.basic(users: ["p": "secret"]))
        let credentials = "Proxy-Authorization: \(Self.basic("p", "secret"))"
        try client.send("GET http://127.0.0.1:\(server.port)/open/file HTTP/1.1\r\nHost: x\r\n\r\n")
        let challenge = try client.readResponse()
        #expect(challenge.status == 407)
        #expect(challenge.header("Proxy-Authenticate") == #"Basic realm="LoopbackServer", charset="UTF-8""#)
        #expect(challenge.header("WWW-Authenticate") == nil)

        for (authority, status) in [("127.0.0.1:\(server.port)", 200), ("LOCALHOST:\(server.port)", 200),
                                    ("user@127.0.0.1:\(server.port)", 200), ("example.invalid", 502),
                                    ("127.0.0.1:\(server.port &+ 1)", 502)] {
            try client.send("GET http://\(authority)/open/file?x=1 HTTP/1.1\r\nHost: x\r\n\(credentials)\r\n\r\n")
            #expect(try client.readResponse().status == status, "\(authority)")
        }
        try client.send("GET https://127.0.0.1:\(server.port)/open/file HTTP/1.1\r\nHost: x\r\n\(credentials)\r\n\r\n")
        #expect(try client.readResponse().status == 502, "this server speaks plain http only")
        try client.send("GET /open/file HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)

        server.requireProxyAuthentication(nil)
        try client.send("GET http://example.invalid/open/file HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try client.readResponse().status == 200)
        #expect(server.authenticationLog.count == 7)
    }
}
