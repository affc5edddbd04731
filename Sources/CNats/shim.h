#ifndef SNAPSYNC_CNATS_SHIM_H
#define SNAPSYNC_CNATS_SHIM_H
// libnats (Debian: libnats-dev), the C client of NATS and JetStream, for cluster mode.
// Imported by Sources/SnapSyncCluster/NATSConnection.swift only.
//
// Everything in nats.h imports into Swift as is (functions, the option structs, the
// jsPubAckHandler function-pointer typedef). The one thing that does not, the libevent adapter
// (nats/adapters/libevent.h, a header of non-static function *definitions*), must never be
// included here: a module header is compiled into every importer's module, which would define
// natsLibevent_Init & co. more than once. It lives in the CNatsLibevent target's one C file.
#include <nats/nats.h>

#endif
