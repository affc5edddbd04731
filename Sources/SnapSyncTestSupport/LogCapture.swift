public import Logging
import Synchronization

/// Keeps every line logged through `logger`, as "LEVEL: message", so tests can check what was
/// said (and how often). Thread-safe: the code under test may log from any thread.
public final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])

    public init() {}

    public var all: [String] { lines.withLock { $0 } }
    public func contains(_ text: String) -> Bool { all.contains { $0.contains(text) } }

    public var logger: Logger { Logger(label: "test") { _ in Handler(sink: self) } }

    private struct Handler: LogHandler {
        let sink: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) { sink.lines.withLock { $0.append("\(event.level): \(event.message)") } }
    }
}
