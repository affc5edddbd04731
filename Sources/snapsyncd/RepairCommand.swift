import ArgumentParser
import Logging
import SnapSyncServer
import SnapSyncStore

/// `snapsyncd repair DATA_DIR`: what an operator runs when the daemon refuses to start because
/// the last record of its log is damaged (docs/persistence.md, "Start-up"). The daemon will not
/// drop that record by itself: it was whole on disk, so it may have been acknowledged. This
/// saves it aside and truncates the log before it, as etcd's and redis-check-aof's repairs do.
struct RepairCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "repair",
        abstract: "Save a damaged end of the write-ahead log aside and truncate the log before it.",
        discussion: """
            Recovers the data directory as the daemon's start does, except that a damaged last \
            record of the log (which the start refuses: it may have been acknowledged) is saved \
            in DATA_DIR/damaged-SEGMENT-at-OFFSET and the segment truncated there: the write it \
            held is lost, every write before it kept. Damage that a truncation cannot mend (in \
            the middle of the log, in a checkpoint or the MANIFEST) is reported and nothing is \
            changed: restore from a backup. The daemon must not be running on the directory. \
            Exits 0 when the directory recovers, 3 when it is still damaged.
            """
    )

    @Argument(help: ArgumentHelp("The daemon's data directory (its --data-dir).", valueName: "data-dir"))
    var dataDir: String

    func run() throws {
        LoggingSystem.bootstrap { _ in JournalLogHandler(level: .info) }
        let logger = Logger(label: "snapsyncd-repair")
        // Rooms the log does not write after their checkpoint stay asleep: nothing needs them.
        var options = StoreOptions(directory: dataDir, sleepingRooms: true, keepsResumeBases: true)
        options.repairsDamagedTail = true
        do {
            let (store, rooms) = try DurableStore.open(options: options, logger: logger)
            try store.close(checkpointing: [])
            logger.notice("repair: \(dataDir) recovers: \(rooms.count) rooms in memory, \(store.storedRoomCount) stored; the daemon will start on it")
        } catch {
            logger.critical("repair: \(dataDir) cannot be recovered: \(error)")
            throw ExitCode(Self.damagedExitStatus)
        }
    }

    /// The exit status of a start (or repair) refused because the data directory is damaged
    /// (`StoreError.corrupt` or `.inconsistent`):
    /// the systemd unit does not restart on it (RestartPreventExitStatus=), since every start
    /// would be refused the same way until someone repairs or restores the directory.
    static let damagedExitStatus: Int32 = 3
}
