import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The real `snapsyncd` binary, run to completion as a command-line tool (`keygen`, `token`).
/// Found as the integration tests find it: `$SNAPSYNCD`, else next to the running test bundle,
/// else `<repo>/.build/debug/snapsyncd`.
enum SnapsyncdTool {
    struct Run {
        let status: Int32
        let stdout: String
        let stderr: String
    }

    static func run(_ arguments: [String]) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try binary())
        process.arguments = arguments
        let stdout = Pipe()
        let stderr = Pipe()
        process.standardOutput = stdout
        process.standardError = stderr
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // Both are small; stderr is read after stdout's EOF, which comes with the exit.
        let out = stdout.fileHandleForReading.readDataToEndOfFile()
        let err = stderr.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Run(
            status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self), stderr: String(decoding: err, as: UTF8.self))
    }

    static func binary(filePath: String = #filePath) throws -> String {
        var candidates: [String] = []
        if let path = ProcessInfo.processInfo.environment["SNAPSYNCD"], !path.isEmpty {
            candidates.append(path)
        } else {
            var directory = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath().deletingLastPathComponent()
            for _ in 0..<4 {
                candidates.append(directory.appendingPathComponent("snapsyncd").path)
                directory = directory.deletingLastPathComponent()
            }
            // <repo>/Tests/SnapSyncAuthTests/Support/SnapsyncdTool.swift
            var repo = URL(fileURLWithPath: filePath)
            for _ in 0..<4 { repo = repo.deletingLastPathComponent() }
            candidates.append(repo.appendingPathComponent(".build/debug/snapsyncd").path)
        }
        for path in candidates where access(path, X_OK) == 0 { return path }
        throw ToolError("snapsyncd binary not found (tried \(candidates.joined(separator: ", "))): build it (swift build) or set SNAPSYNCD")
    }

    struct ToolError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }
}
