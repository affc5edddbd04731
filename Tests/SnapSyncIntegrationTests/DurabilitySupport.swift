import Foundation
import Testing
import SnapSyncModel
import SnapSyncWire
#if canImport(Glibc)
    import Glibc
#endif

// Helpers for the durability tests: a data directory that outlives one daemon, so
// a test can crash a daemon and start another on the same state.

/// A data directory kept across daemon restarts; removed by `remove()`.
struct DurableDirectory {
    let path: String

    init() throws {
        var template = Array((NSTemporaryDirectory() + "snapsync-durable-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw DaemonError("mkdtemp failed: errno \(errno)") }
        path = String(cString: made)
    }

    var data: String { path + "/data" }

    func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// Starts a daemon on this directory (the last --data-dir wins over DaemonProcess's own).
    func start(_ arguments: [String] = []) throws -> DaemonProcess {
        try DaemonProcess.start(arguments: ["--data-dir", data] + arguments)
    }

    /// Runs the daemon on this directory until it exits by itself (it should refuse to start).
    func runToExit(timeout: Double = 30) throws -> (status: Int32, output: String) {
        try DaemonProcess.run(arguments: ["--host", "127.0.0.1", "--port", "0", "--data-dir", data], timeout: timeout)
    }

    /// The log segment files, oldest first.
    var segments: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: data)) ?? [])
            .filter { $0.hasPrefix("wal-") && $0.hasSuffix(".log") }.sorted().map { data + "/" + $0 }
    }

    func copy(to other: String) {
        try? FileManager.default.removeItem(atPath: other)
        try? FileManager.default.copyItem(atPath: data, toPath: other)
    }
}

/// Record offsets of a segment file, parsed independently of the daemon's code from
/// docs/persistence.md: a 24-byte header, then records of a 12-byte header (u32 length, u32
/// crc of the payload, u32 crc of those 8 bytes) and the payload; zeros after the last one.
func segmentRecords(_ bytes: [UInt8]) -> (starts: [Int], end: Int) {
    var offset = 24
    var starts: [Int] = []
    while offset + 12 <= bytes.count {
        let length = Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
        guard length > 0, offset + 12 + length <= bytes.count else { break }
        starts.append(offset)
        offset += 12 + length
    }
    return (starts, offset)
}

func readBytes(_ path: String) -> [UInt8] {
    (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))) ?? []
}

func writeBytes(_ path: String, _ bytes: [UInt8]) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
}

/// Items of a snapshot, in order, as strings.
func itemNames(_ snapshot: RoomSnapshot) -> [String] {
    snapshot.itemIdentifiers.map { $0.string ?? "\($0)" }
}
