/* A paced train of one frame through an AF_PACKET socket and nothing else: the floor under the
 * native loop's send path (no model, no ring, no log), measured by benchmarks/emulator.py
 * ("send floor" rows) on the same machine and in the same run as the engine.
 *
 * Frame i is sent at t0 + i * gap_ns (busy-waiting for it, as the loop polls before a departure;
 * gap_ns 0: back to back) with the same flags as the loop's send; send_ns[i] = the time inside
 * that send() on CLOCK_MONOTONIC.  Returns 0, or -errno of the first failed send. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <sys/socket.h>
#include <time.h>

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

int tb_send_train(int fd, const uint8_t *frame, int32_t len, int64_t count, int64_t gap_ns,
                  int64_t *send_ns) {
    int64_t t0 = now_ns();
    for (int64_t i = 0; i < count; i++) {
        int64_t due = t0 + i * gap_ns, t;
        while ((t = now_ns()) < due) {}
        ssize_t w;
        do w = send(fd, frame, (size_t)len, MSG_DONTWAIT); while (w < 0 && errno == EINTR);
        if (w < 0) return -errno;
        send_ns[i] = now_ns() - t;
    }
    return 0;
}
