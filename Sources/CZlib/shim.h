#ifndef SNAPSYNC_CZLIB_SHIM_H
#define SNAPSYNC_CZLIB_SHIM_H
// zlib, for crc32() only: the checksum of every write-ahead-log and checkpoint record
// (Sources/SnapSyncStore/Checksum.swift says why zlib's CRC-32).
// sys/types.h first, as in CLibevent, so that Glibc's types are seen the same way by both.
#include <sys/types.h>
#include <zlib.h>
#endif
