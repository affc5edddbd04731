// snapsyncd: the SnapSync daemon. Options, logging, then SnapSyncServer does the rest
// (see SnapsyncdCommand.swift and Sources/SnapSyncServer/Server.swift).
import ArgumentParser
#if canImport(CMalloc)
    import CMalloc
    import Glibc

    // A room's big buffers (item arena, node array, hash index) grow by doubling, and each growth
    // frees the old block. glibc raises its mmap threshold whenever an mmapped block is freed, so
    // the next ones come from the heap, where freed memory stays resident. Pinned at 128 KiB (which
    // also stops the raising), every block that large is mmapped and returned to the OS when freed.
    // Measured: about 20 fewer resident bytes per item in a 100k-item room (docs/benchmarks.md,
    // Memory). A process-wide choice, so it is made here and not in the server library.
    if mallopt(M_MMAP_THRESHOLD, 128 * 1024) != 1 {
        let warning = "snapsyncd: mallopt(M_MMAP_THRESHOLD) refused; resident memory may be higher than documented\n"
        _ = warning.withCString { write(STDERR_FILENO, $0, strlen($0)) }
    }
#endif

SnapsyncdCommand.main()
