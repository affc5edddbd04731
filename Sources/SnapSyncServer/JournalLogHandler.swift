package import Logging
internal import Glibc
import SnapSyncHub
// SnapSyncAuth brings Foundation into the module, and on Linux CoreFoundation then also
// declares `timespec`; importing it keeps `clock_gettime`'s struct unambiguous.
#if canImport(CoreFoundation)
    internal import CoreFoundation
#endif

/// A swift-log handler for a daemon: one line per event on stderr, `key=value` metadata.
///
/// Under systemd (`JOURNAL_STREAM` set, so stderr is the journal) each line starts with the
/// `<N>` syslog priority prefix that journald turns into the entry's priority, and carries no
/// timestamp (the journal has its own). Elsewhere lines start with an RFC 3339 UTC timestamp and
/// the level:
///
///     <6>listening on 127.0.0.1:7400
///     2025-01-01T12:00:00.123Z info listening on 127.0.0.1:7400
///     2025-01-01T12:00:00.456Z warning malformed frame, closing conn=7 peer=127.0.0.1:50312 bytes="\x00\x00\x00\x00"
///
/// Messages and values are escaped (`LogEscaping.line`), so nothing a client sends can break a
/// line in two. Each line is one write(2), so lines from one process never interleave.
package struct JournalLogHandler: LogHandler {
    package var logLevel: Logger.Level
    package var metadata: Logger.Metadata = [:]
    package var metadataProvider: Logger.MetadataProvider?
    /// Whether lines get the journald priority prefix instead of a timestamp.
    package let journal: Bool
    private let write: @Sendable (String) -> Void

    /// - Parameters:
    ///   - journal: defaults to whether `JOURNAL_STREAM` is set.
    ///   - write: where lines go (with their newline); stderr by default.
    package init(level: Logger.Level = .info, journal: Bool? = nil, write: (@Sendable (String) -> Void)? = nil) {
        self.logLevel = level
        self.journal = journal ?? (getenv("JOURNAL_STREAM") != nil)
        self.write =
            write ?? { line in
                var line = line
                _ = line.withUTF8 { Syscall.writeAll(2, UnsafeRawBufferPointer($0)) }
            }
    }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        let prefix = journal ? "<\(Self.syslogPriority(event.level))>" : "\(Self.timestamp()) \(event.level) "
        write(Self.format(prefix: prefix, message: "\(event.message)", metadata: merged))
    }

    /// One line: prefix, escaped message, then metadata sorted by key as `key=value` (values
    /// quoted when they hold spaces, quotes or `=`), then a newline.
    static func format(prefix: String, message: String, metadata: Logger.Metadata) -> String {
        var line = prefix + LogEscaping.line(message)
        for key in metadata.keys.sorted() {
            line += " " + LogEscaping.line(key) + "=" + value(metadata[key]!)
        }
        return line + "\n"
    }

    private static func value(_ value: Logger.Metadata.Value) -> String {
        let text = LogEscaping.line("\(value)")
        if text.isEmpty || text.contains(" ") || text.contains("=") || text.contains("\"") {
            return "\"" + text + "\""
        }
        return text
    }

    /// syslog(3) priorities: debug 7, info 6, notice 5, warning 4, err 3, crit 2.
    static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }

    /// `2025-01-01T12:00:00.123Z`.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func pad(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(pad(Int32(now.tv_nsec / 1_000_000), 3))Z"
    }
}
