// The data directory: its default path, its creation, and the start-up free-space check.

import Testing
import SnapSyncTestSupport
import SnapSyncTestThreads
import Logging
import SnapSyncStore
#if canImport(Glibc)
    import Glibc
#endif

@Suite(.unitTests) struct DataDirectoryTests {
    @Test func freeSpaceIsMeasured() throws {
        let free = try #require(DataDirectory.freeBytes("/tmp"))
        #expect(free > 0)
        #expect(DataDirectory.freeBytes("/no/such/directory") == nil)
    }

    /// Less free space than --min-free-bytes refuses; less than one segment only warns.
    @Test func lowDiskRefusesOnlyBelowTheMinimum() throws {
        let free = try #require(DataDirectory.freeBytes("/tmp"))
        let lines = LogLines()
        #expect {
            try DataDirectory.checkFreeSpace("/tmp", minimum: free + (1 << 40), warnBelow: 0, logger: lines.logger)
        } throws: { error in
            "\(error)".contains("less than --min-free-bytes")
        }
        try DataDirectory.checkFreeSpace("/tmp", minimum: 0, warnBelow: free + (1 << 40), logger: lines.logger)
        #expect(lines.contains("less than one log segment"), "\(lines.all)")
        let quiet = LogLines()
        try DataDirectory.checkFreeSpace("/tmp", minimum: 1, warnBelow: 1, logger: quiet.logger)
        #expect(quiet.all.isEmpty)
    }

    @Test func dataDirectoryDefaultsToSystemdsStateDirectory() {
        #expect(DataDirectory.defaultPath(stateDirectory: nil) == "./data")
        #expect(DataDirectory.defaultPath(stateDirectory: "/var/lib/snapsyncd") == "/var/lib/snapsyncd")
        #expect(DataDirectory.defaultPath(stateDirectory: "/var/lib/a:/var/lib/b") == "/var/lib/a")
        #expect(DataDirectory.defaultPath(stateDirectory: "") == "./data")
    }

    @Test func dataDirectoryIsCreatedWithItsParents() throws {
        var template = Array("/tmp/snapsync-datadir-XXXXXX".utf8CString)
        let base = String(cString: template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!)! })
        defer { removeTree(base) }
        let path = base + "/a/b/c"
        try DataDirectory.prepare(path)
        try DataDirectory.prepare(path)  // already there: fine
        var info = stat()
        #expect(stat(path, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR)
        // A file in the way is refused.
        let file = base + "/file"
        close(open(file, O_CREAT | O_WRONLY, 0o600))
        #expect {
            try DataDirectory.prepare(file)
        } throws: { error in
            guard case .badDirectory(let path, let reason) = error as? StoreError else { return false }
            return path == file && reason == "it is not a directory"
        }
    }
}
