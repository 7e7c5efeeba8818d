/* The native I/O loop: the C counterpart of testbed/emulator/forwarder.py's Forwarder.run.
 *
 * Python (forwarder.py) opens the AF_PACKET sockets and the frame logs (header written), then
 * calls tb_run, which returns when SIGTERM or SIGINT arrives (taken from a signalfd while they
 * are blocked in the calling thread).  The origin of link schedules may be asked for from another
 * thread while it runs (tb_request_origin, which also wakes it through an eventfd): the loop
 * applies it at its next iteration (tb_apply_origin_request); schedule changes are drained after
 * tb_run returns (tb_drain_changes with the stop time: a time-tied record carries its own moment).
 *
 * Sending: every iteration sends every frame due, those due together in one sendmmsg (send_due).
 * Waiting: epoll_pwait2 blocks when nothing is pending, else waits with a nanosecond timeout (an
 * hrtimer, timer slack 1 ns; one system call per wait) until spin_ns before the next departure;
 * the last spin_ns are polled (timeout 0) so the timer's wake-up latency does not delay the
 * departure.  The loop's busy time (running, not blocked in epoll_pwait2) is held to
 * busy_share_pct % of elapsed time by a budget that refills at that share (at most BUSY_BURST_NS
 * saved up) and that running spends.  Why: a SCHED_FIFO loop polling back-to-back departures
 * runs for 950 ms of a second and the kernel's RT throttling then stops it for 50 ms (measured:
 * 46 ms stalls at 333 Mbit/s); a loop sharing its CPU with the endpoints must leave them some.
 * What happens when it is spent depends on rc->demote:
 *   0 (no CPU of its own): the loop sleeps until the timer fires, polling nothing;
 *   1 (a CPU of its own, started SCHED_FIFO): it demotes itself to SCHED_OTHER at nice -20 and
 *     goes on polling; its time there is not real-time runtime, so the kernel never throttles
 *     it.  It returns to SCHED_FIFO once the budget has refilled by RT_RESUME_NS.  Busy time
 *     spent while demoted is not charged (the budget bounds real-time runtime only).
 * Busy time is wall time outside epoll_pwait2, which is at least the CPU time the kernel charges.
 * Reading: from the socket's memory-mapped receive ring (PACKET_RX_RING, TPACKET_V2) when the
 * caller set one up (ring_frame_nr > 0; forwarder.open_socket does, before bind), else recvmmsg
 * in batches of READ_BATCH.  With a ring the kernel copies each frame in the sender's context,
 * and waiting for a departure polls the rings' status words instead of calling epoll_pwait2
 * (one system call per SIGNAL_EVERY polls, to see a stop signal).  A frame longer than a ring
 * slot arrives truncated: it is counted as a send error, never forwarded short.
 * Arrival = the kernel's receive timestamp (CLOCK_REALTIME,
 * converted with the realtime − monotonic offset read per batch), clamped to be nondecreasing
 * and not after the read; the model's verdict at once.  A burst is read at most MAX_READ frames
 * at a time and, once MIN_READ were read, reading stops when a departure is due.
 * Stalls: times the loop did not run although it wanted to: two readings of its clock at
 * least stall_ns apart while it was not sleeping on purpose (no code path of the loop between
 * two readings takes more than a few tens of µs: reading reads the clock every READ_BATCH
 * frames, sending around every call), a timed wait that returned at least stall_ns after its
 * timeout with nothing to read, or a wait that returned at least stall_ns after the arrival of
 * the first frame it returned for.  The CPU was taken away (the hypervisor, an interrupt, a
 * task of higher priority, a system call that blocked); the summary attributes the late frames
 * around them to the machine rather than to the engine, unless the kernel held the real-time
 * loop back (see forwarder.Forwarder._summary).
 * Records are the linklog RECORD layout, appended to the log fd in chunks of LOG_CHUNK by a
 * writer thread (log_writer, below), never by the loop: a write() to the file system blocks
 * for milliseconds now and then (measured: up to 4.8 ms on ext4 during writeback), which would
 * stop the loop.  The writer runs SCHED_OTHER on the CPUs other than the loop's. */
#define _GNU_SOURCE
#include "tbcore.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/if_packet.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_BATCH 32
#define SEND_BATCH 8    /* at most this many frames due together go out in one sendmmsg (send_due) */
#define MAX_READ 256
#define MIN_READ 16
#define MAX_FRAME 65536
#define SMALL 2048
#define LOG_CHUNK 8192
#define LOG_QUEUE 256   /* full chunks handed to the writer thread and not yet written */
#define BUSY_BURST_NS 5000000LL
#define RT_RESUME_NS 1000000LL
#define SIGNAL_EVERY 4096
#define SIGNAL_ID 1000001u  /* epoll data of the signalfd (directions are 0..n-1) */
#define WAKE_ID 1000002u    /* epoll data of the eventfd tb_request_origin writes */

enum { V_DELIVERED = 0, V_LOSS, V_QUEUE, V_SEND_ERROR, V_PENDING_AT_EXIT, V_OUTAGE, V_EVENT };  /* linklog */

