// snapsync-ceiling: the fan-out ceiling with N threads, the reference beside snapsyncd --io-threads.
//
// A broadcaster that does nothing but broadcast: every frame (4-byte big-endian length, then
// the payload) a connection sends is written to every other connection, byte-identical; each new
// connection first gets a 0-length frame (the "lp" protocol of the reference generator,
// fanbench.c -P lp). Its structure is snapsyncd's with --io-threads N and no room, no log, no
// decoding: one thread reads everything; at the end of each pass (one epoll_wait's events) the
// bytes read are one shared, read-only block, and N threads (the reading thread included) each
// write it to their share of the connections, one write per connection per pass, then the pass
// ends when all have. So "snapsyncd at N threads / ceiling at N threads" says how much of the
// machine's limit with that design the daemon reaches. -t 1 is the single-threaded ceiling.
//
//   snapsync-ceiling -p PORT [-t THREADS]
//
// Kept deliberately small: a connection whose socket is full keeps the rest of the block in a
// buffer of its own, written before anything newer (its next pass comes at the latest 1 ms
// later); a connection that fails is closed.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <fcntl.h>

typedef struct {
    int fd, open;
    char *in; size_t inLength, inCapacity;       // an unfinished frame
    char *out; size_t outLength, outCapacity;    // bytes the socket did not take yet
} Connection;

static Connection **connections;
static int connectionCount, connectionCapacity;
static int threadCount = 1;

// The pass being written: the block, the connection that sent all of it (-1: several), and the
// connections to write, claimed 64 at a time.
static char *block; static size_t blockLength; static int blockSource;
static atomic_int nextConnection;
static sem_t *starts; static sem_t finished;

static void fail(const char *what) { perror(what); exit(1); }

static void keep(Connection *c, const char *bytes, size_t count) {
    if (c->outLength + count > c->outCapacity) {
        c->outCapacity = (c->outLength + count) * 2;
        c->out = realloc(c->out, c->outCapacity);
        if (!c->out) fail("realloc");
    }
    memcpy(c->out + c->outLength, bytes, count);
    c->outLength += count;
}

// One connection's write of the pass: what it kept from before, then the block (unless it sent
// it), in one writev.
static void writeTo(Connection *c) {
    if (!c->open) return;
    int withBlock = blockLength > 0 && blockSource != c->fd;
    if (c->outLength == 0 && !withBlock) return;
    struct iovec parts[2]; int count = 0;
    if (c->outLength) parts[count++] = (struct iovec){c->out, c->outLength};
    if (withBlock) parts[count++] = (struct iovec){block, blockLength};
    size_t asked = c->outLength + (withBlock ? blockLength : 0);
    ssize_t written = writev(c->fd, parts, count);
    if (written < 0) {
        if (errno != EAGAIN && errno != EINTR) { c->open = 0; return; }
        written = 0;
    }
    if ((size_t)written == asked) { c->outLength = 0; return; }
    // Keep the unwritten rest, in order.
    size_t fromOut = (size_t)written < c->outLength ? (size_t)written : c->outLength;
    memmove(c->out, c->out + fromOut, c->outLength - fromOut);
    c->outLength -= fromOut;
    if (withBlock) {
        size_t fromBlock = (size_t)written - fromOut;
        keep(c, block + fromBlock, blockLength - fromBlock);
    }
}

static void claim(void) {
    for (;;) {
        int first = atomic_fetch_add_explicit(&nextConnection, 64, memory_order_relaxed);
        if (first >= connectionCount) return;
        int end = first + 64 < connectionCount ? first + 64 : connectionCount;
        for (int i = first; i < end; i++) writeTo(connections[i]);
    }
}

static void *helper(void *argument) {
    sem_t *start = argument;
    for (;;) {
        while (sem_wait(start) != 0) {}
        claim();
        sem_post(&finished);
    }
    return NULL;
}

