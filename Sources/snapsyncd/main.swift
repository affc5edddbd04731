// snapsyncd: the SnapSync daemon. Options, logging, then SnapSyncServer does the rest
// (see SnapsyncdCommand.swift and Sources/SnapSyncServer/Server.swift).
import ArgumentParser

SnapsyncdCommand.main()
