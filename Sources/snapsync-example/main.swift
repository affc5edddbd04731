// Connects to snapsyncd, joins a room, prints every change, and appends one item.
// Usage: [SNAPSYNC_TOKEN=...] [SNAPSYNC_TLS=1 | SNAPSYNC_CA=ca.pem] snapsync-example [host] [port] [room]
//        (defaults: 127.0.0.1 7400 demo)
//        SNAPSYNC_ENDPOINTS=host:port,host:port,... instead of host and port: cluster nodes
//        (scripts/cluster's SNAPSYNC_NODES), tried in order and failed over between.
import Foundation  // exit(), ProcessInfo
import SnapSync

let arguments = CommandLine.arguments.dropFirst()
let host = arguments.first ?? "127.0.0.1"
let port = arguments.dropFirst().first.flatMap { Int($0) } ?? 7400
let room = arguments.dropFirst(2).first ?? "demo"

var configuration = SnapSyncClient.Configuration(host: host, port: port, clientName: "snapsync-example")
if let list = ProcessInfo.processInfo.environment["SNAPSYNC_ENDPOINTS"] {
    let endpoints = list.split(separator: ",").map { SnapSyncClient.Endpoint(String($0)) }
    guard !endpoints.isEmpty, !endpoints.contains(nil) else {
        print("snapsync-example: SNAPSYNC_ENDPOINTS is not a list of host:port: \(list)")
        exit(1)
    }
    configuration.endpoints = endpoints.compactMap { $0 }
}
// A daemon started with --auth-keys wants a token (`snapsyncd token`, docs/auth.md): the
// provider is asked before every connect and again before the token expires.
configuration.credentials = { ProcessInfo.processInfo.environment["SNAPSYNC_TOKEN"] }
// A daemon's --tls-listen port: TLS verified against the system's CAs (SNAPSYNC_TLS), or against a
// private CA (SNAPSYNC_CA, a PEM file). `TLSConfiguration` also pins a key
// (`pinnedPublicKeySHA256`), presents a client certificate for --tls-client-ca
// (`clientCertificate`) and checks another name than the host (`serverName`).
if let caFile = ProcessInfo.processInfo.environment["SNAPSYNC_CA"] {
    guard let pem = try? String(contentsOfFile: caFile, encoding: .utf8) else {
        print("snapsync-example: cannot read \(caFile)")
        exit(1)
    }
    configuration.tls = SnapSyncClient.TLSConfiguration(trustRoots: .certificates(pem: pem))
} else if ProcessInfo.processInfo.environment["SNAPSYNC_TLS"] != nil {
    configuration.tls = SnapSyncClient.TLSConfiguration()
}
let client = SnapSyncClient(configuration: configuration)
do {
    try await client.connect()
    let replica = try await client.join(room)
    print("joined \(room) at \(replica.position) on \(client.endpoint?.description ?? "?")")

    // Print changes as they come: what UIKit would be told, then the room. Each `changes` is a
    // stream of its own (any number may be consumed), from the moment it is made: make it now.
    let changes = replica.changes
    let printer = Task {
        for await change in changes {
            print("\(change.kind) → v\(change.version): \(change.updates)")
            print(change.snapshot.visualDescription())
        }
    }

    // Append an item to the last section, creating a section first if the room has none.
    let item = SnapshotElement("item-\(UInt32.random(in: 0 ... .max))", payload: "hello from \(configuration.clientName)")
    let position = try await client.perform(room) { batch in
        if batch.snapshot.numberOfSections == 0 { try batch.appendSections(["main"]) }
        try batch.appendItems([item])
    }
    // What a cellForItemAt asks, in O(log n): the item's index path, and back.
    if let path = replica.indexPath(for: item.id) {
        print("appended \(item.id) at \(position), index path \(path): \(replica.itemIdentifier(for: path)!)")
    }

    // The typed façade: identifiers as text, payloads decoded (here as text too; `.json` for a
    // Codable type). A payload that does not decode throws ElementCodingError naming the item.
    let typed = TypedReplica(replica, coding: RoomCoding<String, String, String>(sectionIDs: .string, itemIDs: .string, items: .string))
    print("sections: \(try typed.sectionIdentifiers()), last item: \(try typed.item(item.id.string!) ?? "?")")

    try await Task.sleep(for: .milliseconds(200))  // let the printer show our own DIFF
    await client.close()
    await printer.value
} catch {
    print("snapsync-example: \(error)")
    await client.close()
    exit(1)
}
