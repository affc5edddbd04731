#ifndef SNAPSYNC_CNATS_LIBEVENT_H
#define SNAPSYNC_CNATS_LIBEVENT_H
// libnats's libevent adapter, compiled once (shim.c). Imported by
// Sources/SnapSyncLoop/EventLoop+NATS.swift only. Its declarations take `void *` for libnats's and
// libevent's types and return `int` for natsStatus, so that this header includes neither
// library's headers: the module that imports it (the loop's) needs no libnats type, and
// NATSConnection, the only importer of CNats, checks the status it is handed back.

// Why a shim: natsLibevent_Init is *defined* (not declared) in nats/adapters/libevent.h, so
// Swift cannot import it without a second definition in every module that imports the header.
// It calls evthread_use_pthreads() (libevent_pthreads): libnats's own threads (reconnect,
// flusher, timers) call event_add on the daemon's base, so libevent's locking must be on
// before that base is created (event_base_new after this call, without EVENT_BASE_FLAG_NOLOCK).
// Once per process; returns 0, or -1 when libevent could not set its locking up.
int snapsync_nats_libevent_init(void);

// Why a shim: natsOptions_SetEventLoop needs the adapter's four callbacks (natsLibevent_Attach,
// _Read, _Write, _Detach), which only exist in shim.c for the reason above. After this call
// natsConnection_Connect attaches the connection's socket to `base` (a `struct event_base *`):
// its reads and writes run on the thread that runs that loop. `opts` is a `natsOptions *`; the
// result is the natsStatus natsOptions_SetEventLoop returned.
int snapsync_nats_options_use_libevent(void *opts, void *base);

#endif
