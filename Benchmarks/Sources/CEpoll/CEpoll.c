// See include/CEpoll.h for why these few calls go through C.
#define _GNU_SOURCE
#include "CEpoll.h"

#ifdef __linux__
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define CEPOLL_HAVE_PWAIT2 1
#endif

int cepoll_wait_ns(int epfd, struct epoll_event *events, int max_events, uint64_t timeout_ns) {
#ifdef CEPOLL_HAVE_PWAIT2
    // Cleared the first time the kernel answers ENOSYS (older than 5.11), so each later wait is
    // one system call.
    static atomic_int kernel_has_pwait2 = 1;
    if (atomic_load_explicit(&kernel_has_pwait2, memory_order_relaxed)) {
        struct timespec timeout = {
            .tv_sec = (time_t)(timeout_ns / 1000000000u),
            .tv_nsec = (long)(timeout_ns % 1000000000u),
        };
        int ready = epoll_pwait2(epfd, events, max_events, &timeout, NULL);
        if (ready >= 0 || errno != ENOSYS) return ready;
        atomic_store_explicit(&kernel_has_pwait2, 0, memory_order_relaxed);
    }
#endif
    return epoll_wait(epfd, events, max_events, (int)((timeout_ns + 999999u) / 1000000u));
}

int cepoll_pin_to_cpu(pid_t pid, int cpu) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
        errno = EINVAL;
        return -1;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(pid, sizeof set, &set);
}

int cepoll_unpin(pid_t pid) {
    cpu_set_t set;
    memset(&set, 0xff, sizeof set);  // the kernel keeps the online ones
    return sched_setaffinity(pid, sizeof set, &set);
}
#endif
