import Testing
import SnapSyncTestThreads
import Logging
import Synchronization
@testable import SnapSyncServer
import SnapSyncHub

// Untrusted bytes in logs, and the journald-friendly line format.

@Suite(.unitTests) struct LogEscapingTests {
    @Test func printableBytesStayAndTheRestIsEscaped() {
        #expect(LogEscaping.sample(Array("HELLO".utf8)) == "HELLO")
        #expect(LogEscaping.sample([0x00, 0x0A, 0x1B, 0x7F, 0xFF]) == "\\x00\\x0a\\x1b\\x7f\\xff")
        #expect(LogEscaping.sample(Array("a\"b\\c".utf8)) == "a\\\"b\\\\c")
    }

    @Test func longInputIsCutAndSaysHowMuchWasLeft() {
        let sample = LogEscaping.sample([UInt8](repeating: 0x41, count: 1000), limit: 8)
        #expect(sample == "AAAAAAAA…(+992 bytes)")
        #expect(LogEscaping.sample([UInt8](), limit: 8) == "")
    }

    @Test func noSampleCanBreakALine() {
        let evil: [UInt8] = Array("ok\nFAKE LOG LINE\r\u{1B}[31m".utf8) + [0xC3, 0x28]
        let sample = LogEscaping.sample(evil)
        #expect(!sample.contains("\n") && !sample.contains("\r") && !sample.contains("\u{1B}"))
        #expect(sample.unicodeScalars.allSatisfy { $0.isASCII && $0.value >= 0x20 && $0.value < 0x7F })
    }

    @Test func linesKeepTextButEscapeControls() {
        #expect(LogEscaping.line("room é 😀") == "room é 😀")
        #expect(LogEscaping.line("a\nb\tc") == "a\\nb\\tc")
        #expect(LogEscaping.line("bell\u{07}") == "bell\\x07")
        #expect(LogEscaping.line(#"already \x00 escaped"#) == #"already \x00 escaped"#)
        #expect(LogEscaping.line("rtl\u{202E}") == "rtl\\xe2\\x80\\xae")
    }
}

@Suite(.unitTests) struct JournalLogHandlerTests {
    @Test func underJournaldLinesCarryThePriorityPrefix() {
        let lines = LinesBox()
        var logger = Logger(label: "t") { _ in JournalLogHandler(level: .info, journal: true) { lines.append($0) } }
        logger.logLevel = .info
        logger.warning("slow consumer, closing", metadata: ["conn": "7", "peer": "127.0.0.1:5000"])
        logger.info("listening on 127.0.0.1:7400")
        logger.debug("not shown")
        #expect(lines.all == ["<4>slow consumer, closing conn=7 peer=127.0.0.1:5000\n", "<6>listening on 127.0.0.1:7400\n"])
    }

    @Test func elsewhereLinesStartWithATimestampAndLevel() throws {
        let lines = LinesBox()
        let logger = Logger(label: "t") { _ in JournalLogHandler(level: .info, journal: false) { lines.append($0) } }
        logger.error("boom", metadata: ["why": "two words", "eq": "a=b", "empty": ""])
        let line = try #require(lines.all.first)
        // 2025-01-01T12:00:00.123Z error boom empty="" eq="a=b" why="two words"
        #expect(line.count > 25)
        let timestamp = line.prefix(24)
        #expect(timestamp.hasSuffix("Z") && timestamp.contains("T"))
        #expect(line.dropFirst(24) == " error boom empty=\"\" eq=\"a=b\" why=\"two words\"\n")
    }

    @Test func messagesAndValuesCannotInjectLines() {
        let lines = LinesBox()
        let logger = Logger(label: "t") { _ in JournalLogHandler(level: .info, journal: true) { lines.append($0) } }
        logger.info("client said \("hi\n<0>fake")", metadata: ["name": "x\ny"])
        #expect(lines.all == ["<6>client said hi\\n<0>fake name=x\\ny\n"])
    }

    @Test func syslogPriorities() {
        #expect(JournalLogHandler.syslogPriority(.critical) == 2)
        #expect(JournalLogHandler.syslogPriority(.error) == 3)
        #expect(JournalLogHandler.syslogPriority(.warning) == 4)
        #expect(JournalLogHandler.syslogPriority(.notice) == 5)
        #expect(JournalLogHandler.syslogPriority(.info) == 6)
        #expect(JournalLogHandler.syslogPriority(.debug) == 7)
    }
}

/// Lines written by a handler under test.
final class LinesBox: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}
