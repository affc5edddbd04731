// swift-tools-version:6.0
// The libFuzzer harness: a package of its own, so that the root package has no fuzz
// products and its ordinary builds never see `-sanitize=fuzzer`. It depends on the root by path
// and is built only by scripts/fuzz, with `-Xswiftc -sanitize=fuzzer,address` in debug (the
// entry points use `@testable import`, which needs the testability a debug build has).
//
// Sources/Entries holds one function per target that takes the input bytes, parses them and
// checks the laws. The root package compiles Sources/ (Entries and Replay) into its
// SnapSyncFuzzTests target, which replays seeds/, corpus/ and crashes/ on every `swift test`,
// without any sanitizer; Driver/ (libFuzzer's entry points) is built here only.
import PackageDescription

let upcoming: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "SnapSyncFuzz",
    dependencies: [
        .package(name: "SnapSync", path: "../..")
    ],
    targets: [
        .target(
            name: "FuzzEntries",
            dependencies: [
                .product(name: "SnapSyncStore", package: "SnapSync"),
                .product(name: "SnapSyncWire", package: "SnapSync"),
                .product(name: "SnapSyncModel", package: "SnapSync"),
            ],
            path: "Sources/Entries",
            swiftSettings: upcoming
        ),
        // One binary for every target (SNAPSYNC_FUZZ_TARGET picks it): one sanitized link
        // instead of one per target. libFuzzer supplies `main`, hence `-parse-as-library`.
        .executableTarget(
            name: "snapsync-fuzz",
            dependencies: ["FuzzEntries"],
            path: "Driver",
            swiftSettings: upcoming + [.unsafeFlags(["-parse-as-library"])]
        ),
    ],
    swiftLanguageModes: [.v6]
)
