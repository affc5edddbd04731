import Foundation

/// The calling thread's name, as Linux keeps it (15 bytes at most), through
/// `/proc/thread-self/comm`: Glibc's module does not export `pthread_setname_np`.
enum ThreadName {
    private static let path = "/proc/thread-self/comm"

    static var current: String {
        get {
            ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").trimmingCharacters(in: .newlines)
        }
        set {
            // Not `write(toFile:atomically:)`: a rename cannot replace a /proc file.
            guard let file = FileHandle(forWritingAtPath: path) else { preconditionFailure("cannot open \(path)") }
            defer { try? file.close() }
            file.write(Data(newValue.utf8.prefix(15)))
        }
    }
}