typedef struct __attribute__((packed)) {
    int64_t t_arrival, t_read, t_sched, t_sent;
    uint32_t src, dst, seq;
    uint16_t ethertype, ip_id, sport, dport;
    uint8_t proto;
    uint16_t length;
    uint8_t verdict;
} tb_rec;
_Static_assert(sizeof(tb_rec) == 56, "record layout must match linklog.RECORD");

typedef struct { int32_t in_fd, out_fd, log_fd, ring_frame_size, ring_frame_nr, pad; } tb_io_cfg;

typedef struct {
    int64_t late_ns, spin_ns, early_ns;
    int64_t stall_ns;   /* a gap this long in the loop is a stall (see below); 0: none looked for */
    int64_t *stalls;    /* room for stall_cap (start, end, run-queue wait, demoted) quadruples */
    int64_t stall_cap;
    int64_t busy_share_pct;  /* % of elapsed time the loop may be busy (see above) */
    int64_t demote;     /* 1: over budget, demote to SCHED_OTHER and poll on; 0: sleep */
    int64_t slow_send_ns;  /* a send/sendmmsg call this long is a slow send; 0: none counted */
} tb_run_cfg;

typedef struct {  /* per-direction results of the run */
    int64_t send_errors, records, flush_max_ns, oom_drops;
} tb_io_stats;

typedef struct {
    int64_t iterations, timer_wakeups;
    int64_t poll_idle_ns;  /* time spent polling before a departure with nothing to read: the
                            * iterations that polled and neither sent nor read, each from its
                            * start to the next one's (gaps of stall_ns or more left out) */
    int64_t send_ns, read_ns;  /* time inside send() (the receiver's kernel work included) / drain */
    int64_t stall_count;       /* stalls found; the first stall_cap are in tb_run_cfg.stalls */
    int64_t demotions, demoted_ns;  /* switches to SCHED_OTHER, time spent there */
    int64_t log_waits;  /* times the loop waited for the log writer (LOG_QUEUE chunks unwritten) */
    int64_t send_calls; /* send/sendmmsg calls (frames sent in fewer calls: batches, see send_due) */
    int64_t slow_sends, slow_send_ns, send_max_ns;  /* calls of slow_send_ns or more, their time,
                                                     * the longest call */
} tb_run_stats;

/* what the loop's helpers need of the run: its configuration, results and scheduling state */
typedef struct tb_loop {
    const tb_run_cfg *rc;
    tb_run_stats *out;
    int demoted;           /* running SCHED_OTHER (see the top of this file) */
    int schedstat_fd;      /* /proc/thread-self/schedstat */
    int64_t run_delay_seen;
} tb_loop;

typedef struct { int64_t t; uint64_t n; uint8_t *buf; tb_rec rec; } pend;

typedef struct {
    tb_io_cfg io;
    uint8_t *ring; size_t ring_len; uint32_t head;  /* PACKET_RX_RING, or NULL */
    pend *heap; int64_t heap_len, heap_cap; uint64_t n;
    pend *fifo; int64_t fifo_head, fifo_len, fifo_cap;  /* ring; see pend_push */
    tb_rec *log; int64_t log_len;
    struct log_writer *writer;
    int64_t last_arrival;
    int64_t first_arrival;  /* earliest arrival taken since the loop last reset it */
    tb_io_stats st;
} io_dir;

static uint8_t **free_small; static int64_t free_len, free_cap;

