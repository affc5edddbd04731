// swift-tools-version:6.0
// snapsync-bench, the benchmarks behind docs/benchmarks.md, in a package of its own beside the
// sources (as swift-collections keeps its benchmarks), so the root package builds only what users
// use. It depends on the root package by path and drives the real snapsyncd binary.
//
//     swift build --package-path Benchmarks -c release
//     Benchmarks/.build/release/snapsync-bench --help
import PackageDescription

let upcoming: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "SnapSyncBenchmarks",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "SnapSync", path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    ],
    targets: [
        // epoll and CPU affinity for the fan-out generator (Linux): see include/CEpoll.h.
        .target(name: "CEpoll"),
        // OpenSSL for the TLS subscribers of `fanout --tls` (BenchTLS.swift).
        .systemLibrary(name: "CBenchOpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        // The fan-out ceiling with N threads (snapsync-ceiling -t N): the reference for
        // snapsyncd --io-threads, driven by the reference generator (docs/benchmarks.md, "IO threads").
        .executableTarget(name: "snapsync-ceiling"),
        .executableTarget(
            name: "snapsync-bench",
            dependencies: [
                .target(name: "CEpoll", condition: .when(platforms: [.linux])),
                .target(name: "CBenchOpenSSL", condition: .when(platforms: [.linux])),
                .product(name: "SnapSyncModel", package: "SnapSync"),
                .product(name: "SnapSyncWire", package: "SnapSync"),
                .product(name: "SnapSyncTestSupport", package: "SnapSync"),
                // The client library, for `client` (ClientBenchmark.swift).
                .product(name: "SnapSync", package: "SnapSync"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: upcoming
        ),
    ],
    swiftLanguageModes: [.v6]
)
