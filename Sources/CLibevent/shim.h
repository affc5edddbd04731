#ifndef SNAPSYNC_CLIBEVENT_SHIM_H
#define SNAPSYNC_CLIBEVENT_SHIM_H
// Why this comes first: event2/event-config.h defines _GNU_SOURCE, and Glibc's fd_set then
// differs between Swift's Glibc module and this one ("import Glibc" fails on fd_set).
#include <sys/types.h>
#include <event2/event.h>
#endif