static inline int64_t mono_raw(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The loop thread's clock: while a run is watched, two of its readings stall_ns or more apart
 * are a stall (the loop did nothing in between but run its own short code paths, so it did
 * not run); the loop resets `clock_seen` after sleeping on purpose.  Other threads use mono_raw. */
static tb_loop *watched;
static int64_t clock_seen;
static void stall(tb_loop *L, int64_t from, int64_t to);
static inline int64_t mono(void) {
    int64_t t = mono_raw();
    if (watched && t - clock_seen >= watched->rc->stall_ns) stall(watched, clock_seen, t);
    clock_seen = t;
    return t;
}
static inline int64_t real(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint8_t *buf_get(uint32_t len) {
    if (len > SMALL) return malloc(len);
    if (free_len) return free_small[--free_len];
    return malloc(SMALL);
}
static void buf_put(uint8_t *b, uint32_t len) {
    if (len > SMALL) { free(b); return; }
    if (free_len == free_cap) {
        int64_t cap = free_cap ? free_cap * 2 : 4096;
        uint8_t **f = realloc(free_small, (size_t)cap * sizeof *f);
        if (!f) { free(b); return; }
        free_small = f; free_cap = cap;
    }
    free_small[free_len++] = b;
}

static inline uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* linklog.parse_key */
void tb_parse_key(const uint8_t *f, uint32_t len, tb_rec *r) {
    r->src = r->dst = r->seq = 0;
    r->ethertype = r->ip_id = r->sport = r->dport = 0;
    r->proto = 0;
    if (len < 34) {
        if (len >= 14) r->ethertype = be16(f + 12);
        return;
    }
    r->ethertype = be16(f + 12);
    if (r->ethertype != 0x0800) return;
    uint32_t l4 = 14 + (f[14] & 15u) * 4;
    r->ip_id = be16(f + 18);
    r->proto = f[23];
    r->src = be32(f + 26);
    r->dst = be32(f + 30);
    if (be16(f + 20) & 0x1FFF) return;
    if (r->proto == 6 && len >= l4 + 8) {
        r->sport = be16(f + l4); r->dport = be16(f + l4 + 2); r->seq = be32(f + l4 + 4);
    } else if (r->proto == 17 && len >= l4 + 4) {
        r->sport = be16(f + l4); r->dport = be16(f + l4 + 2);
    }
}

/* The log writer: the loop hands it full chunks through a single-producer single-consumer
 * queue (the loop advances head, the writer tail) and wakes it with an eventfd; the writer
 * write()s each chunk to its direction's log fd, in order, and gives the buffer back through a
 * second such queue (spare: the writer advances head, the loop tail). */
typedef struct { int fd; tb_rec *buf; int64_t n; int64_t *flush_max_ns; } log_chunk;

typedef struct log_writer {
    log_chunk q[LOG_QUEUE];
    uint64_t head, tail;
    tb_rec *spare[LOG_QUEUE];
    uint64_t spare_head, spare_tail;
    int efd, stop;
    int64_t waits;  /* times the loop found the queue full and waited for the writer */
    pthread_t thread;
} log_writer;

static void *log_writer_main(void *arg) {
    log_writer *w = arg;
    for (;;) {
        uint64_t head = __atomic_load_n(&w->head, __ATOMIC_ACQUIRE);
        for (uint64_t t = w->tail; t < head; t++) {
            log_chunk *c = &w->q[t % LOG_QUEUE];
            int64_t t0 = mono_raw();
            const char *p = (const char *)c->buf;
            size_t left = (size_t)c->n * sizeof(tb_rec);
            while (left) {
                ssize_t n = write(c->fd, p, left);
                if (n < 0) { if (errno == EINTR) continue; break; }
                p += n; left -= (size_t)n;
            }
            int64_t dt = mono_raw() - t0;
            if (dt > *c->flush_max_ns) *c->flush_max_ns = dt;
            uint64_t sh = w->spare_head;  /* never full: buffers in spare + q <= LOG_QUEUE */
            w->spare[sh % LOG_QUEUE] = c->buf;
            __atomic_store_n(&w->spare_head, sh + 1, __ATOMIC_RELEASE);
            __atomic_store_n(&w->tail, t + 1, __ATOMIC_RELEASE);
        }
        if (__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)
            && w->tail == __atomic_load_n(&w->head, __ATOMIC_ACQUIRE))
            return NULL;
        uint64_t n;
        if (__atomic_load_n(&w->head, __ATOMIC_ACQUIRE) == w->tail)
            while (read(w->efd, &n, sizeof n) < 0 && errno == EINTR) {}
    }
}

static void log_wake(log_writer *w) {
    uint64_t one = 1;
    while (write(w->efd, &one, sizeof one) < 0 && errno == EINTR) {}
}

/* Start the writer on every CPU but those the loop is pinned to (all of them if it is not). */
static int log_writer_start(log_writer *w) {
    w->efd = eventfd(0, EFD_CLOEXEC);
    if (w->efd < 0) return -errno;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);  /* not the loop's SCHED_FIFO */
    pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
    struct sched_param none = {0};
    pthread_attr_setschedparam(&attr, &none);
    cpu_set_t loop_cpus, cpus;
    long n_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (sched_getaffinity(0, sizeof loop_cpus, &loop_cpus) == 0 && CPU_COUNT(&loop_cpus) < n_cpus) {
        CPU_ZERO(&cpus);
        for (long i = 0; i < n_cpus && i < CPU_SETSIZE; i++)
            if (!CPU_ISSET(i, &loop_cpus)) CPU_SET(i, &cpus);
        pthread_attr_setaffinity_np(&attr, sizeof cpus, &cpus);
    }
    int r = pthread_create(&w->thread, &attr, log_writer_main, w);
    pthread_attr_destroy(&attr);
    if (r) { close(w->efd); w->efd = -1; return -r; }
    return 0;
}

/* Write what is queued, stop the writer and free its buffers. */
static void log_writer_stop(log_writer *w) {
    __atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
    log_wake(w);
    pthread_join(w->thread, NULL);
    close(w->efd);
    for (uint64_t t = w->spare_tail; t < w->spare_head; t++) free(w->spare[t % LOG_QUEUE]);
}

/* Hand the direction's chunk to the writer and take an empty one (a spare, else a new one; the
 * loop waits only if LOG_QUEUE chunks are still unwritten). */
