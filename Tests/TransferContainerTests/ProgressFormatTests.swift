import Foundation
import Testing
import ProgressDisplay

@Suite("ProgressFormat: bytes, rates, time left")
struct ProgressFormatTests {
    @Test("byte counts in binary units, one decimal", arguments: [
        (Int64(0), "0 B"), (512, "512 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
        (12_897_485, "12.3 MiB"), (1 << 30, "1.0 GiB"), (5 << 40, "5.0 TiB"), (Int64.max, "8.0 EiB"),
    ] as [(Int64, String)])
    func bytes(_ count: Int64, _ text: String) {
        #expect(ProgressFormat.bytes(count) == text)
    }

    @Test("a count just under a unit is shown in the next one, never as 1024.0")
    func roundingAtTheEdge() {
        #expect(ProgressFormat.bytes((1 << 20) - 1) == "1.0 MiB")
        #expect(ProgressFormat.bytes((1 << 20) - 60 * 1024) == "964.0 KiB")
        #expect(ProgressFormat.bytes((1 << 30) - 1) == "1.0 GiB")
    }

    @Test("an unknown size reads ?")
    func unknownBytes() {
        #expect(ProgressFormat.bytes(-1) == "?")
    }

    @Test("rates per second")
    func rates() {
        #expect(ProgressFormat.rate(47_815_065.6) == "45.6 MiB/s")
        #expect(ProgressFormat.rate(812) == "812 B/s")
        #expect(ProgressFormat.rate(0) == "0 B/s")
        #expect(ProgressFormat.rate(nil) == "?/s")
        #expect(ProgressFormat.rate(.infinity) == "?/s")
        #expect(ProgressFormat.rate(-3) == "?/s")
    }

    @Test("time left as m:ss or h:mm:ss, rounded up", arguments: [
        (0.0, "0:00"), (0.2, "0:01"), (23, "0:23"), (59.5, "1:00"), (725, "12:05"), (3723, "1:02:03"), (99 * 3600 + 3599, "99:59:59"),
    ] as [(Double, String)])
    func timeLeft(_ seconds: Double, _ text: String) {
        #expect(ProgressFormat.timeLeft(seconds) == text)
    }

    @Test("unknown, negative or absurd time left reads --:--")
    func unknownTimeLeft() {
        #expect(ProgressFormat.timeLeft(nil) == "--:--")
        #expect(ProgressFormat.timeLeft(-1) == "--:--")
        #expect(ProgressFormat.timeLeft(.nan) == "--:--")
        #expect(ProgressFormat.timeLeft(100 * 3600) == "--:--")
    }

    @Test("seconds left need a known size and a moving rate")
    func secondsLeft() {
        #expect(ProgressFormat.secondsLeft(done: 25, expected: 125, bytesPerSecond: 10) == 10)
        #expect(ProgressFormat.secondsLeft(done: 200, expected: 100, bytesPerSecond: 10) == 0)
        #expect(ProgressFormat.secondsLeft(done: 25, expected: -1, bytesPerSecond: 10) == nil)
        #expect(ProgressFormat.secondsLeft(done: 25, expected: 125, bytesPerSecond: 0) == nil)
        #expect(ProgressFormat.secondsLeft(done: 25, expected: 125, bytesPerSecond: nil) == nil)
    }
}

@Suite("TransferRate: smoothed over the last seconds")
struct TransferRateTests {
    @Test("no rate until samples span a fifth of a second")
    func needsSpan() {
        var rate = TransferRate()
        #expect(rate.bytesPerSecond == nil)
        rate.add(bytes: 0, at: 10)
        rate.add(bytes: 100, at: 10.1)
        #expect(rate.bytesPerSecond == nil)
        rate.add(bytes: 300, at: 10.3)
        #expect(rate.bytesPerSecond.map { abs($0 - 1000) < 0.001 } == true)
    }

    @Test("only the window counts: an early burst fades out")
    func window() {
        var rate = TransferRate(window: 3)
        rate.add(bytes: 0, at: 0)
        rate.add(bytes: 10_000, at: 1) // a burst
        for second in 2...10 { rate.add(bytes: 10_000 + Int64(second - 1) * 100, at: TimeInterval(second)) }
        #expect(rate.bytesPerSecond.map { abs($0 - 100) < 0.001 } == true)
    }

    @Test("a stall brings the rate down to zero")
    func stall() {
        var rate = TransferRate(window: 3)
        for tick in 0...10 { rate.add(bytes: Int64(tick) * 1000, at: TimeInterval(tick) / 4) }
        for tick in 11...30 { rate.add(bytes: 10_000, at: TimeInterval(tick) / 4) }
        #expect(rate.bytesPerSecond == 0)
    }

    @Test("sparse samples still give a rate across the window")
    func sparse() {
        var rate = TransferRate(window: 3)
        rate.add(bytes: 0, at: 0)
        rate.add(bytes: 5000, at: 5)
        #expect(rate.bytesPerSecond == 1000)
    }

    @Test("fewer bytes than before (the transfer started over) forget the old samples")
    func restart() {
        var rate = TransferRate()
        rate.add(bytes: 0, at: 0)
        rate.add(bytes: 1_000_000, at: 1)
        rate.add(bytes: 10, at: 1.5)
        #expect(rate.bytesPerSecond == nil)
        rate.add(bytes: 110, at: 2)
        #expect(rate.bytesPerSecond == 200)
    }
}
