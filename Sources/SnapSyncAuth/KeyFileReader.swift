import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads a whole key file with POSIX calls, so that a failure says what the system said
/// ("No such file or directory", "Permission denied"), which is what an operator acts on.
enum KeyFileReader {
    /// Key files are a few keys; anything larger is not one.
    static let maxBytes = 1 << 20

    struct ReadError: Error, CustomStringConvertible {
        let description: String
    }

    static func contents(of path: String) throws(ReadError) -> Data {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ReadError(description: String(cString: strerror(errno))) }
        defer { close(fd) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw ReadError(description: String(cString: strerror(errno)))
            }
            if n == 0 { return data }
            data.append(contentsOf: buffer[0..<n])
            guard data.count <= maxBytes else { throw ReadError(description: "larger than \(maxBytes) bytes") }
        }
    }
}