static void log_flush(io_dir *d) {
    struct log_writer *w = d->writer;
    if (!d->log_len) return;
    uint64_t h = w->head;
    if (h - __atomic_load_n(&w->tail, __ATOMIC_ACQUIRE) == LOG_QUEUE) {
        w->waits++;
        while (h - __atomic_load_n(&w->tail, __ATOMIC_ACQUIRE) == LOG_QUEUE) sched_yield();
    }
    w->q[h % LOG_QUEUE] = (log_chunk){d->io.log_fd, d->log, d->log_len, &d->st.flush_max_ns};
    __atomic_store_n(&w->head, h + 1, __ATOMIC_RELEASE);
    log_wake(w);
    d->st.records += d->log_len;
    d->log_len = 0;
    d->log = NULL;
    while (!d->log) {  /* out of memory: wait for the writer to give one back */
        if (w->spare_tail < __atomic_load_n(&w->spare_head, __ATOMIC_ACQUIRE))
            d->log = w->spare[w->spare_tail++ % LOG_QUEUE];
        else if (!(d->log = malloc(LOG_CHUNK * sizeof(tb_rec))))
            sched_yield();
    }
}

static inline void log_add(io_dir *d, const tb_rec *r) {
    d->log[d->log_len++] = *r;
    if (d->log_len == LOG_CHUNK) log_flush(d);
}

/* Frames waiting to leave, in (t, n) order (n: order taken).  A FIFO ring holds every frame
 * due no earlier than the last one it took, which on a link that does not reorder is every
 * frame, in O(1); a binary heap holds the others (jitter with reordering); the next departure
 * is the earlier of their heads.  Both are in (t, n) order, so the merge is too. */
static inline int pend_less(const pend *a, const pend *b) { return a->t < b->t || (a->t == b->t && a->n < b->n); }
static int heap_push(io_dir *d, const pend *p) {
    if (d->heap_len == d->heap_cap) {
        int64_t cap = d->heap_cap ? d->heap_cap * 2 : 4096;
        pend *h = realloc(d->heap, (size_t)cap * sizeof *h);
        if (!h) return -1;
        d->heap = h; d->heap_cap = cap;
    }
    int64_t i = d->heap_len++;
    while (i > 0) {
        int64_t parent = (i - 1) / 2;
        if (!pend_less(p, &d->heap[parent])) break;
        d->heap[i] = d->heap[parent];
        i = parent;
    }
    d->heap[i] = *p;
    return 0;
}
static void heap_pop(io_dir *d, pend *out) {
    *out = d->heap[0];
    pend last = d->heap[--d->heap_len];
    int64_t i = 0, n = d->heap_len;
    for (;;) {
        int64_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pend_less(&d->heap[c + 1], &d->heap[c])) c++;
        if (!pend_less(&d->heap[c], &last)) break;
        d->heap[i] = d->heap[c];
        i = c;
    }
    if (n) d->heap[i] = last;
}
static int pend_push(io_dir *d, const pend *p) {
    int64_t mask = d->fifo_cap - 1;  /* the capacity is a power of 2 */
    if (d->fifo_len && p->t < d->fifo[(d->fifo_head + d->fifo_len - 1) & mask].t)
        return heap_push(d, p);
    if (d->fifo_len == d->fifo_cap) {  /* grow, the ring unwrapped to start at 0 */
        int64_t cap = d->fifo_cap ? d->fifo_cap * 2 : 4096;
        pend *q = malloc((size_t)cap * sizeof *q);
        if (!q) return -1;
        for (int64_t i = 0; i < d->fifo_len; i++) q[i] = d->fifo[(d->fifo_head + i) & mask];
        free(d->fifo);
        d->fifo = q; d->fifo_cap = cap; d->fifo_head = 0;
    }
    d->fifo[(d->fifo_head + d->fifo_len++) & (d->fifo_cap - 1)] = *p;
    return 0;
}
/* the next frame to leave, or NULL */
static inline const pend *pend_next(const io_dir *d) {
    const pend *f = d->fifo_len ? &d->fifo[d->fifo_head] : NULL;
    if (!d->heap_len) return f;
    return f && pend_less(f, &d->heap[0]) ? f : &d->heap[0];
}
/* take `next` (what pend_next returned) out */
static void pend_pop(io_dir *d, const pend *next, pend *out) {
    if (d->heap_len && next == &d->heap[0]) { heap_pop(d, out); return; }
    *out = d->fifo[d->fifo_head];
    d->fifo_head = (d->fifo_head + 1) & (d->fifo_cap - 1);
    d->fifo_len--;
}

