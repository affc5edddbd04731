#if canImport(Glibc)
    internal import Glibc
#endif

/// The store's work that runs on `BackgroundIO`'s thread: everything at a segment switch and
/// after it that would otherwise stall the event loop (measured on this machine's ext4 disk: an
/// fdatasync of a full 64 MiB segment 37-250 ms, the unlink of one 20-28 ms, creating one with
/// its preallocation and fsyncs 7-12 ms). What is done, and when, is the loop's decision; a job
/// only carries it out. File descriptors travel as plain `Int32`s: a job that is handed one
/// (`closeSegment`) owns it from then on, a job that borrows one (`syncData`) relies on the
/// loop not closing it before the job has finished (the loop only ever closes a segment
/// through a later `closeSegment`, which the FIFO order runs after).
enum BackgroundJob: Sendable, CustomStringConvertible {
    /// Creates segment `sequence` as `wal-….log.tmp` (header, `preallocate` bytes reserved,
    /// fsync) and gives back its open descriptor. A crash leaves a `.tmp` that start-up removes.
    case prepareSegment(directory: String, sequence: UInt64, preallocate: Int)
    /// Renames the prepared segment to its real name and fsyncs the directory. A crash after it
    /// leaves an empty last segment, which recovery reads as an empty log.
    case installSegment(directory: String, sequence: UInt64)
    /// fdatasyncs a closed segment (already trimmed to its data by the loop) and closes `fd`
    /// (owned).
    case closeSegment(fd: Int32, path: String)
    /// fdatasync of the active segment (`--fsync everysec`); `fd` is borrowed.
    case syncData(fd: Int32, path: String)
    /// Unlinks `paths` (already missing is fine) and fsyncs `directory`.
    case removeFiles(paths: [String], directory: String)
    /// Writes `bytes` as the MANIFEST (a temporary file, fsync, rename, fsync of the directory),
    /// the one listing the segments up to `segmentsEnd`, encoded by the loop at a switch.
    case writeManifest(bytes: [UInt8], directory: String, segmentsEnd: UInt64)

    var description: String {
        switch self {
        case .prepareSegment(_, let sequence, _): return "prepare \(LogSegment.fileName(sequence))"
        case .installSegment(_, let sequence): return "install \(LogSegment.fileName(sequence))"
        case .closeSegment(_, let path): return "close \(path)"
        case .syncData(_, let path): return "fdatasync \(path)"
        case .removeFiles(let paths, _): return "remove \(paths.count) file(s)"
        case .writeManifest: return "write \(Manifest.fileName)"
        }
    }

    /// Does the work, on the background thread (or inline).
    func perform() throws(StoreError) -> BackgroundOutcome {
        switch self {
        case .prepareSegment(let directory, let sequence, let preallocate):
            let (file, allocated) = try LogSegmentWriter.createTemporary(
                directory: directory, sequence: sequence,
                preallocate: preallocate)
            return .prepared(fd: file.release(), allocated: allocated)
        case .installSegment(let directory, let sequence):
            try LogSegmentWriter.install(directory: directory, sequence: sequence)
            return .done
        case .closeSegment(let fd, let path):
            let file = PosixFile(adopting: fd, path: path)
            defer { file.close() }
            try file.syncData()
            return .done
        case .syncData(let fd, let path):
            let file = PosixFile(adopting: fd, path: path)
            defer { _ = file.release() }
            try file.syncData()
            return .done
        case .removeFiles(let paths, let directory):
            for path in paths { try Directory.remove(path) }
            try Directory.syncEntries(directory)
            return .done
        case .writeManifest(let bytes, let directory, _):
            try DurableFile.writeWhole(bytes, directory: directory, name: Manifest.fileName)
            return .done
        }
    }

    /// Releases what the job owns when it will not run (an injected fault).
    func abandon() {
        if case .closeSegment(let fd, let path) = self { PosixFile(adopting: fd, path: path).close() }
    }
}

/// What a finished job gives back.
enum BackgroundOutcome: Sendable {
    case done
    /// A prepared segment: its open descriptor (now the loop's) and how far it is allocated.
    case prepared(fd: Int32, allocated: Int)
}
