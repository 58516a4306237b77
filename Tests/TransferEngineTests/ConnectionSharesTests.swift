import Testing
@testable import TransferEngine

/// How connections are shared between apps (`ConnectionShares`), at each bound and one past it.
@Suite struct ConnectionSharesTests {
    /// 2,048 open files less the reserve of 192 for 32 slots: the report's 1,856 connections.
    let shares = ConnectionShares(maximum: 1_856)

    @Test("Under 1,856 connections an app may hold 232: its 232nd is welcome, its 233rd refused naming the app and the cap")
    func perApp() throws {
        #expect(shares.perApp == 232)
        #expect(shares.refusal(app: "com.example.hog", held: 231, identified: 231) == nil)
        let refusal = try #require(shares.refusal(app: "com.example.hog", held: 232, identified: 232))
        #expect(refusal.contains("com.example.hog") && refusal.contains("232 of 1856"), "\(refusal)")
    }

    @Test("The last 116 of 1,856 are kept for apps holding none: an app holding one is refused at 1,740 identified, not at 1,739; an app holding none is welcome at 1,855")
    func reserve() throws {
        #expect(shares.reserve == 116)
        #expect(shares.refusal(app: "com.example.b", held: 1, identified: 1_739) == nil)
        let refusal = try #require(shares.refusal(app: "com.example.b", held: 1, identified: 1_740))
        #expect(refusal.contains("116") && refusal.contains("com.example.b"), "\(refusal)")
        #expect(shares.refusal(app: "com.example.new", held: 0, identified: 1_855) == nil)
    }

    @Test("Under few connections the shares keep their floors: 8 per app, a reserve of 4")
    func floors() {
        let small = ConnectionShares(maximum: 8)
        #expect(small.perApp == 8 && small.reserve == 4)
    }
}