/* this thread's run-queue wait so far (ns, /proc/thread-self/schedstat), -1 if unreadable */
static int64_t run_delay(const tb_loop *L) {
    char buf[128];
    ssize_t n = L->schedstat_fd < 0 ? -1 : pread(L->schedstat_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *p = strchr(buf, ' ');
    return p ? strtoll(p + 1, NULL, 10) : -1;
}

/* a stall [from, to], listed as (from, to, run-queue wait, demoted): the run-queue wait the
 * thread accrued since the last stall is about the stall's length when the kernel held the
 * runnable loop back (RT throttling, a task of higher priority, or — demoted = 1, the loop
 * running SCHED_OTHER — any task the scheduler preferred), about 0 when the whole vCPU did not
 * run (the hypervisor) */
static void stall(tb_loop *L, int64_t from, int64_t to) {
    if (L->rc->stall_ns <= 0) return;
    int64_t rd = run_delay(L), waited = rd < 0 ? -1 : rd - L->run_delay_seen;
    if (rd >= 0) L->run_delay_seen = rd;
    int64_t i = L->out->stall_count++;
    if (i < L->rc->stall_cap) {
        int64_t *s = L->rc->stalls + 4 * i;
        s[0] = from; s[1] = to; s[2] = waited; s[3] = L->demoted;
    }
}

/* hand mm[0..n) to the kernel with the loop's flags: send() for one frame, sendmmsg for more;
 * returns how many frames it took (>= 1), or -1 (errno set) when it refused the first */
static int send_frames(int fd, struct mmsghdr *mm, int n) {
    for (;;) {
        const struct iovec *v = mm->msg_hdr.msg_iov;
        int r = n == 1 ? (send(fd, v->iov_base, v->iov_len, MSG_DONTWAIT) < 0 ? -1 : 1)
                       : sendmmsg(fd, mm, (unsigned)n, MSG_DONTWAIT);
        if (r > 0) return r;
        if (errno != EINTR) return -1;
    }
}

/* send every frame due by now; returns the next departure or INT64_MAX.  One due frame goes out
 * with send() (t_sent read just before it); frames due together (the loop fell behind: a
 * stall, or departures closer together than one send takes) go out SEND_BATCH at a time in one
 * sendmmsg.  Why: on a veth a call into the kernel may have to interrupt the receiving CPU (an
 * RPS IPI, 11-12 us per call on the VM of benchmarks/emulator.py's "send floor" when that CPU
 * is busy), and a batch pays it once, so the loop catches up on a run of back-to-back ACKs (1.6
 * us apart at 333 Mbit/s) instead of falling further behind.  The price is timing precision:
 * the first frame of a call has t_sent read just before it, the others just after it (an upper
 * bound: the kernel took them somewhere in between).  Time inside the calls is counted
 * (send_ns); one that blocked is a stall of the watched clock. */
static int64_t send_due(tb_loop *L, io_dir *d, int64_t now) {
    pend p[SEND_BATCH];
    struct mmsghdr mm[SEND_BATCH];
    struct iovec iov[SEND_BATCH];
    const pend *next;
    while ((next = pend_next(d)) && next->t <= now) {
        int n = 0;
        while (n < SEND_BATCH && (next = pend_next(d)) && next->t <= now) {
            pend_pop(d, next, &p[n]);
            iov[n] = (struct iovec){p[n].buf, p[n].rec.length};
            mm[n] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov[n], .msg_iovlen = 1}};
            n++;
        }
        for (int i = 0; i < n;) {  /* a refused frame is a send error; the next call goes on after it */
            int64_t t0 = mono();
            int r = send_frames(d->io.out_fd, mm + i, n - i);
            int64_t t1 = mono();
            L->out->send_ns += t1 - t0;
            L->out->send_calls++;
            if (t1 - t0 > L->out->send_max_ns) L->out->send_max_ns = t1 - t0;
            if (L->rc->slow_send_ns && t1 - t0 >= L->rc->slow_send_ns) {
                L->out->slow_sends++;
                L->out->slow_send_ns += t1 - t0;
            }
            if (r < 0) {
                d->st.send_errors++;
                p[i].rec.verdict = V_SEND_ERROR; p[i].rec.t_sent = 0;
                i++;
                continue;
            }
            for (int j = 0; j < r; j++) {
                p[i + j].rec.verdict = V_DELIVERED;
                p[i + j].rec.t_sent = j ? t1 : t0;
            }
            i += r;
        }
        for (int i = 0; i < n; i++) {
            buf_put(p[i].buf, p[i].rec.length);
            log_add(d, &p[i].rec);
        }
    }
    return (next = pend_next(d)) ? next->t : INT64_MAX;
}

/* the model's verdict for one frame of `len` bytes read at `now` (arrival t_arr, clamped), of
 * which `caplen` are in `f`; queue it or log its fate.  A truncated frame (caplen < len: longer
 * than a ring slot) takes its place in the model but is not forwarded short: a send error. */
static void take(tb_engine *e, int k, io_dir *d, const uint8_t *f, uint32_t len, uint32_t caplen,
                 int64_t t_arr, int64_t now) {
    if (t_arr > now) t_arr = now;
    if (t_arr < d->first_arrival) d->first_arrival = t_arr;
    if (t_arr < d->last_arrival) t_arr = d->last_arrival;
    d->last_arrival = t_arr;
    pend p;
    tb_parse_key(f, caplen, &p.rec);
    p.rec.t_arrival = t_arr; p.rec.t_read = now; p.rec.t_sent = 0;
    p.rec.length = (uint16_t)len;
    int64_t t;
    int v = tb_arrive_frame(e, k, t_arr, len, f, caplen, &t);
    p.rec.t_sched = t;
    if (v == TB_DELIVER && caplen == len) {
        p.buf = buf_get(len);
        p.t = t;
        p.n = ++d->n;
        if (p.buf && pend_push(d, &p) == 0) {
            memcpy(p.buf, f, len);
            return;
        }
        if (p.buf) buf_put(p.buf, len);
        d->st.oom_drops++;  /* out of memory: an unintended drop */
    }
    if (v == TB_DELIVER) {
        d->st.send_errors++;
        p.rec.verdict = V_SEND_ERROR;
    }
    else p.rec.verdict = v == TB_DROP_LOSS ? V_LOSS : v == TB_DROP_QUEUE ? V_QUEUE
                       : v == TB_DROP_OUTAGE ? V_OUTAGE : v == TB_DROP_EVENT ? V_EVENT : V_SEND_ERROR;
    log_add(d, &p.rec);
}

