import Foundation
import SnapSyncModel
import SnapSyncWire

/// Protocol/vectors/*.json, loaded relative to this file: the repository root is three levels up.
enum Vectors {
    static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Protocol/vectors")

    struct Case: CustomStringConvertible, Sendable {
        let file: String
        let tcId: UInt64
        let comment: String
        let flags: [String]
        let bytes: [UInt8]
        let valid: Bool
        let message: JSON?
        let error: String?
        /// For ContentRule vectors: the identifier the error carries (`.null`: none).
        let identifier: JSON?
        let limits: WireLimits
        /// The protocol version to decode with: the file's, or 1 for a test flagged Version1, 2
        /// for one flagged Version2, 3 for one flagged Version3.
        let version: UInt64

        var description: String { "\(file) #\(tcId): \(comment)" }
    }

    static func limits(from json: JSON) -> WireLimits {
        var limits = WireLimits.default
        for key in LimitKey.allCases {
            if let v = json[name(of: key)]?.uint { limits[key] = Int(v) }
        }
        return limits
    }

    static func name(of key: LimitKey) -> String {
        switch key {
        case .maxFrameBytes: "max_frame_bytes"
        case .maxIdentifierBytes: "max_identifier_bytes"
        case .maxPayloadBytes: "max_payload_bytes"
        case .maxItemsPerRoom: "max_items_per_room"
        case .maxSectionsPerRoom: "max_sections_per_room"
        case .maxRoomsPerConnection: "max_rooms_per_connection"
        case .maxSnapshotBytes: "max_snapshot_bytes"
        case .historyCount: "history_count"
        case .maxOutlineDepth: "max_outline_depth"
        case .maxPresenceBytes: "max_presence_bytes"
        case .presenceView: "presence_view"
        case .maxWindowRows: "max_window_rows"
        }
    }

    static func load(_ file: String) -> [Case] {
        let doc = try! JSON.parse(file: directory.appendingPathComponent(file).path)
        let limits = limits(from: doc["limits"]!)
        let version = doc["protocolVersion"]!.uint!
        return doc["tests"]!.array!.map { t in
            let flags = t["flags"]!.array!.map { $0.string! }
            return Case(
                file: file, tcId: t["tcId"]!.uint!, comment: t["comment"]!.string!,
                flags: flags,
                bytes: JSONForm.bytes(fromHex: t["hex"]!.string!),
                valid: t["result"]!.string! == "valid", message: t["message"], error: t["error"]?.string,
                identifier: t["identifier"], limits: limits,
                version: flags.contains("Version1") ? 1 : flags.contains("Version2") ? 2 : flags.contains("Version3") ? 3 : version)
        }
    }

    /// Version 1 vectors (messages, limits), version 2 ones (outline), version 3 ones (chain)
    /// and version 4 ones (presence), PROTOCOL.md §16.
    static let files = ["messages.json", "limits.json", "outline.json", "chain.json", "presence.json", "windows.json"]

    /// One history of chain.json's `chains`: the chain at version 0, then each version's DIFF
    /// frame (version 2 layout) and the chain after it.
    struct ChainHistory: Sendable {
        let epoch: UInt64
        let start: [UInt8]
        let steps: [(frame: [UInt8], chain: [UInt8])]
    }

    static let chains: [ChainHistory] = {
        let doc = try! JSON.parse(file: directory.appendingPathComponent("chain.json").path)
        return doc["chains"]!.array!.map { history in
            ChainHistory(
                epoch: history["epoch"]!.uint!, start: JSONForm.bytes(fromHex: history["start"]!.string!),
                steps: history["diffs"]!.array!.map {
                    (JSONForm.bytes(fromHex: $0["hex"]!.string!), JSONForm.bytes(fromHex: $0["chain"]!.string!))
                })
        }
    }()
    static let all: [Case] = files.flatMap(load)
    static var valid: [Case] { all.filter(\.valid) }
}
