// The only translation unit that includes libnats's libevent adapter: the header defines
// non-static functions, so a second inclusion would be a duplicate symbol at link time.
#include <nats/adapters/libevent.h>

#include "CNatsLibevent.h"

int snapsync_nats_libevent_init(void) {
    // natsLibevent_Init returns nothing; the evthread call it makes does return a status, so
    // ask libevent again (idempotent) to report a failure instead of running unlocked.
    natsLibevent_Init();
    return evthread_use_pthreads();
}

int snapsync_nats_options_use_libevent(void *opts, void *base) {
    return (int)natsOptions_SetEventLoop((natsOptions *)opts, base, natsLibevent_Attach, natsLibevent_Read,
                                         natsLibevent_Write, natsLibevent_Detach);
}