static inline struct tpacket2_hdr *ring_slot(io_dir *d) {
    return (struct tpacket2_hdr *)(d->ring + (size_t)d->head * (uint32_t)d->io.ring_frame_size);
}
static inline int ring_ready(io_dir *d) {
    return (__atomic_load_n(&ring_slot(d)->tp_status, __ATOMIC_ACQUIRE) & TP_STATUS_USER) != 0;
}

static void drain_ring(tb_engine *e, int k, io_dir *d, int64_t deadline) {
    int64_t total = 0, now = mono(), offset = real() - now;
    while (total < MAX_READ && ring_ready(d)) {
        struct tpacket2_hdr *h = ring_slot(d);
        int64_t t_real = (int64_t)h->tp_sec * 1000000000LL + h->tp_nsec;
        if (t_real - offset > now) {  /* arrived after `now` was read */
            now = mono();
            offset = real() - now;
        }
        int64_t t_arr = t_real - offset;
        take(e, k, d, (const uint8_t *)h + h->tp_mac, h->tp_len, h->tp_snaplen, t_arr, now);
        __atomic_store_n(&h->tp_status, TP_STATUS_KERNEL, __ATOMIC_RELEASE);
        d->head = (d->head + 1) % (uint32_t)d->io.ring_frame_nr;
        if (++total % READ_BATCH == 0) {
            now = mono();
            offset = real() - now;
            if (total >= MIN_READ && now >= deadline) break;
        }
    }
}

static uint8_t *stage;  /* READ_BATCH x MAX_FRAME */
static struct mmsghdr msgs[READ_BATCH];
static struct iovec iovs[READ_BATCH];
static char ctrl[READ_BATCH][64];

static void drain_socket(tb_engine *e, int k, io_dir *d, int64_t deadline) {
    int64_t total = 0;
    while (total < MAX_READ) {
        for (int i = 0; i < READ_BATCH; i++) {
            iovs[i].iov_base = stage + (size_t)i * MAX_FRAME;
            iovs[i].iov_len = MAX_FRAME;
            memset(&msgs[i].msg_hdr, 0, sizeof msgs[i].msg_hdr);
            msgs[i].msg_hdr.msg_iov = &iovs[i];
            msgs[i].msg_hdr.msg_iovlen = 1;
            msgs[i].msg_hdr.msg_control = ctrl[i];
            msgs[i].msg_hdr.msg_controllen = sizeof ctrl[i];
        }
        int want = (int)(MAX_READ - total < READ_BATCH ? MAX_READ - total : READ_BATCH);
        int n = recvmmsg(d->io.in_fd, msgs, (unsigned)want, MSG_DONTWAIT, NULL);
        if (n <= 0) break;
        int64_t now = mono();
        int64_t offset = real() - now;
        for (int i = 0; i < n; i++) {
            int64_t t_arr = now;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c)) {
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
                    struct timespec ts;
                    memcpy(&ts, CMSG_DATA(c), sizeof ts);
                    t_arr = ts.tv_sec * 1000000000LL + ts.tv_nsec - offset;
                }
            }
            take(e, k, d, stage + (size_t)i * MAX_FRAME, msgs[i].msg_len, msgs[i].msg_len, t_arr, now);
        }
        total += n;
        if (n < want) break;
        if (total >= MIN_READ && mono() >= deadline) break;
    }
}

static void drain(tb_engine *e, int k, io_dir *d, int64_t deadline) {
    if (d->ring) drain_ring(e, k, d, deadline);
    else drain_socket(e, k, d, deadline);
}

