/* The native I/O loop: the C counterpart of testbed/emulator/forwarder.py's Forwarder.run.
 *
 * Python (forwarder.py) opens the AF_PACKET sockets and the frame logs (header written), then
 * calls tb_run, which returns when SIGTERM or SIGINT arrives (taken from a signalfd while they
 * are blocked in the calling thread).
 *
 * Sending: every iteration sends every frame due (one send() each, t_sent read just before it).
 * Waiting: epoll_pwait2 blocks when nothing is pending, else waits with a nanosecond timeout (an
 * hrtimer, timer slack 1 ns; one system call per wait) until spin_ns before the next departure;
 * the last spin_ns are polled (timeout 0) so the timer's wake-up latency does not delay the
 * departure.  Polling is allowed only while the loop has been busy (running, not blocked in
 * epoll_pwait2) for at most BUSY_SHARE_PCT % of the time: a budget refills at that share of
 * elapsed time (at most BUSY_BURST_NS saved up) and running spends it; once spent, the loop
 * sleeps until the timer fires.  Without the bound a SCHED_FIFO loop polling back-to-back
 * departures runs for 950 ms of a second and the kernel's RT throttling then stops it for 50 ms
 * (measured: 46 ms stalls at 333 Mbit/s); it also leaves the endpoints CPU on a 2-core machine.
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
 * Stalls: times the loop did not run although it wanted to: a gap of at least stall_ns between
 * two polls of the rings (nothing in between but reading the clock), a timed wait that returned
 * at least stall_ns after its timeout with nothing to read, or a wait that returned at least
 * stall_ns after the arrival of the first frame it returned for.  The CPU was taken away
 * (the hypervisor, an interrupt, a task of higher priority); the summary attributes the late
 * frames around them to the machine rather than to the engine.
 * Records are the linklog RECORD layout, appended to the log fd in chunks of LOG_CHUNK. */
#define _GNU_SOURCE
#include "tbcore.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <linux/if_packet.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define READ_BATCH 32
#define MAX_READ 256
#define MIN_READ 16
#define MAX_FRAME 65536
#define SMALL 2048
#define LOG_CHUNK 8192
#define BUSY_SHARE_PCT 60
#define BUSY_BURST_NS 5000000LL
#define SIGNAL_EVERY 4096
#define SIGNAL_ID 1000001u  /* epoll data of the signalfd (directions are 0..n-1) */

enum { V_DELIVERED = 0, V_LOSS, V_QUEUE, V_SEND_ERROR, V_PENDING_AT_EXIT };

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
    int64_t stall_ns;   /* a gap this long in the loop is a stall (see below) */
    int64_t *stalls;    /* room for stall_cap (start, end, run-queue wait) triples */
    int64_t stall_cap;
} tb_run_cfg;

typedef struct {  /* per-direction results of the run */
    int64_t send_errors, records, flush_max_ns, oom_drops;
} tb_io_stats;

typedef struct {
    int64_t iterations, timer_wakeups;
    int64_t poll_idle_ns;  /* time spent polling before a departure with nothing to read */
    int64_t send_ns, read_ns;  /* time inside send() (the receiver's kernel work included) / drain */
    int64_t stall_count;       /* stalls found; the first stall_cap are in tb_run_cfg.stalls */
} tb_run_stats;

typedef struct { int64_t t; uint64_t n; uint8_t *buf; tb_rec rec; } pend;

typedef struct {
    tb_io_cfg io;
    uint8_t *ring; size_t ring_len; uint32_t head;  /* PACKET_RX_RING, or NULL */
    pend *heap; int64_t heap_len, heap_cap; uint64_t n;
    tb_rec *log; int64_t log_len;
    int64_t last_arrival;
    int64_t first_arrival;  /* earliest arrival taken since the loop last reset it */
    tb_io_stats st;
} io_dir;

static uint8_t **free_small; static int64_t free_len, free_cap;

