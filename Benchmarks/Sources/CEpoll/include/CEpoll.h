// The Linux calls the fan-out load generator needs that Swift's Glibc module does not give it:
// <sys/epoll.h> is not in SwiftGlibc.h, so this header brings it in whole (epoll_create1,
// epoll_ctl, epoll_wait and struct epoll_event, packed on x86-64, import as they are).
// Functions are declared here only where Swift cannot call the C directly: they are defined in
// CEpoll.c, which is compiled with _GNU_SOURCE (a module cannot turn it on for <sched.h>
// after Glibc has imported it) and uses macros (CPU_SET) and a call glibc may lack.
#ifndef SNAPSYNC_CEPOLL_H
#define SNAPSYNC_CEPOLL_H

#ifdef __linux__
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/types.h>

/// epoll_wait with a nanosecond timeout: epoll_pwait2 (glibc >= 2.35, Linux >= 5.11), so an
/// open-loop publisher neither oversleeps by a millisecond nor spins; where either is missing,
/// epoll_wait with the timeout rounded up to a millisecond. Returns what they return.
int cepoll_wait_ns(int epfd, struct epoll_event *events, int max_events, uint64_t timeout_ns);

/// sched_setaffinity(pid, {cpu}): pins a thread (0: the caller) to one CPU. 0, or -1 and errno
/// (EINVAL when the CPU is out of range or offline).
int cepoll_pin_to_cpu(pid_t pid, int cpu);

/// sched_setaffinity(pid, every CPU): undoes cepoll_pin_to_cpu.
int cepoll_unpin(pid_t pid);
#endif

#endif
