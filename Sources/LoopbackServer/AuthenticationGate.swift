import Foundation

/// Decides from a request's head alone, before any of its body is read, whether it may go on
/// to its route: first, when proxy authentication is required, an absolute-form request's
/// `Proxy-Authorization` and its authority (only this server is served); then the protection
/// of the request's path (for a resume path, the protection of the upload's route).
/// Every decision on a protected request is appended to the authentication log.
///
/// Created per request on the connection thread. Reads the protection table and appends to
/// the log through `ServerCore.state`, under the server lock; credentials are verified
/// outside it.
struct AuthenticationGate {
    let core: ServerCore
    let connectionID: Int

    /// Nil when the request goes on to its route; otherwise the answer to give instead:
    /// 407 or 401 with a challenge, or 502 for a proxied request to another server.
    func refusal(for head: RequestHead) -> ResponsePlan? {
        let (proxy, origin) = core.state.withLock { state in
            let uploadRoute = state.uploads.resumable[head.path]?.routePath
            return (state.auth.proxy,
                    state.auth.protection(for: head.path) ?? uploadRoute.flatMap { state.auth.protection(for: $0) })
        }
        if let proxy, head.authority != nil {
            if let challenge = check(head, against: proxy, prefix: nil, proxy: true) { return challenge }
            guard core.isOwnAuthority(of: head) else {
                return .text(502, "this proxy only reaches \(core.baseURL.absoluteString)")
            }
        }
        guard let (prefix, protection) = origin else { return nil }
        return check(head, against: protection, prefix: prefix, proxy: false)
    }

    /// Verifies the request's credentials, logs the outcome, and returns the challenge to
    /// answer with unless they were accepted.
    private func check(_ head: RequestHead, against protection: Protection, prefix: String?,
                       proxy: Bool) -> ResponsePlan? {
        let credentials = head.headers[proxy ? "Proxy-Authorization" : "Authorization"]
        let outcome = verify(credentials, against: protection, head: head)
        let accepted = if case .accepted = outcome { true } else { false }
        let status = proxy ? 407 : 401
        let event = AuthenticationEvent(outcome: outcome, proxy: proxy, status: accepted ? nil : status,
                                        scheme: protection.scheme, realm: protection.realm,
                                        protectedPrefix: prefix, method: head.method, target: head.target,
                                        path: head.path, credentials: credentials, connectionID: connectionID,
                                        time: Date())
        core.state.withLock(notify: true) { $0.auth.append(event) }
        guard !accepted else { return nil }

        var plan = ResponsePlan.text(status)
        plan.head.add(proxy ? "Proxy-Authenticate" : "WWW-Authenticate",
                      challenge(for: protection, stale: outcome == .stale))
        return plan
    }

    private func challenge(for protection: Protection, stale: Bool) -> String {
        switch protection.scheme {
        case .basic:
            "Basic realm=\(DigestChallenge.quoted(protection.realm)), charset=\"UTF-8\""
        case .digest(let algorithm):
            DigestChallenge.header(realm: protection.realm, algorithm: algorithm, nonce: core.nonces.make(),
                                   opaque: core.nonces.opaque, stale: stale)
        }
    }

    private func verify(_ value: String?, against protection: Protection,
                        head: RequestHead) -> AuthenticationEvent.Outcome {
        guard let value else { return .challenged }
        guard let credentials = Credentials(value), credentials.isScheme(protection.scheme.name) else {
            return .rejected(reason: "not \(protection.scheme.name) credentials")
        }
        switch protection.scheme {
        case .basic:
            return verifyBasic(credentials, users: protection.users)
        case .digest(let algorithm):
            return verifyDigest(credentials, algorithm: algorithm, protection: protection, head: head)
        }
    }

    /// `Basic base64(user:password)`, UTF-8 (RFC 7617 §2).
    private func verifyBasic(_ credentials: Credentials, users: [String: String]) -> AuthenticationEvent.Outcome {
        guard let decoded = Data(base64Encoded: credentials.rest).flatMap({ String(data: $0, encoding: .utf8) }),
              let colon = decoded.firstIndex(of: ":") else {
            return .rejected(reason: "malformed Basic credentials")
        }
        let user = String(decoded[..<colon])
        guard let password = users[user] else { return .rejected(reason: "unknown user") }
        guard password == String(decoded[decoded.index(after: colon)...]) else {
            return .rejected(reason: "wrong password")
        }
        return .accepted(user: user)
    }

    /// RFC 7616 §3.4 with qop=auth. The nonce is checked last: right credentials with a
    /// nonce that expired or that this server did not issue are `stale`.
    private func verifyDigest(_ credentials: Credentials, algorithm: Protection.DigestAlgorithm,
                              protection: Protection, head: RequestHead) -> AuthenticationEvent.Outcome {
        guard let fields = credentials.parameters, let user = fields["username"], let nonce = fields["nonce"],
              let uri = fields["uri"], let response = fields["response"] else {
            return .rejected(reason: "incomplete Digest credentials")
        }
        guard fields["realm"] == protection.realm else { return .rejected(reason: "wrong realm") }
        guard (fields["algorithm"] ?? "MD5").lowercased() == algorithm.rawValue.lowercased() else {
            return .rejected(reason: "wrong algorithm")
        }
        guard fields["userhash"].map({ $0.lowercased() == "false" }) ?? true else {
            return .rejected(reason: "userhash is not supported")
        }
        guard fields["qop"]?.lowercased() == "auth", let nc = fields["nc"], nc.utf8.count == 8,
              UInt32(nc, radix: 16) != nil, let cnonce = fields["cnonce"], !cnonce.isEmpty else {
            return .rejected(reason: "qop=auth with nc and cnonce is required")
        }
        guard fields["opaque"] == core.nonces.opaque else { return .rejected(reason: "wrong opaque") }
        guard let resource = try? HTTPRequestParser.splitTarget(uri),
              resource.path == head.path, resource.query == head.query else {
            return .rejected(reason: "uri does not match the request")
        }
        guard let password = protection.users[user] else { return .rejected(reason: "unknown user") }
        let expected = DigestChallenge.response(algorithm: algorithm, user: user, realm: protection.realm,
                                                password: password, method: head.method, uri: uri,
                                                nonce: nonce, nc: nc, cnonce: cnonce)
        guard response.lowercased() == expected else { return .rejected(reason: "wrong response") }
        guard let issued = core.nonces.issueTime(of: nonce),
              protection.nonceLifetime.map({ Date().timeIntervalSince(issued) <= $0 }) ?? true else {
            return .stale
        }
        return .accepted(user: user)
    }
}

extension ServerCore {
    /// Whether an absolute-form target names this server: `http://127.0.0.1:PORT` or
    /// `http://localhost:PORT` (the port may be left out only if it is 80).
    func isOwnAuthority(of head: RequestHead) -> Bool {
        guard head.scheme == "http", let authority = head.authority else { return false }
        let hosts = ["127.0.0.1", "localhost"]
        return hosts.contains { authority == "\($0):\(port)" } || (port == 80 && hosts.contains(authority))
    }
}
