// libFuzzer's entry points (https://llvm.org/docs/LibFuzzer.html): libFuzzer owns `main`, so
// this module is compiled with `-parse-as-library`. The target is chosen once, by
// SNAPSYNC_FUZZ_TARGET (scripts/fuzz sets it), so that one sanitized binary serves them all.
import FuzzEntries

#if canImport(Glibc)
    import Glibc
#endif

nonisolated(unsafe) var target: FuzzTarget?

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>) -> CInt {
    let name = getenv("SNAPSYNC_FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let chosen = FuzzTarget(rawValue: name) else {
        let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
        report("snapsync-fuzz: set SNAPSYNC_FUZZ_TARGET to one of: \(names) (got \"\(name)\")")
        exit(2)
    }
    target = chosen
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        try target!.run(input)
    } catch {
        // A broken law is a bug like a crash: abort, so that libFuzzer saves the input.
        report("snapsync-fuzz: \(target!.rawValue): \(error)")
        abort()
    }
    return 0
}

/// One line to stderr, unbuffered (the process aborts right after).
func report(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
