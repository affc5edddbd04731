import Logging
import Synchronization

/// Keeps every log line, so tests can check what a room log said.
final class LogLines: Sendable {
    let lines = Mutex<[String]>([])

    var all: [String] { lines.withLock { $0 } }
    func contains(_ text: String) -> Bool { all.contains { $0.contains(text) } }

    var logger: Logger {
        Logger(label: "test.cluster") { _ in Handler(sink: self) }
    }

    struct Handler: LogHandler {
        let sink: LogLines
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            sink.lines.withLock { $0.append("\(event.level): \(event.message)") }
        }
    }
}
