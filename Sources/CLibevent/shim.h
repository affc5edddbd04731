#ifndef SNAPSYNC_CLIBEVENT_SHIM_H
#define SNAPSYNC_CLIBEVENT_SHIM_H
// Why this comes first: event2/event-config.h defines _GNU_SOURCE, and Glibc's fd_set then
// differs between Swift's Glibc module and this one ("import Glibc" fails on fd_set).
#include <sys/types.h>
#include <event2/event.h>

// Only what Swift cannot import goes here. Everything else (event_new, event_add, EV_READ, ...)
// is imported as is and wrapped in Sources/SnapSyncLoop/EventLoop.swift, this module's only
// importer.

// Why: evtimer_new is a function-like macro (event.h), and Swift imports no function-like
// macros. Same call as the macro: event_new(base, -1, 0, cb, arg).
static inline struct event *snapsync_evtimer_new(struct event_base *base, event_callback_fn cb, void *arg) {
    return evtimer_new(base, cb, arg);
}

// Why: evsignal_new is a function-like macro (event.h). Same call as the macro:
// event_new(base, signum, EV_SIGNAL|EV_PERSIST, cb, arg).
static inline struct event *snapsync_evsignal_new(struct event_base *base, int signum, event_callback_fn cb, void *arg) {
    return evsignal_new(base, signum, cb, arg);
}

#endif