/* Run until SIGTERM/SIGINT.  Returns 0, or -errno of a failed setup call. */
int tb_run(tb_engine *e, const tb_io_cfg *io, const tb_run_cfg *rc, tb_io_stats *io_out, tb_run_stats *out) {
    int nd = e->n_dirs, ret = 0, ringed = 1;  /* ringed: every direction reads a ring */
    io_dir *dirs = calloc((size_t)nd, sizeof *dirs);
    stage = malloc((size_t)READ_BATCH * MAX_FRAME);
    int ep = -1, sfd = -1, wfd = -1;
    tb_loop L = {rc, out, 0, -1, 0};
    log_writer *writer = calloc(1, sizeof *writer);
    int writing = 0;  /* the writer thread runs */
    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    if (!dirs || !stage || !writer) { ret = -ENOMEM; goto out; }
    for (int k = 0; k < nd; k++) {
        dirs[k].io = io[k];
        dirs[k].writer = writer;
        dirs[k].log = malloc(LOG_CHUNK * sizeof(tb_rec));
        if (!dirs[k].log) { ret = -ENOMEM; goto out; }
        if (io[k].ring_frame_nr > 0) {
            size_t len = (size_t)io[k].ring_frame_size * (size_t)io[k].ring_frame_nr;
            void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, io[k].in_fd, 0);
            if (m == MAP_FAILED) { ret = -errno; goto out; }
            dirs[k].ring = m; dirs[k].ring_len = len;
        }
        else ringed = 0;
    }
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    L.schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    L.run_delay_seen = run_delay(&L);
    pthread_sigmask(SIG_BLOCK, &mask, &old);
    sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    ep = epoll_create1(EPOLL_CLOEXEC);
    wfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (sfd < 0 || ep < 0 || wfd < 0) { ret = -errno; goto out; }
    if ((ret = log_writer_start(writer)) < 0) goto out;  /* after the mask: it inherits it */
    writing = 1;
    struct epoll_event ev;
    for (int k = 0; k < nd; k++) {
        ev.events = EPOLLIN; ev.data.u32 = (uint32_t)k;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, io[k].in_fd, &ev) < 0) { ret = -errno; goto out; }
    }
    ev.events = EPOLLIN; ev.data.u32 = SIGNAL_ID;
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);
    ev.events = EPOLLIN; ev.data.u32 = WAKE_ID;
    epoll_ctl(ep, EPOLL_CTL_ADD, wfd, &ev);
    __atomic_store_n(&e->wake_fd, wfd, __ATOMIC_RELEASE);

    int64_t spin = rc->spin_ns, early = rc->early_ns, share = rc->busy_share_pct;
    int64_t budget = BUSY_BURST_NS, refilled = mono(), blocked = 0, demoted_at = 0;
    struct sched_param fifo = {0}, other = {0};
    int demote = rc->demote && sched_getscheduler(0) == SCHED_FIFO && sched_getparam(0, &fifo) == 0;
    if (demote && setpriority(PRIO_PROCESS, 0, -20) < 0) demote = 0;  /* nice while demoted */
    int stopping = 0;
    watched = &L; clock_seen = mono_raw();
    uint32_t spins = 0;
    struct epoll_event evs[64];
    int64_t idle_from = -1;  /* start of the previous iteration if it polled idle, else -1 */
    while (!stopping) {
        out->iterations++;
        tb_apply_origin_request(e);  /* asked for by another thread (tb_request_origin) */
        int64_t t_iter = mono(), now = t_iter + early, nxt = INT64_MAX, did = 0;
        if (idle_from >= 0 && (rc->stall_ns <= 0 || t_iter - idle_from < rc->stall_ns))
            out->poll_idle_ns += t_iter - idle_from;
        idle_from = -1;
        for (int k = 0; k < nd; k++) {
            int64_t before = dirs[k].st.records + dirs[k].log_len;
            int64_t t = send_due(&L, &dirs[k], now);
            did += dirs[k].st.records + dirs[k].log_len - before;
            if (t < nxt) nxt = t;
        }
        int64_t wait;  /* ns; -1: until an event */
        int64_t t_now = mono(), dt = t_now - refilled;
        budget += dt * share / 100 - (L.demoted ? 0 : dt - blocked);
        if (budget > BUSY_BURST_NS) budget = BUSY_BURST_NS;
        if (budget < -BUSY_BURST_NS) budget = -BUSY_BURST_NS;
        refilled = t_now;
        blocked = 0;
        if (demote && !L.demoted && budget <= 0) {  /* another task may take the CPU at once */
            if (sched_setscheduler(0, SCHED_OTHER, &other) == 0) {
                L.demoted = 1; demoted_at = t_now; out->demotions++;
            }
        }
        else if (L.demoted && budget >= RT_RESUME_NS && sched_setscheduler(0, SCHED_FIFO, &fifo) == 0) {
            L.demoted = 0; out->demoted_ns += t_now - demoted_at;
        }
        int may_poll = budget > 0 || L.demoted;
        if (nxt == INT64_MAX) wait = -1;
        else if (nxt - early - t_now <= spin && may_poll) wait = 0;
        else {
            wait = nxt - early - (may_poll ? spin : 0) - mono();
            if (wait < 0) wait = 0;
        }
        int64_t t_sent_done = mono();
        if (wait == 0 && ringed && ++spins % SIGNAL_EVERY) {  /* poll the rings, no system call */
            int got = 0;
            for (int k = 0; k < nd; k++) {
                if (!ring_ready(&dirs[k])) continue;
                int64_t t0 = mono();
                drain(e, k, &dirs[k], nxt == INT64_MAX ? INT64_MAX : nxt - early);
                out->read_ns += mono() - t0;
                got = 1;
            }
            if (!got && !did) idle_from = t_iter;
            continue;
        }
        struct timespec ts = {wait / 1000000000LL, wait % 1000000000LL};
        int n = epoll_pwait2(ep, evs, 64, wait < 0 ? NULL : &ts, NULL);
        int64_t woke = wait ? mono_raw() : mono(), first = INT64_MAX;
        clock_seen = woke;  /* a sleep on purpose is no stall; the checks below look at it */
        if (n < 0) {  /* EINTR: e.g. the process was stopped and continued */
            if (errno != EINTR) { ret = -errno; break; }
            n = 0;
        }
        if (wait == 0 && n == 0 && !did)  /* polling, nothing done so far (a read below undoes it) */
            idle_from = t_iter;
        else if (wait != 0)
            blocked += woke - t_sent_done;
        if (wait > 0 && n == 0) {
            out->timer_wakeups++;
            int64_t due = t_sent_done + wait;
            if (woke - due >= rc->stall_ns) stall(&L, due, woke);
        }
        for (int k = 0; k < nd; k++) {
            int ready = 0;
            for (int i = 0; i < n; i++) ready |= evs[i].data.u32 == (uint32_t)k;
            if (!(ready || (dirs[k].ring && ring_ready(&dirs[k])))) continue;
            int64_t t0 = mono();
            idle_from = -1;
            dirs[k].first_arrival = INT64_MAX;
            drain(e, k, &dirs[k], nxt == INT64_MAX ? INT64_MAX : nxt - early);
            out->read_ns += mono() - t0;
            if (dirs[k].first_arrival < first) first = dirs[k].first_arrival;
        }
        for (int i = 0; i < n; i++) {
            uint64_t count;
            if (evs[i].data.u32 == WAKE_ID && read(wfd, &count, sizeof count) < 0) continue;
            if (evs[i].data.u32 != SIGNAL_ID) continue;
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) stopping = 1;
        }
        /* frames that arrived while the loop waited, read long after: it was not woken */
        if (wait != 0 && first != INT64_MAX && first >= t_sent_done && woke - first >= rc->stall_ns)
            stall(&L, first, woke);
    }
    watched = NULL;
    if (L.demoted) {
        out->demoted_ns += mono() - demoted_at;
        sched_setscheduler(0, SCHED_FIFO, &fifo);  /* as the caller left it */
    }
    for (int k = 0; k < nd; k++) {  /* frames still in flight */
        pend p;
        const pend *next;
        while ((next = pend_next(&dirs[k]))) {
            pend_pop(&dirs[k], next, &p);
            p.rec.verdict = V_PENDING_AT_EXIT; p.rec.t_sent = 0;
            buf_put(p.buf, p.rec.length);
            log_add(&dirs[k], &p.rec);
        }
        log_flush(&dirs[k]);
    }
