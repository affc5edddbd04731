#ifndef SNAPSYNC_CLIBEVENTEXTRA_SHIM_H
#define SNAPSYNC_CLIBEVENTEXTRA_SHIM_H
// libevent's HTTP server (evhttp), for --metrics-listen: only Sources/SnapSyncLoop/
// HTTPEndpoint.swift imports this module. libevent_extra links against libevent_core,
// which CLibevent already links.
// sys/types.h first, as in CLibevent: event2's headers define _GNU_SOURCE, and Glibc's fd_set
// would otherwise differ between Swift's Glibc module and this one.
#include <sys/types.h>
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

// Nothing else is needed: every evhttp function used (evhttp_new, evhttp_bind_socket_with_handle,
// evhttp_set_gencb, evhttp_send_reply, ...) and every constant (HTTP_OK, EVHTTP_REQ_GET) is
// imported by Swift as is.

#endif