static void writePass(void) {
    atomic_store(&nextConnection, 0);
    int helpers = threadCount - 1;
    if (helpers > (connectionCount - 1) / 64) helpers = (connectionCount - 1) / 64;
    for (int i = 0; i < helpers; i++) sem_post(&starts[i]);
    claim();
    for (int i = 0; i < helpers; i++) while (sem_wait(&finished) != 0) {}
}

static void appendToBlock(size_t *capacity, const char *bytes, size_t count) {
    if (blockLength + count > *capacity) {
        *capacity = (blockLength + count) * 2;
        block = realloc(block, *capacity);
        if (!block) fail("realloc");
    }
    memcpy(block + blockLength, bytes, count);
    blockLength += count;
}

int main(int argc, char **argv) {
    int port = 7000, option;
    while ((option = getopt(argc, argv, "p:t:")) != -1) {
        if (option == 'p') port = atoi(optarg);
        else if (option == 't') threadCount = atoi(optarg);
        else { fprintf(stderr, "usage: snapsync-ceiling -p PORT [-t THREADS]\n"); return 2; }
    }
    if (threadCount < 1) threadCount = 1;
    signal(SIGPIPE, SIG_IGN);
    struct rlimit files = {65536, 65536};
    setrlimit(RLIMIT_NOFILE, &files);
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), yes = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(listener, (void *)&address, sizeof address) || listen(listener, 4096)) fail("listen");
    int poll = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(poll, EPOLL_CTL_ADD, listener, &event);
    starts = calloc(threadCount, sizeof *starts);
    sem_init(&finished, 0, 0);
    for (int i = 0; i < threadCount - 1; i++) {
        sem_init(&starts[i], 0, 0);
        pthread_t thread;
        if (pthread_create(&thread, NULL, helper, &starts[i])) fail("pthread_create");
    }
    fprintf(stderr, "snapsync-ceiling: listening on 127.0.0.1:%d, %d thread(s)\n", port, threadCount);
    struct epoll_event events[1024];
    size_t blockCapacity = 0;
    char buffer[1 << 16];
    for (;;) {
        int pending = 0;
        for (int i = 0; i < connectionCount; i++) pending |= connections[i]->outLength > 0;
        int ready = epoll_wait(poll, events, 1024, pending ? 1 : -1);
        blockLength = 0;
        blockSource = -2;
        for (int e = 0; e < ready; e++) {
            Connection *c = events[e].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
                    Connection *added = calloc(1, sizeof *added);
                    added->fd = fd; added->open = 1;
                    if (connectionCount == connectionCapacity) {
                        connectionCapacity = connectionCapacity ? connectionCapacity * 2 : 1024;
                        connections = realloc(connections, connectionCapacity * sizeof *connections);
                    }
                    connections[connectionCount++] = added;
                    struct epoll_event watch = {.events = EPOLLIN, .data.ptr = added};
                    epoll_ctl(poll, EPOLL_CTL_ADD, fd, &watch);
                    keep(added, "\0\0\0\0", 4);
                }
                continue;
            }
            ssize_t got = read(c->fd, buffer, sizeof buffer);
            if (got <= 0) {
                if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                c->open = 0;
                epoll_ctl(poll, EPOLL_CTL_DEL, c->fd, NULL);
                continue;
            }
            // Whole frames go to the block; an unfinished one waits in the connection.
            if (c->inLength + (size_t)got > c->inCapacity) {
                c->inCapacity = (c->inLength + got) * 2;
                c->in = realloc(c->in, c->inCapacity);
            }
            memcpy(c->in + c->inLength, buffer, got);
            c->inLength += got;
            size_t whole = 0;
            while (c->inLength - whole >= 4) {
                uint32_t length;
                memcpy(&length, c->in + whole, 4);
                length = ntohl(length);
                if (c->inLength - whole - 4 < length) break;
                whole += 4 + length;
            }
            if (whole) {
                appendToBlock(&blockCapacity, c->in, whole);
                blockSource = blockSource == -2 ? c->fd : -1;
                memmove(c->in, c->in + whole, c->inLength - whole);
                c->inLength -= whole;
            }
        }
        writePass();
    }
}