static inline int64_t mono(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
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

static void log_flush(io_dir *d) {
    if (!d->log_len) return;
    int64_t t0 = mono();
    const char *p = (const char *)d->log;
    size_t left = (size_t)d->log_len * sizeof(tb_rec);
    while (left) {
        ssize_t w = write(d->io.log_fd, p, left);
        if (w < 0) { if (errno == EINTR) continue; break; }
        p += w; left -= (size_t)w;
    }
    d->st.records += d->log_len;
    d->log_len = 0;
    int64_t dt = mono() - t0;
    if (dt > d->st.flush_max_ns) d->st.flush_max_ns = dt;
}

static inline void log_add(io_dir *d, const tb_rec *r) {
    d->log[d->log_len++] = *r;
    if (d->log_len == LOG_CHUNK) log_flush(d);
}

/* heap ordered by (t, n) */
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

/* send every frame due by now; returns the next departure or INT64_MAX */
static int64_t send_due(io_dir *d, int64_t now) {
    pend p;
    while (d->heap_len && d->heap[0].t <= now) {
        heap_pop(d, &p);
        int64_t t_sent = mono();
        ssize_t w;
        do w = send(d->io.out_fd, p.buf, p.rec.length, MSG_DONTWAIT); while (w < 0 && errno == EINTR);
        if (w < 0) { d->st.send_errors++; p.rec.verdict = V_SEND_ERROR; p.rec.t_sent = 0; }
        else { p.rec.verdict = V_DELIVERED; p.rec.t_sent = t_sent; }
        buf_put(p.buf, p.rec.length);
        log_add(d, &p.rec);
    }
    return d->heap_len ? d->heap[0].t : INT64_MAX;
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
    int v = tb_arrive(e, k, t_arr, len, &t);
    p.rec.t_sched = t;
    if (v == TB_DELIVER && caplen == len) {
        p.buf = buf_get(len);
        p.t = t;
        p.n = ++d->n;
        if (p.buf && heap_push(d, &p) == 0) {
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
    else p.rec.verdict = v == TB_DROP_LOSS ? V_LOSS : v == TB_DROP_QUEUE ? V_QUEUE : V_SEND_ERROR;
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

static int schedstat_fd = -1;
static int64_t run_delay_seen;

/* this thread's run-queue wait so far (ns, /proc/thread-self/schedstat), -1 if unreadable */
static int64_t run_delay(void) {
    char buf[128];
    ssize_t n = schedstat_fd < 0 ? -1 : pread(schedstat_fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = 0;
    char *p = strchr(buf, ' ');
    return p ? strtoll(p + 1, NULL, 10) : -1;
}

/* a stall [from, to]; its third number is the run-queue wait the thread accrued since the last
 * stall: about the stall's length when the kernel held the runnable loop back (RT throttling, a
 * task of higher priority), about 0 when the whole vCPU did not run (the hypervisor) */
static void stall(const tb_run_cfg *rc, tb_run_stats *out, int64_t from, int64_t to) {
    int64_t rd = run_delay(), waited = rd < 0 ? -1 : rd - run_delay_seen;
    if (rd >= 0) run_delay_seen = rd;
    if (out->stall_count < rc->stall_cap) {
        rc->stalls[3 * out->stall_count] = from;
        rc->stalls[3 * out->stall_count + 1] = to;
        rc->stalls[3 * out->stall_count + 2] = waited;
    }
    out->stall_count++;
}

/* Run until SIGTERM/SIGINT.  Returns 0, or -errno of a failed setup call. */
int tb_run(tb_engine *e, const tb_io_cfg *io, const tb_run_cfg *rc, tb_io_stats *io_out, tb_run_stats *out) {
    int nd = e->n_dirs, ret = 0, ringed = 1;  /* ringed: every direction reads a ring */
    io_dir *dirs = calloc((size_t)nd, sizeof *dirs);
    stage = malloc((size_t)READ_BATCH * MAX_FRAME);
    int ep = -1, sfd = -1;
    sigset_t mask, old;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    if (!dirs || !stage) { ret = -ENOMEM; goto out; }
    for (int k = 0; k < nd; k++) {
        dirs[k].io = io[k];
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
    schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    run_delay_seen = run_delay();
    pthread_sigmask(SIG_BLOCK, &mask, &old);
    sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (sfd < 0 || ep < 0) { ret = -errno; goto out; }
    struct epoll_event ev;
    for (int k = 0; k < nd; k++) {
        ev.events = EPOLLIN; ev.data.u32 = (uint32_t)k;
        if (epoll_ctl(ep, EPOLL_CTL_ADD, io[k].in_fd, &ev) < 0) { ret = -errno; goto out; }
    }
    ev.events = EPOLLIN; ev.data.u32 = SIGNAL_ID;
    epoll_ctl(ep, EPOLL_CTL_ADD, sfd, &ev);

    int64_t spin = rc->spin_ns, early = rc->early_ns;
    int64_t budget = BUSY_BURST_NS, refilled = mono(), blocked = 0;
    int stopping = 0;
    uint32_t spins = 0;
    int64_t spun_at = 0;  /* end of the last pure poll of the rings, 0 if the last iteration was not one */
    struct epoll_event evs[64];
    while (!stopping) {
        out->iterations++;
        int64_t t_iter = mono(), now = t_iter + early, nxt = INT64_MAX, did = 0;
        if (spun_at && t_iter - spun_at >= rc->stall_ns) stall(rc, out, spun_at, t_iter);
        spun_at = 0;
        for (int k = 0; k < nd; k++) {
            int64_t before = dirs[k].st.records + dirs[k].log_len;
            int64_t t = send_due(&dirs[k], now);
            did += dirs[k].st.records + dirs[k].log_len - before;
            if (t < nxt) nxt = t;
        }
        int64_t wait;  /* ns; -1: until an event */
        int64_t t_now = mono(), dt = t_now - refilled;
        budget += dt * BUSY_SHARE_PCT / 100 - (dt - blocked);
        if (budget > BUSY_BURST_NS) budget = BUSY_BURST_NS;
        if (budget < -BUSY_BURST_NS) budget = -BUSY_BURST_NS;
        refilled = t_now;
        blocked = 0;
        if (nxt == INT64_MAX) wait = -1;
        else if (nxt - early - t_now <= spin && budget > 0) wait = 0;
        else {
            wait = nxt - early - (budget > 0 ? spin : 0) - mono();
            if (wait < 0) wait = 0;
        }
        int64_t t_sent_done = mono();
        out->send_ns += t_sent_done - t_iter;
        if (wait == 0 && ringed && ++spins % SIGNAL_EVERY) {  /* poll the rings, no system call */
            int got = 0;
            for (int k = 0; k < nd; k++) {
                if (!ring_ready(&dirs[k])) continue;
                int64_t t0 = mono();
                drain(e, k, &dirs[k], nxt == INT64_MAX ? INT64_MAX : nxt - early);
                out->read_ns += mono() - t0;
                got = 1;
            }
            if (!got && !did) {
                spun_at = mono();
                out->poll_idle_ns += spun_at - t_iter;
            }
            continue;
        }
        struct timespec ts = {wait / 1000000000LL, wait % 1000000000LL};
        int n = epoll_pwait2(ep, evs, 64, wait < 0 ? NULL : &ts, NULL);
        int64_t woke = mono(), first = INT64_MAX;
        if (n < 0) {  /* EINTR: e.g. the process was stopped and continued */
            if (errno != EINTR) { ret = -errno; break; }
            n = 0;
        }
        if (wait == 0 && n == 0 && !did)  /* a whole iteration of polling, nothing done */
            out->poll_idle_ns += woke - t_iter;
        else if (wait != 0)
            blocked += woke - t_sent_done;
        if (wait > 0 && n == 0) {
            out->timer_wakeups++;
            int64_t due = t_sent_done + wait;
            if (woke - due >= rc->stall_ns) stall(rc, out, due, woke);
        }
        for (int k = 0; k < nd; k++) {
            int ready = 0;
            for (int i = 0; i < n; i++) ready |= evs[i].data.u32 == (uint32_t)k;
            if (!(ready || (dirs[k].ring && ring_ready(&dirs[k])))) continue;
            int64_t t0 = mono();
            dirs[k].first_arrival = INT64_MAX;
            drain(e, k, &dirs[k], nxt == INT64_MAX ? INT64_MAX : nxt - early);
            out->read_ns += mono() - t0;
            if (dirs[k].first_arrival < first) first = dirs[k].first_arrival;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u32 != SIGNAL_ID) continue;
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) stopping = 1;
        }
        /* frames that arrived while the loop waited, read long after: it was not woken */
        if (wait != 0 && first != INT64_MAX && first >= t_sent_done && woke - first >= rc->stall_ns)
            stall(rc, out, first, woke);
    }
    for (int k = 0; k < nd; k++) {  /* frames still in flight */
        pend p;
        while (dirs[k].heap_len) {
            heap_pop(&dirs[k], &p);
            p.rec.verdict = V_PENDING_AT_EXIT; p.rec.t_sent = 0;
            buf_put(p.buf, p.rec.length);
            log_add(&dirs[k], &p.rec);
        }
        log_flush(&dirs[k]);
    }
out:
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
        }
        free(dirs);
    }
    free(stage); stage = NULL;
    if (schedstat_fd >= 0) close(schedstat_fd);
    schedstat_fd = -1;
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