out:
    if (writing) {
        log_writer_stop(writer);
        out->log_waits = writer->waits;
    }
    free(writer);
    __atomic_store_n(&e->wake_fd, -1, __ATOMIC_RELEASE);
    if (wfd >= 0) close(wfd);
    if (ep >= 0) close(ep);
    if (sfd >= 0) {
        close(sfd);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    if (dirs) {
        for (int k = 0; k < nd; k++) {
            io_out[k] = dirs[k].st;
            if (dirs[k].ring) munmap(dirs[k].ring, dirs[k].ring_len);
            free(dirs[k].log);
            free(dirs[k].heap);
            free(dirs[k].fifo);
        }
        free(dirs);
    }
    free(stage); stage = NULL;
    if (L.schedstat_fd >= 0) close(L.schedstat_fd);
    while (free_len) free(free_small[--free_len]);
    free(free_small); free_small = NULL; free_cap = 0;
    return ret;
}

/* 0 when this kernel has what tb_run needs (epoll_pwait2: Linux >= 5.11), else -errno. */
int tb_probe(void) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0) return -errno;
    struct epoll_event ev;
    struct timespec ts = {0, 0};
    int r = epoll_pwait2(ep, &ev, 1, &ts, NULL) < 0 ? -errno : 0;
    close(ep);
    return r;
}

/* A paced train of one frame through a socket and nothing else: the floor under the loop's send
 * path (no model, no ring, no log), measured by benchmarks/emulator.py ("send floor" rows) on
 * the same machine and in the same run as the engine.  Frame i is due at t0 + i * gap_ns
 * (busy-waiting for it, as the loop polls before a departure; gap_ns 0: back to back) and sent
 * with the loop's flags, `batch` frames a call: one send() each (batch 1), or one sendmmsg per
 * `batch` frames once the last of them is due, as send_due sends frames due together.
 * send_ns[i] = the time inside the call that sent frame i, divided by the frames of that call.
 * Returns 0, or -errno of the first failed call. */
int tb_send_train(int fd, const uint8_t *frame, int32_t len, int64_t count, int64_t gap_ns,
                  int32_t batch, int64_t *send_ns) {
    struct mmsghdr mm[SEND_BATCH];
    struct iovec iov = {(void *)frame, (size_t)len};
    if (batch < 1 || batch > SEND_BATCH) return -EINVAL;
    for (int j = 0; j < batch; j++) mm[j] = (struct mmsghdr){.msg_hdr = {.msg_iov = &iov, .msg_iovlen = 1}};
    int64_t t0 = mono_raw();
    for (int64_t i = 0; i < count; i += batch) {
        int n = count - i < batch ? (int)(count - i) : batch;
        int64_t due = t0 + (i + n - 1) * gap_ns, t;
        while ((t = mono_raw()) < due) {}
        for (int sent = 0, r; sent < n; sent += r)
            if ((r = send_frames(fd, mm + sent, n - sent)) < 0) return -errno;
        int64_t per = (mono_raw() - t) / n;
        for (int j = 0; j < n; j++) send_ns[i + j] = per;
    }
    return 0;
}
