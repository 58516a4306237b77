import Foundation
import FoundationNetworking
import TransferContainer
import TransferCoding
import TransferPOSIX

/// A cookie store kept in one file of the container (`ContainerLayout.cookieJar`, S9.4),
/// read and written by the daemon and by every process of its app or app group. The file is
/// only ever replaced whole (written aside, synced, renamed), so a reader never sees it torn
/// and needs no lock; a change is a read-modify-write under an exclusive `flock` on
/// `<file>.lock`, so that two processes storing at once lose neither's cookies. A file that
/// cannot be read or decoded is reported through `problem` and taken as empty (the next
/// change replaces it): cookies must never stop a transfer. Parsing `Set-Cookie` and making
/// the `Cookie` field are Foundation's (`HTTPCookie`). The daemon, which writes in an app's
/// folder, gives the container's `root`: every access then goes through it, so a link planted
/// in place of the store, its folder or its lock is not followed out of the container.
/// A value; safe from any thread.
package struct CookieJar: Sendable {
    package let path: String
    /// Told of a file that could not be read or written (the daemon logs it).
    package let problem: @Sendable (String) -> Void
    /// The container's root, when the files are reached without following symlinks.
    let root: RootDirectory?
    /// A bigger store is taken as unusable (empty): it is read whole, into the daemon's memory.
    static let sizeLimit = 4 << 20

    package init(path: String, root: RootDirectory? = nil, problem: @escaping @Sendable (String) -> Void) {
        self.path = path
        self.root = root
        self.problem = problem
    }

    /// One cookie as the file keeps it.
    struct Stored: Codable {
        var name: String
        var value: String
        var domain: String
        var path: String
        var expires: Date?
        var secure: Bool
        var httpOnly: Bool
    }

    /// The stored cookies to send to `url`.
    package func cookies(for url: URL) -> [HTTPCookie] {
        stored().filter { Self.matches($0, url) && !$0.expired }.compactMap(\.cookie)
    }

    /// The `Cookie` field value to send to `url`, or nil when no stored cookie matches.
    package func requestHeader(for url: URL) -> String? {
        let matching = cookies(for: url)
        guard !matching.isEmpty else { return nil }
        return HTTPCookie.requestHeaderFields(with: matching)["Cookie"]
    }

    /// Keeps the cookies the `Set-Cookie` field values set, for the response from `url`.
    package func store(_ setCookieValues: [String], from url: URL) {
        store(parsed: setCookieValues.flatMap { value in
            HTTPCookie.cookies(withResponseHeaderFields: ["Set-Cookie": value], for: url).map { Stored($0).applyingMaxAge(of: value) }
        }, from: url)
    }

    /// Keeps `cookies`, which came with the response from `url`: each replaces a stored one
    /// of the same name, domain and path; one already expired removes it. Cookies for a
    /// domain `url` is not in are ignored, as Apple's are.
    package func store(_ cookies: [HTTPCookie], from url: URL) {
        store(parsed: cookies.map(Stored.init), from: url)
    }

    private func store(parsed: [Stored], from url: URL) {
        let parsed = parsed.filter { Self.matchesDomain($0.domain, host: url.host ?? "") }
        guard !parsed.isEmpty else { return }
        do {
            let folder = (path as NSString).deletingLastPathComponent
            if let root { try root.makeDirectory(folder) } else { try DurableFile.makeDirectory(folder) }
            let lock = try root?.open(path + ".lock", O_RDWR | O_CREAT) ?? FileDescriptor.open(path + ".lock", O_RDWR | O_CREAT)
            defer { lock.close() }
            guard Self.lockExclusively(lock) else { return problem("cookie store \(path) stayed locked by another process for 2 s; \(parsed.count) cookies not stored") }
            var all = stored().filter { !$0.expired }
            for cookie in parsed {
                all.removeAll { $0.name == cookie.name && $0.domain == cookie.domain && $0.path == cookie.path }
                if !cookie.expired { all.append(cookie) }
            }
            if let root { try root.write(RecordCoding.encoder().encode(all), to: path) } else { try RecordCoding.write(all, to: path) }
        } catch {
            problem("cannot store cookies in \(path): \(error)")
        }
    }

    /// Every cookie in the file; none when there is no file, or one that cannot be used.
    private func stored() -> [Stored] {
        if let root {
            do { return try RecordCoding.decoder().decode([Stored].self, from: root.read(path, limit: Self.sizeLimit)) } catch let error as Errno where error.code == ENOENT {
                return []
            } catch {
                problem("cookie store unusable, taken as empty: \(error)")
                return []
            }
        }
        guard FileManager.default.fileExists(atPath: path) else { return [] }
        do { return try RecordCoding.read([Stored].self, from: path) } catch {
            problem("cookie store unusable, taken as empty: \(error)")
            return []
        }
    }

    /// `flock(LOCK_EX)`, tried for up to 2 s: a process that holds it longer must not stall
    /// the daemon's transfers.
    private static func lockExclusively(_ file: FileDescriptor) -> Bool {
        let deadline = Date().addingTimeInterval(2)
        while flock(file.rawValue, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, Date() < deadline else { return false }
            usleep(5_000)
        }
        return true
    }

    /// RFC 6265's domain, path and secure rules.
    private static func matches(_ cookie: Stored, _ url: URL) -> Bool {
        guard matchesDomain(cookie.domain, host: url.host ?? "") else { return false }
        if cookie.secure && url.scheme?.lowercased() != "https" { return false }
        let path = url.path.isEmpty ? "/" : url.path
        return path == cookie.path || (path.hasPrefix(cookie.path) && (cookie.path.hasSuffix("/") || path.dropFirst(cookie.path.count).hasPrefix("/")))
    }

    /// A domain with a leading dot (set with a `Domain` attribute) covers its subdomains;
    /// one without, its host alone.
    private static func matchesDomain(_ domain: String, host: String) -> Bool {
        let host = host.lowercased(), domain = domain.lowercased()
        guard domain.hasPrefix(".") else { return host == domain }
        let bare = domain.dropFirst()
        return host == bare || host.hasSuffix(domain)
    }
}

