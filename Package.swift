// swift-tools-version:6.0
// The layout is described in README.md: Model and Wire are pure Swift and shared by the client
// (SnapSync) and the daemon. The daemon's rules are SnapSyncHub (no socket, no C module), which
// keeps rooms durable through SnapSyncStore (which never sees a socket) or replicates them
// through a RoomLog (SnapSyncCluster's, on JetStream); SnapSyncServer is the IO shell around
// the hub. Only SnapSyncLoop, the daemon's event loop (used by SnapSyncServer and
// SnapSyncCluster), imports CLibevent, CLibeventExtra (libevent's HTTP server, for the metrics
// endpoint) and CNatsLibevent (libnats's libevent adapter); only SnapSyncServer's TLS/TLS.swift
// imports COpenSSL, and only SnapSyncCluster's NATSConnection.swift imports CNats.
import PackageDescription

let upcoming: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "SnapSync",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "SnapSync", targets: ["SnapSync"]),
        .library(name: "SnapSyncModel", targets: ["SnapSyncModel"]),
        .library(name: "SnapSyncWire", targets: ["SnapSyncWire"]),
        // Only for the fuzz package (Tests/Fuzz), a package of its own, which reaches the
        // store's file parsers through `@testable import`: not API.
        .library(name: "SnapSyncStore", targets: ["SnapSyncStore"]),
        .executable(name: "snapsyncd", targets: ["snapsyncd"]),
        // The seeded PRNG of the property tests, a product only so that the benchmark package
        // (Benchmarks/, which depends on this one by path) builds the same cases: not API.
        .library(name: "SnapSyncTestSupport", targets: ["SnapSyncTestSupport"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.0.0"..<"5.0.0"),
        .package(url: "https://github.com/vapor/jwt-kit", from: "5.7.1"),
        // The hub's deadline heaps (token expiry, sleeping rooms' expiry: HeapModule) and its
        // queues consumed from the front (history, write ids, waiting writes: DequeModule).
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        // The metrics registry and the Prometheus text format of --metrics-listen.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.4.1"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // The client's transport: NIOPosix with NIOSSL on Linux, NIOTransportServices
        // (Network.framework) on Apple platforms; see Sources/SnapSync/ClientTransport.swift.
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-transport-services", from: "1.28.0"),
        // The client's verification of the server's certificate and its PEM:
        // ServerCertificateVerifier.swift. Already in the graph through jwt-kit.
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
    ],
    targets: [
        // libevent, linked through pkg-config (Debian: libevent-dev). Imported by SnapSyncLoop only.
        .systemLibrary(
            name: "CLibevent",
            pkgConfig: "libevent_core",
            providers: [.apt(["libevent-dev"])]
        ),
        // libevent's HTTP server (evhttp, in libevent_extra) for --metrics-listen, through
        // pkg-config (Debian: libevent-dev). Imported by Sources/SnapSyncLoop/HTTPEndpoint.swift only.
        .systemLibrary(
            name: "CLibeventExtra",
            pkgConfig: "libevent_extra",
            providers: [.apt(["libevent-dev"])]
        ),
        // zlib, for its crc32() (the store's record checksum), through pkg-config (Debian: zlib1g-dev).
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // OpenSSL (libssl, libcrypto) for the TLS listener, through pkg-config (Debian:
        // libssl-dev). Imported by Sources/SnapSyncServer/TLS/TLS.swift only.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]
        ),
        // libnats (Debian: libnats-dev), the NATS/JetStream C client of cluster mode, through
        // pkg-config. Imported by Sources/SnapSyncCluster/NATSConnection.swift only.
        .systemLibrary(
            name: "CNats",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"])]
        ),
        // libnats's libevent adapter, a header of non-static definitions compiled in exactly one
        // C file (shim.c), and libevent's pthread locking it turns on (libevent_pthreads).
        // Imported by Sources/SnapSyncLoop/EventLoop+NATS.swift only; its header needs neither
        // libnats's nor libevent's (include/CNatsLibevent.h).
        .target(
            name: "CNatsLibevent",
            dependencies: ["CNats", "CLibevent"],
            linkerSettings: [.linkedLibrary("event_pthreads")]
        ),
        // glibc's <malloc.h>, for mallopt() in snapsyncd's main (no library, no package).
        .systemLibrary(name: "CMalloc"),
        .target(
            name: "SnapSyncModel",
            dependencies: [.product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: upcoming
        ),
        .target(
            name: "SnapSyncWire",
            // Crypto: SHA-256 for `WriteFingerprint`, as the model's digest.
            dependencies: ["SnapSyncModel", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: upcoming
        ),
        .target(
            name: "SnapSync",
            dependencies: [
                "SnapSyncModel", "SnapSyncWire",
                // SHA-256 of a pinned key (CertificatePin.swift).
                .product(name: "Crypto", package: "swift-crypto"),
                // The server's chain, name and pin verified in the handshake, PEM and DER.
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOTLS", package: "swift-nio"),
                // NIOLockedValueBox: the state NIO's threads and the client's tasks share.
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                // The divergence counter an app's metrics backend sees (a no-op until the app
                // bootstraps one): SnapSyncClient+Verify.swift.
                .product(name: "CoreMetrics", package: "swift-metrics"),
                // BSD sockets and BoringSSL off Apple platforms only: there Network.framework
                // carries the connection and its TLS (ClientTransport.swift says why). The same
                // platforms as the sources' `#if !canImport(Network)`, for those NIO supports.
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(platforms: [.linux, .android, .openbsd])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(platforms: [.linux, .android, .openbsd])),
                .product(
                    name: "NIOTransportServices", package: "swift-nio-transport-services",
                    condition: .when(platforms: [.macOS, .iOS, .tvOS, .watchOS, .visionOS])),
            ],
            swiftSettings: upcoming
        ),
        // The write-ahead log, checkpoints, MANIFEST, recovery and the seam the daemon writes
        // through (`RoomStore`): no sockets, no event loop.
        .target(
            name: "SnapSyncStore",
            dependencies: [
                "CZlib", "SnapSyncModel", "SnapSyncWire",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: upcoming
        ),
        // Sessions, rooms, membership, requests, auth decisions, output queues and their budgets,
        // room lifecycle and sleep, and the room engines (local, replicated): the daemon's rules
        // without a socket, a C module or a clock of its own. The IO shell (SnapSyncServer) hands
        // it whole frames and writes out what it queued.
        .target(
            name: "SnapSyncHub",
            dependencies: [
                "SnapSyncModel", "SnapSyncWire", "SnapSyncStore", "SnapSyncAuth",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "DequeModule", package: "swift-collections"),
            ],
            swiftSettings: upcoming
        ),
        // The daemon's libevent loop: the loop, its events, the cross-thread mailbox, libevent's
        // HTTP server, libnats's libevent adapter. The only module that imports CLibevent,
        // CLibeventExtra and CNatsLibevent; no raw event base leaves it. NIOConcurrencyHelpers:
        // the mailbox's lock.
        .target(
            name: "SnapSyncLoop",
            dependencies: [
                "CLibevent", "CLibeventExtra", "CNatsLibevent",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: upcoming
        ),
        .target(
            name: "SnapSyncServer",
            dependencies: [
                "SnapSyncLoop", "COpenSSL", "SnapSyncHub", "SnapSyncModel", "SnapSyncWire", "SnapSyncStore", "SnapSyncAuth",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: upcoming
        ),
        // Cluster mode: the RoomLog on a NATS JetStream stream, which the hub's replicated engine
        // follows (docs/cluster.md). Its NATS I/O runs on the daemon's libevent loop.
        .target(
            name: "SnapSyncCluster",
            dependencies: [
                "CNats", "SnapSyncLoop", "SnapSyncStore", "SnapSyncModel",
                // The presence exchange (PresenceExchange.swift) is the hub's `PresenceRelay`.
                "SnapSyncHub", "SnapSyncWire",
                // SHA-256 of the epoch derivation (RoomEpoch.swift), as SnapSyncModel's digests.
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: upcoming
        ),
        .executableTarget(
            name: "snapsyncd",
            dependencies: [
                "SnapSyncServer", "SnapSyncHub", "SnapSyncLoop", "SnapSyncStore", "SnapSyncAuth", "SnapSyncWire", "SnapSyncModel", "SnapSyncCluster",
                .target(name: "CMalloc", condition: .when(platforms: [.linux])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: upcoming
        ),
        // Signed tokens: keys from a JWKS file, synchronous verification, minting. Pure
        // Swift, no sockets: the daemon calls it from its event loop (docs/auth.md).
        .target(
            name: "SnapSyncAuth",
            dependencies: [
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: upcoming
        ),
        // A seeded PRNG shared by the property tests and Benchmarks/ (whence the product).
        .target(name: "SnapSyncTestSupport", dependencies: [.product(name: "Logging", package: "swift-log")], swiftSettings: upcoming),
        // The README's client example, compiled with every build so it cannot rot.
        .executableTarget(
            name: "snapsync-example",
            dependencies: ["SnapSync"],
            swiftSettings: upcoming
        ),
        .testTarget(name: "SnapSyncModelTests", dependencies: ["SnapSyncModel", "SnapSyncTestSupport", "SnapSyncTestThreads"], swiftSettings: upcoming),
        .testTarget(name: "SnapSyncWireTests", dependencies: ["SnapSyncWire", "SnapSyncModel", "SnapSyncTestSupport", "SnapSyncTestThreads"],
                    resources: [], swiftSettings: upcoming),
        .testTarget(name: "SnapSyncStoreTests", dependencies: ["SnapSyncStore", "SnapSyncStoreTestSupport", "SnapSyncWire", "SnapSyncModel", "SnapSyncTestThreads", "SnapSyncTestSupport",
                                                        .product(name: "Logging", package: "swift-log")],
                    swiftSettings: upcoming),
        // SnapSyncCluster's pure parts (the servers' versions it refuses), without a server.
        .testTarget(name: "SnapSyncClusterUnitTests", dependencies: ["SnapSyncCluster", "SnapSyncWire", "SnapSyncTestThreads", "SnapSyncTestSupport", .product(name: "Logging", package: "swift-log")],
                    swiftSettings: upcoming),
        // SnapSyncCluster against a real 3-server JetStream cluster (scripts/cluster, on loopback).
        .testTarget(name: "SnapSyncClusterTests", dependencies: ["SnapSyncCluster", "SnapSyncStore", "SnapSyncModel", "SnapSyncWire", "SnapSyncLoop", "SnapSyncTestThreads", "SnapSyncTestSupport",
                                                         .product(name: "Logging", package: "swift-log")],
                    swiftSettings: upcoming),
        // The hub in-process: plain sessions, no socket; a cluster of hubs on an in-memory log.
        // SnapSyncServer only for the two checks of the hub's wiring into the daemon (its
        // metrics exposition, its start in cluster mode).
        .testTarget(name: "SnapSyncHubTests", dependencies: ["SnapSyncHub", "SnapSyncServer", "SnapSyncStore", "SnapSyncStoreTestSupport", "SnapSyncWire", "SnapSyncModel",
                                                      "SnapSyncTestSupport",
                                                      .product(name: "DequeModule", package: "swift-collections"),
                                                      "SnapSyncAuth", "SnapSyncTestThreads", .product(name: "Logging", package: "swift-log")],
                    swiftSettings: upcoming),
        // The IO shell's pure parts: start-up checks, configuration, logging.
        .testTarget(name: "SnapSyncServerTests", dependencies: ["SnapSyncServer", "SnapSyncHub", "SnapSyncStore", "SnapSyncWire", "SnapSyncModel", "SnapSyncAuth",
                                                         "SnapSyncTestThreads"],
                    swiftSettings: upcoming),
        // The fuzz targets' entry points (Tests/Fuzz/Entries, shared with the sanitized fuzz
        // package) replayed over the seed corpus, the corpus and every crash input: no fuzzing.
        .testTarget(name: "SnapSyncFuzzTests", dependencies: ["SnapSyncStore", "SnapSyncWire", "SnapSyncModel", "SnapSyncTestThreads",
                                                       .product(name: "Logging", package: "swift-log")],
                    path: "Tests/Fuzz/Sources", swiftSettings: upcoming),
        // The client without a daemon: its model of changes and index paths, and its answers to a
        // scripted peer on a loopback socket.
        .testTarget(name: "SnapSyncTests", dependencies: ["SnapSync", "SnapSyncWire", "SnapSyncModel", "SnapSyncTestSupport", "SnapSyncTestThreads",
                                                   "SnapSyncClientTestSupport",
                                                   // The wire codec on an EmbeddedChannel (ClientWireCodecTests).
                                                   .product(name: "NIOCore", package: "swift-nio"),
                                                   .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                                                   .product(name: "NIOEmbedded", package: "swift-nio")],
                    swiftSettings: upcoming),
        // The token module, and the real `snapsyncd keygen` and `snapsyncd token` binaries.
        .testTarget(name: "SnapSyncAuthTests", dependencies: ["SnapSyncAuth", "SnapSyncTestThreads", .product(name: "JWTKit", package: "jwt-kit")],
                    swiftSettings: upcoming),
        // Black-box tests: the real snapsyncd binary, real sockets, the real client and snapcat.
        .testTarget(name: "SnapSyncIntegrationTests", dependencies: ["SnapSync", "SnapSyncWire", "SnapSyncModel", "SnapSyncTestSupport",
                                                              "SnapSyncClientTestSupport", "SnapSyncAuth", "SnapSyncTestThreads"],
                    swiftSettings: upcoming),
        // What both client test targets use to watch a client: random batches, UIKit's replay of
        // index paths, change and event logs. Not a product.
        .target(name: "SnapSyncClientTestSupport", dependencies: ["SnapSync", "SnapSyncTestSupport"],
                path: "Tests/SnapSyncClientTestSupport", swiftSettings: upcoming),
        // MemoryRoomLog, the cluster's log held in the process, for the store's and the hub's
        // tests: a RoomLog of SnapSyncStore's, kept out of the product. Not a product.
        .target(name: "SnapSyncStoreTestSupport", dependencies: ["SnapSyncStore", "SnapSyncWire"],
                path: "Tests/SnapSyncStoreTestSupport", swiftSettings: upcoming),
        // `.ownThread`: suites of blocking tests run on a thread of their own, so that they
        // cannot hold Swift's cooperative pool (as wide as the cores) from the async tests.
        .target(name: "SnapSyncTestThreads", path: "Tests/SnapSyncTestThreads", swiftSettings: upcoming),
    ],
    swiftLanguageModes: [.v6]
)