extension CookieJar.Stored {
    init(_ cookie: HTTPCookie) {
        self.init(name: cookie.name, value: cookie.value, domain: cookie.domain, path: cookie.path, expires: cookie.expiresDate, secure: cookie.isSecure, httpOnly: cookie.isHTTPOnly)
    }

    var expired: Bool { expires.map { $0 <= Date() } ?? false }

    /// The cookie with the `Max-Age` of the `Set-Cookie` value it came from, which wins over
    /// `Expires` (RFC 6265 §5.2.2; 0 or less deletes it): Foundation's parser leaves it out.
    func applyingMaxAge(of setCookie: String, now: Date = Date()) -> Self {
        let attributes = setCookie.split(separator: ";").dropFirst().map { $0.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) } }
        guard let maxAge = attributes.last(where: { $0.count == 2 && $0[0].lowercased() == "max-age" }), let seconds = Int(maxAge[1]) else { return self }
        var cookie = self
        cookie.expires = seconds <= 0 ? .distantPast : now.addingTimeInterval(Double(seconds))
        return cookie
    }

    /// The line that loads it into libcurl's cookie engine (Netscape's format: domain, whether
    /// subdomains match, path, secure, expiry, name, value); nil for one no line can carry.
    var engineLine: String? {
        let fields = [domain, path, name, value]
        guard !expired, fields.allSatisfy({ !$0.contains(where: { $0 == "\t" || $0 == "\n" || $0 == "\r" }) }) else { return nil }
        // 0 would mean a session cookie: an expiry is at least 1, and at most the year 9999.
        let expiry = expires.map { String(min(max(1, CheckedNumbers.wholeSeconds($0.timeIntervalSince1970)), 253_402_300_799)) } ?? "0"
        return [(httpOnly ? "#HttpOnly_" : "") + domain, domain.hasPrefix(".") ? "TRUE" : "FALSE", path, secure ? "TRUE" : "FALSE", expiry, name, value].joined(separator: "\t")
    }

    /// Foundation's cookie, for making the `Cookie` field.
    var cookie: HTTPCookie? {
        var properties: [HTTPCookiePropertyKey: Any] = [.name: name, .value: value, .domain: domain, .path: path]
        if let expires { properties[.expires] = expires }
        if secure { properties[.secure] = "TRUE" }
        return HTTPCookie(properties: properties)
    }
}

extension CookieJar {
    /// How a transfer of `request` on `easy` sends cookies, as `settings` say: none when the
    /// session sends none, or the request sets its own `Cookie` field. A session that also
    /// keeps cookies loads the stored ones into libcurl's cookie engine for this transfer:
    /// each request, redirects too, then carries those that match it, and a redirect's
    /// `Set-Cookie` goes with the request it leads to, as Apple's do. One that keeps none
    /// (`.never`) sends the stored ones that match the first request, as a `Cookie` field:
    /// the returned header lines.
    package static func requestFields(_ jar: CookieJar?, _ settings: CookieSettings?, for request: RequestRecord, on easy: CurlEasy) -> [String] {
        guard let jar, let settings, settings.sendsCookies, let url = URL(string: request.url),
              !request.headers.contains(where: { $0.name.isSameHTTPFieldName(as: "Cookie") }) else { return [] }
        if settings.storesCookies {
            easy.loadCookieEngine(jar.stored().compactMap(\.engineLine))
            return []
        }
        return jar.requestHeader(for: url).map { ["Cookie: \($0)"] } ?? []
    }

    /// Called with each response header line: at the end of a redirect's head, keeps its
    /// `Set-Cookie`s for `url`, the request that got it (the final response's go through `keep`).
    package static func keepRedirect(_ jar: CookieJar?, _ settings: CookieSettings?, _ head: HTTPResponseHead, after line: String, from url: String?) {
        guard line.isEmpty, head.isComplete, (300..<400).contains(head.statusCode), let url else { return }
        keep(jar, settings, head, from: url)
    }

    /// Keeps the cookies the final response's `Set-Cookie` fields set, as `settings` say.
    package static func keep(_ jar: CookieJar?, _ settings: CookieSettings?, _ head: HTTPResponseHead, from url: String) {
        guard let jar, settings?.storesCookies == true, let url = URL(string: url) else { return }
        let values = head.values("Set-Cookie")
        if !values.isEmpty { jar.store(values, from: url) }
    }
}
