/* Compiled fast path of analysis/: the pcap record walk and header decode
 * (reference: analysis/pcap.py) and the per-packet sender state machine
 * (reference: analysis/tcpsender.py SenderTracker, as driven by
 * analysis/senderrun.py).  Every rule here mirrors the Python reference line
 * by line; tests/analysis/test_native.py checks that both give identical
 * arrays.  Built by analysis/native/Makefile (scripts/install.sh), loaded
 * with ctypes by analysis/native/__init__.py. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Header decode (analysis/pcap.py decode and _tcp_options)            */

enum { F_TS, F_IFACE, F_CAPLEN, F_WIRELEN, F_IPVER, F_PROTO, F_SRC, F_DST, F_IP_ID, F_IP_LEN,
       F_SPORT, F_DPORT, F_PAYLOAD_LEN, F_FLAGS, F_SEQ, F_ACK, F_WIN, F_WSCALE, F_MSS,
       F_SACK_PERM, F_HAS_TS, F_TSVAL, F_TSECR, F_NSACK, F_SACK, F_TCP_HDR_OK, F_HEAD,
       F_HEAD_LEN, F_COUNT };
#define HEAD 8
#define MAX_SACK 4

typedef struct { const uint8_t *p; int64_t limit; } pkt_t;   /* bytes [0, limit) readable */

static inline uint32_t b8(pkt_t *k, int64_t i) { return (i >= 0 && i < k->limit) ? k->p[i] : 0; }
static inline uint32_t b16(pkt_t *k, int64_t i) { return (b8(k, i) << 8) | b8(k, i + 1); }
static inline uint32_t b32(pkt_t *k, int64_t i) {
    return (b8(k, i) << 24) | (b8(k, i + 1) << 16) | (b8(k, i + 2) << 8) | b8(k, i + 3);
}

#define O(T, f) ((T *)out[f])

/* One packet whose link-layer header starts at p; cap = captured length (may exceed
 * avail, the bytes present in the buffer); lt = link type. Fields from F_IPVER on. */
static void decode_one(const uint8_t *p, int64_t cap, int64_t avail, int lt, void **out, int64_t k) {
    pkt_t pk = { p, cap < avail ? cap : avail };
    int64_t net = 0;
    uint32_t et = 0;
    if (lt == 1) {
        net = 14; et = b16(&pk, 12);
        if (et == 0x8100) { net += 4; et = b16(&pk, 16); }
    } else if (lt == 113) { net = 16; et = b16(&pk, 14); }
    else if (lt == 276) { net = 20; et = b16(&pk, 0); }
    else if (lt == 0) {
        uint8_t fam = avail > 0 ? p[0] : 0;       /* not limited by the captured length */
        net = 4; et = fam == 2 ? 0x0800 : (fam == 24 || fam == 28 || fam == 30) ? 0x86DD : 0;
    } else if (lt == 101 || lt == 228 || lt == 229 || lt == 12) {
        uint32_t ver = b8(&pk, 0) >> 4;
        et = ver == 4 ? 0x0800 : ver == 6 ? 0x86DD : 0;
    }
    int v4 = et == 0x0800, v6 = et == 0x86DD;
    int64_t ihl = v4 ? (int64_t)(b8(&pk, net) & 0x0F) * 4 : 40;
    uint32_t proto = v4 ? b8(&pk, net + 9) : v6 ? b8(&pk, net + 6) : 0;
    uint32_t ip_len = v4 ? b16(&pk, net + 2) : v6 ? b16(&pk, net + 4) + 40 : 0;
    if (v4 && (b16(&pk, net + 6) & 0x1FFF)) proto = 0;
    O(uint8_t, F_IPVER)[k] = v4 ? 4 : v6 ? 6 : 0;
    O(uint8_t, F_PROTO)[k] = (uint8_t)proto;
    O(uint32_t, F_IP_LEN)[k] = ip_len;
    O(uint32_t, F_IP_ID)[k] = v4 ? b16(&pk, net + 4) : 0;
    uint8_t *src = O(uint8_t, F_SRC) + 16 * k, *dst = O(uint8_t, F_DST) + 16 * k;
    memset(src, 0, 16); memset(dst, 0, 16);
    if (v4) {
        src[10] = src[11] = dst[10] = dst[11] = 0xFF;
        for (int i = 0; i < 4; i++) { src[12 + i] = b8(&pk, net + 12 + i); dst[12 + i] = b8(&pk, net + 16 + i); }
    } else if (v6) {
        for (int i = 0; i < 16; i++) { src[i] = b8(&pk, net + 8 + i); dst[i] = b8(&pk, net + 24 + i); }
    }
    int64_t l4 = net + ihl;
    int tcp = proto == 6, udp = proto == 17;
    O(uint16_t, F_SPORT)[k] = (tcp || udp) ? b16(&pk, l4) : 0;
    O(uint16_t, F_DPORT)[k] = (tcp || udp) ? b16(&pk, l4 + 2) : 0;
    int64_t doff = tcp ? (int64_t)(b8(&pk, l4 + 12) >> 4) * 4 : 8;
    int64_t plen = tcp ? (int64_t)ip_len - ihl - doff : udp ? (int64_t)b16(&pk, l4 + 4) - 8 : 0;
    if (plen < 0) plen = 0;
    O(int32_t, F_PAYLOAD_LEN)[k] = (int32_t)plen;
    O(uint16_t, F_FLAGS)[k] = tcp ? b16(&pk, l4 + 12) & 0x01FF : 0;
    O(uint32_t, F_SEQ)[k] = tcp ? b32(&pk, l4 + 4) : 0;
    O(uint32_t, F_ACK)[k] = tcp ? b32(&pk, l4 + 8) : 0;
    O(uint16_t, F_WIN)[k] = tcp ? b16(&pk, l4 + 14) : 0;
    O(uint8_t, F_TCP_HDR_OK)[k] = tcp && l4 + doff <= pk.limit;
    int8_t wscale = -1; uint16_t mss = 0; uint8_t sperm = 0, has_ts = 0, nsack = 0;
    uint32_t tsval = 0, tsecr = 0, *sack = O(uint32_t, F_SACK) + 2 * MAX_SACK * k;
    memset(sack, 0, 4 * 2 * MAX_SACK);
    if (tcp && doff > 20) {
        int64_t pos = l4 + 20, end = l4 + doff;
        for (;;) {
            uint32_t kind = b8(&pk, pos);
            int64_t olen = b8(&pk, pos + 1);
            int single = kind <= 1;
            int ok = single || (olen >= 2 && pos + olen <= end);
            if (ok && kind == 2 && olen == 4) mss = (uint16_t)((b8(&pk, pos + 2) << 8) | b8(&pk, pos + 3));
            if (ok && kind == 3 && olen == 3) { uint32_t w = b8(&pk, pos + 2); wscale = (int8_t)(w < 14 ? w : 14); }
            if (ok && kind == 4) sperm = 1;
            if (ok && kind == 8 && olen == 10) { has_ts = 1; tsval = b32(&pk, pos + 2); tsecr = b32(&pk, pos + 6); }
            if (ok && kind == 5 && olen >= 10) {
                int64_t nb = (olen - 2) / 8;
                if (nb > MAX_SACK) nb = MAX_SACK;
                nsack = (uint8_t)nb;
                for (int64_t b = 0; b < nb; b++) {
                    sack[2 * b] = b32(&pk, pos + 2 + 8 * b);
                    sack[2 * b + 1] = b32(&pk, pos + 6 + 8 * b);
                }
            }
            pos += single ? 1 : olen;
            if (!(ok && kind != 0 && pos < end)) break;
        }
    }
    O(int8_t, F_WSCALE)[k] = wscale; O(uint16_t, F_MSS)[k] = mss;
    O(uint8_t, F_SACK_PERM)[k] = sperm; O(uint8_t, F_HAS_TS)[k] = has_ts;
    O(uint32_t, F_TSVAL)[k] = tsval; O(uint32_t, F_TSECR)[k] = tsecr; O(uint8_t, F_NSACK)[k] = nsack;
    int64_t pay = l4 + doff, hl = pk.limit - pay;
    if (plen < hl) hl = plen;
    if (hl < 0) hl = 0;
    if (hl > HEAD) hl = HEAD;
    uint8_t *head = O(uint8_t, F_HEAD) + HEAD * k;
    for (int i = 0; i < HEAD; i++) head[i] = i < hl ? b8(&pk, pay + i) : 0;
    O(uint8_t, F_HEAD_LEN)[k] = (uint8_t)hl;
}

/* Records at buf[off[i]] (link layer start), any container: fields from F_IPVER on. */
void tb_decode(const uint8_t *buf, int64_t buflen, int64_t n, const int64_t *off,
               const int64_t *cap, const int32_t *lt, void **out) {
    for (int64_t i = 0; i < n; i++)
        decode_one(buf + off[i], cap[i], off[i] < buflen ? buflen - off[i] : 0, lt[i], out, i);
}

static inline uint32_t rd32(const uint8_t *p, int le) {
    return le ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24
              : (uint32_t)p[3] | (uint32_t)p[2] << 8 | (uint32_t)p[1] << 16 | (uint32_t)p[0] << 24;
}

/* Walk the complete pcap records in buf (which starts at a record); decode them into
 * out at index k0.. when out is not NULL.  Returns the number of complete records
 * (at most kmax) and sets *consumed to the bytes they span.  A record is complete when
 * its 16-byte header and caplen data bytes are all in buf; a header no capture tool
 * writes (timestamp fraction of a second or more, caplen above maxcap or above the wire
 * length) stops the walk there with *bad = 1 (pcap.py _walk_pcap and _record_fault). */
int64_t tb_pcap_records(const uint8_t *buf, int64_t len, int le, int nano, int lt,
                        int64_t maxcap, int64_t k0, int64_t kmax, void **out,
                        int64_t *consumed, int32_t *bad) {
    int64_t pos = 0, n = 0;
    *bad = 0;
    while (n < kmax && pos + 16 <= len) {
        const uint8_t *h = buf + pos;
        int64_t cap = rd32(h + 8, le), wire = rd32(h + 12, le), frac = rd32(h + 4, le);
        if (frac >= (nano ? 1000000000 : 1000000) || cap > maxcap || cap > wire) { *bad = 1; break; }
        if (pos + 16 + cap > len) break;
        if (out) {
            int64_t k = k0 + n;
            int64_t sec = rd32(h, le);
            O(int64_t, F_TS)[k] = sec * 1000000000 + (nano ? frac : frac * 1000);
            O(uint16_t, F_IFACE)[k] = 0;
            O(uint32_t, F_CAPLEN)[k] = (uint32_t)cap;
            O(uint32_t, F_WIRELEN)[k] = (uint32_t)wire;
            decode_one(h + 16, cap, len - pos - 16, lt, out, k);
        }
        pos += 16 + cap;
        n++;
    }
    *consumed = pos;
    return n;
}

/* ------------------------------------------------------------------ */
/* Sender state machine (analysis/tcpsender.py SenderTracker)          */

#define DUPTHRESH 3
#define WS_MAX_SEGMENTS 10000
#define WS_SACK_BLOCKS 3
enum { K_FAST = 0, K_RTO = 1, K_PROBE = 2 };
#define NONE INT64_MIN

/* An array of (key, id) kept sorted by key, consumed from the front: entries arrive
 * mostly in key order (appended), the rest are inserted by binary search. */
typedef struct { int64_t *key, *id, head, tail; } sorted_t;

static void sorted_insert(sorted_t *q, int64_t key, int64_t id) {
    int64_t lo = q->head, hi = q->tail;         /* after the entries with key <= this one */
    if (hi > lo && q->key[hi - 1] > key) {
        while (lo < hi) { int64_t m = (lo + hi) / 2; if (q->key[m] <= key) lo = m + 1; else hi = m; }
        memmove(q->key + lo + 1, q->key + lo, (q->tail - lo) * 8);
        memmove(q->id + lo + 1, q->id + lo, (q->tail - lo) * 8);
    } else lo = hi;
    q->key[lo] = key; q->id[lo] = id; q->tail++;
}

typedef struct {
    int64_t smss, una, snd_max, data_start, data_max, last_win, last_advance_t, last_dupack_t,
        last_signal_t, episode, episode_kind, recovery_point, dupacks;
    int have_max, have_win;
    /* first transmissions: live ones are [sh, sn) */
    int64_t *s_start, *s_end, *s_t, *s_ep, *s_rt, sh, sn;
    int64_t *rtx_segs, nrtx_segs;
    int64_t *sl, *sr, nsacked, capsacked;   /* merged SACK scoreboard */
    int64_t last_sack_sum;
    /* Wireshark's list: entries by end (for deletion) and by start (for the lowest) */
    int64_t w_next, w_live, w_top;
    uint8_t *w_alive;
    int w_valid;
    sorted_t by_end, by_start;
    /* outputs */
    int64_t *rx, nrx, *karn, nkarn;
} st_t;

static int64_t bisect_right_end(st_t *s, int64_t x) {   /* first live seg with end > x */
    int64_t lo = s->sh, hi = s->sn;
    while (lo < hi) { int64_t m = (lo + hi) / 2; if (s->s_end[m] <= x) lo = m + 1; else hi = m; }
    return lo;
}

static int64_t bisect_left_start(st_t *s, int64_t x) {  /* first live seg with start >= x */
    int64_t lo = s->sh, hi = s->sn;
    while (lo < hi) { int64_t m = (lo + hi) / 2; if (s->s_start[m] < x) lo = m + 1; else hi = m; }
    return lo;
}

static int64_t outstanding(st_t *s) {
    if (!s->have_max) return 0;
    int64_t lo = s->una > s->data_start ? s->una : s->data_start, v = s->data_max - lo;
    return v > 0 ? v : 0;
}

static int is_sacked(st_t *s, int64_t start, int64_t end) {
    int64_t lo = 0, hi = s->nsacked;     /* last interval with l <= start */
    while (lo < hi) { int64_t m = (lo + hi) / 2; if (s->sl[m] <= start) lo = m + 1; else hi = m; }
    int64_t i = lo - 1;
    return i >= 0 && s->sl[i] <= start && s->sr[i] >= end;
}

static int64_t pipe_now(st_t *s) {
    int64_t out = outstanding(s);
    int in_rec = s->recovery_point != NONE;
    if (!s->nsacked && !in_rec) return out;
    int64_t lo = s->una > s->data_start ? s->una : s->data_start, hi = s->data_max;
    int64_t lost_below = lo, acc = 0, count = 0;
    for (int64_t j = s->nsacked - 1; j >= 0; j--) {
        int64_t l = s->sl[j], r = s->sr[j], v = (r < hi ? r : hi) - l;
        acc += v > 0 ? v : 0;
        int64_t inside = bisect_right_end(s, r) - bisect_left_start(s, l);
        count += inside > 0 ? inside : 0;
        if (count >= DUPTHRESH || acc > (DUPTHRESH - 1) * s->smss) { lost_below = l > lo ? l : lo; break; }
    }
    int64_t above = 0;
    for (int64_t j = 0; j < s->nsacked; j++) {
        int64_t l = s->sl[j] > lost_below ? s->sl[j] : lost_below, r = s->sr[j] < hi ? s->sr[j] : hi;
        above += r - l > 0 ? r - l : 0;
    }
    int64_t total = (hi - lost_below > 0 ? hi - lost_below : 0) - above;
    if (in_rec) {
        for (int64_t j = 0; j < s->nrtx_segs; j++) {
            int64_t g = s->rtx_segs[j], start = s->s_start[g] > lo ? s->s_start[g] : lo;
            if (s->s_end[g] > start && s->s_ep[g] == s->episode && !is_sacked(s, start, s->s_end[g]))
                total += s->s_end[g] - start;
        }
    }
    return total;
}

/* Python's _WiresharkList keeps three lazily cleaned heaps; the same values come from
 * two sorted arrays here.  The highest end in the list is only deleted together with
 * every other entry (an ACK deletes the entries ending at or below it), so the top is
 * the highest end added since the list was last empty.  An ACK trims the entries that
 * start below it to start at it: those are the first ones by start, and stay first. */
static int64_t ws_value(st_t *s) {
    if (!s->w_live) return 0;
    sorted_t *b = &s->by_start;
    while (!s->w_alive[b->id[b->head]]) b->head++;
    return s->w_top - b->key[b->head] - s->last_sack_sum;
}

static void ws_add(st_t *s, int64_t seq, int64_t end) {
    if (s->w_live >= WS_MAX_SEGMENTS) return;
    int64_t i = s->w_next++;
    if (!s->w_live) {            /* empty: start the arrays over */
        s->by_end.head = s->by_end.tail = s->by_start.head = s->by_start.tail = 0;
        s->w_top = end;
    } else if (end > s->w_top) s->w_top = end;
    s->w_alive[i] = 1; s->w_live++;
    sorted_insert(&s->by_end, end, i);
    sorted_insert(&s->by_start, seq, i);
}

static void ws_ack(st_t *s, int64_t ack) {
    sorted_t *e = &s->by_end, *b = &s->by_start;
    while (e->head < e->tail && e->key[e->head] <= ack) {
        s->w_alive[e->id[e->head++]] = 0;
        s->w_live--;
    }
    while (b->head < b->tail && !s->w_alive[b->id[b->head]]) b->head++;
    for (int64_t j = b->head; j < b->tail && b->key[j] < ack; j++) b->key[j] = ack;
}

static int add_sack(st_t *s, int64_t l, int64_t r) {
    if (l >= r) return 0;
    if (s->nsacked == s->capsacked) {
        int64_t c = s->capsacked ? 2 * s->capsacked : 64, *a = realloc(s->sl, c * 8), *b;
        if (!a) return -1;
        s->sl = a;
        b = realloc(s->sr, c * 8);
        if (!b) return -1;
        s->sr = b; s->capsacked = c;
    }
    int64_t lo = 0, hi = s->nsacked;     /* first interval with left edge >= l */
    while (lo < hi) { int64_t m = (lo + hi) / 2; if (s->sl[m] < l) lo = m + 1; else hi = m; }
    int64_t i = lo;
    if (i > 0 && s->sr[i - 1] >= l) i--;
    int64_t j = i;
    while (j < s->nsacked && s->sl[j] <= r) {
        if (s->sl[j] < l) l = s->sl[j];
        if (s->sr[j] > r) r = s->sr[j];
        j++;
    }
    /* replace [i, j) with one interval */
    memmove(s->sl + i + 1, s->sl + j, (s->nsacked - j) * 8);
    memmove(s->sr + i + 1, s->sr + j, (s->nsacked - j) * 8);
    s->nsacked += 1 - (j - i);
    s->sl[i] = l; s->sr[i] = r;
    return 0;
}

static void retransmitted(st_t *s, int64_t t, int64_t seq, int64_t end, int64_t row) {
    int64_t i = bisect_right_end(s, seq), j;
    int again = 0;
    int64_t prev_rtx = -1;
    for (j = i; j < s->sn && s->s_start[j] < end; j++) {
        if (s->s_ep[j] == s->episode && s->episode >= 0) again = 1;
        if (s->s_rt[j] > prev_rtx) prev_rtx = s->s_rt[j];
    }
    int64_t stop = j, kind;
    int in_episode = s->recovery_point != NONE && s->una < s->recovery_point;
    if (in_episode && !again) kind = s->episode_kind;
    else {
        int signalled = s->nsacked > 0 || s->last_dupack_t > s->last_advance_t;
        if (signalled && s->last_signal_t > prev_rtx) kind = K_FAST;
        else if (end >= s->snd_max && seq > s->una) kind = K_PROBE;
        else kind = K_RTO;
        if (kind != K_PROBE) {
            s->episode++; s->episode_kind = kind; s->recovery_point = s->snd_max; s->nrtx_segs = 0;
        }
    }
    for (j = i; j < stop; j++) {
        if (kind != K_PROBE) {
            if (s->s_ep[j] != s->episode) s->rtx_segs[s->nrtx_segs++] = j;
            s->s_ep[j] = s->episode;
        }
        s->s_rt[j] = t;
    }
    int64_t *x = s->rx + 7 * s->nrx++;
    x[0] = t; x[1] = seq; x[2] = end; x[3] = kind; x[4] = row;
    x[5] = kind != K_PROBE ? s->episode : -1; x[6] = (end <= s->una) ? 2 : 0;
}

static void advance(st_t *s, int64_t t, int64_t ack) {
    int64_t n = bisect_right_end(s, ack);
    if (n > s->sh) {
        int any = 0;
        for (int64_t j = s->sh; j < n; j++) any |= s->s_rt[j] >= 0;
        if (!any) { s->karn[2 * s->nkarn] = t; s->karn[2 * s->nkarn + 1] = t - s->s_t[n - 1]; s->nkarn++; }
    }
    s->sh = n;
    if (s->sh < s->sn && s->s_start[s->sh] < ack) s->s_start[s->sh] = ack;
    s->una = ack;
    s->last_advance_t = t;
    int64_t k = 0;
    while (k < s->nsacked && s->sr[k] <= ack) k++;
    if (k) {
        memmove(s->sl, s->sl + k, (s->nsacked - k) * 8);
        memmove(s->sr, s->sr + k, (s->nsacked - k) * 8);
        s->nsacked -= k;
    }
    if (s->nsacked && s->sl[0] < ack) s->sl[0] = ack;
    if (s->recovery_point != NONE && ack >= s->recovery_point) {
        s->recovery_point = NONE; s->episode_kind = -1;
    }
}

static void dsack(st_t *s, int64_t t, int64_t l, int64_t r) {
    for (int64_t j = s->nrx - 1; j >= 0; j--) {
        int64_t *x = s->rx + 7 * j;
        if (x[0] <= t && x[1] < r && l < x[2]) { x[6] |= 1; return; }
    }
}

static int64_t sacked_sum(st_t *s) {
    int64_t top = s->have_max ? s->data_max : 0, sum = 0;
    for (int64_t j = 0; j < s->nsacked; j++) {
        int64_t v = (s->sr[j] < top ? s->sr[j] : top) - s->sl[j];
        sum += v > 0 ? v : 0;
    }
    return sum;
}

/* Rows of one flow in capture order: kind[i] 1 = segment from the sender, 2 = ACK from
 * the receiver (ACK flag, no RST), 0 = neither (analysis/senderrun.py Rows).  val:
 * unwrapped sequence number of a segment, cumulative ACK of an ACK; end: seq + payload
 * + SYN + FIN.  fl bits: 1 SYN, 2 FIN, 4 pure ACK.  sack: the unwrapped (l, r) pairs of the ACK rows' blocks, nsack[i] of them per row.
 * Outputs per row: row_series (index of the series point recorded, or -1), advanced
 * (the ACK moved SND.UNA); per series point: pipe, sacked, wireshark, shown; rtx:
 * 7 values per retransmission (t, seq, end, kind, row, episode, spurious | acked_before
 * << 1); karn: (t, sample) pairs; misc: dupacks, data_start.  Returns the number of
 * series points, or -1 when out of memory. */
int64_t tb_sender(int64_t m, const uint8_t *kindv, const int64_t *tv, const int64_t *valv,
                  const int64_t *endv, const uint8_t *flv, const int64_t *winv,
                  const uint8_t *nsackv, const int64_t *sackv, int64_t smss,
                  int64_t *row_series, uint8_t *advanced, int64_t *s_pipe, int64_t *s_sacked,
                  int64_t *s_ws, uint8_t *s_shown, int64_t *rx, int64_t *nrx, int64_t *karn,
                  int64_t *nkarn, int64_t *misc) {
    st_t s;
    memset(&s, 0, sizeof s);
    s.smss = smss; s.last_advance_t = s.last_dupack_t = s.last_signal_t = -1;
    s.episode = -1; s.episode_kind = -1; s.recovery_point = NONE; s.w_valid = 1;
    s.rx = rx; s.karn = karn;
    int64_t cap = m > 0 ? m : 1, ns = 0, rc = 0, cur = 0;
    s.s_start = malloc(cap * 8); s.s_end = malloc(cap * 8); s.s_t = malloc(cap * 8);
    s.s_ep = malloc(cap * 8); s.s_rt = malloc(cap * 8); s.rtx_segs = malloc(cap * 8);
    s.w_alive = calloc(cap, 1);
    s.by_end.key = malloc(cap * 8); s.by_end.id = malloc(cap * 8);
    s.by_start.key = malloc(cap * 8); s.by_start.id = malloc(cap * 8);
    if (!s.s_start || !s.s_end || !s.s_t || !s.s_ep || !s.s_rt || !s.rtx_segs || !s.w_alive
        || !s.by_end.key || !s.by_end.id || !s.by_start.key || !s.by_start.id) { rc = -1; goto done; }
    for (int64_t i = 0; i < m; i++) {
        int64_t t = tv[i], seq = valv[i], end = endv[i];
        int syn = flv[i] & 1, fin = (flv[i] >> 1) & 1;
        const int64_t *blk = sackv + 2 * cur;
        int nb = kindv[i] == 2 ? nsackv[i] : 0;
        cur += nb;
        row_series[i] = -1; advanced[i] = 0;
        if (kindv[i] == 1) {
            if (s.have_max && seq > s.snd_max) s.w_valid = 0;
            if (end <= seq) continue;
            if (!s.have_max) {
                s.have_max = 1; s.snd_max = s.una = seq; s.data_start = s.data_max = seq + syn;
            }
            int64_t prior = s.snd_max;
            if (end - fin > s.data_max) s.data_max = end - fin;
            if (seq < prior && !(end - seq <= 1 && seq == prior - 1 && !(syn || fin)))
                retransmitted(&s, t, seq, end < prior ? end : prior, i);
            if (end > prior) {
                int64_t g = s.sn++;
                s.s_start[g] = seq > prior ? seq : prior; s.s_end[g] = end; s.s_t[g] = t;
                s.s_ep[g] = -1; s.s_rt[g] = -1;
                s.snd_max = end;
            }
            ws_add(&s, seq, end);
            int64_t ws = ws_value(&s);
            s_shown[ns] = s.w_valid && end - seq > syn + fin && ws > 0 && ws < 2000000000;
            s_ws[ns] = ws - (syn || fin);
        } else if (kindv[i] == 2) {
            int64_t ack = valv[i], win = winv[i];
            if (!s.have_max) continue;
            s.w_valid = 1;
            ws_ack(&s, ack);
            s.last_sack_sum = 0;
            for (int b = 0; b < nb && b < WS_SACK_BLOCKS; b++) s.last_sack_sum += blk[2 * b + 1] - blk[2 * b];
            int first = 0;
            if (nb && (blk[1] <= ack || (nb > 1 && blk[2] <= blk[0] && blk[1] <= blk[3]))) {
                dsack(&s, t, blk[0], blk[1]);
                first = 1;
            }
            if (ack > s.una) {
                advance(&s, t, ack);
                advanced[i] = 1;
            } else if (ack == s.una && (flv[i] & 4) && s.snd_max > s.una
                       && (nb > first || (s.have_win && win == s.last_win))) {
                s.dupacks++;
                s.last_dupack_t = s.last_signal_t = t;
            }
            for (int b = first; b < nb; b++) {
                int64_t l = blk[2 * b], r = blk[2 * b + 1];
                if (r > s.una) {
                    if (add_sack(&s, l > s.una ? l : s.una, r)) { rc = -1; goto done; }
                    s.last_signal_t = t;
                }
            }
            s.last_win = win; s.have_win = 1;
            s_ws[ns] = ws_value(&s);
            s_shown[ns] = 0;
        } else continue;
        s_pipe[ns] = pipe_now(&s);
        s_sacked[ns] = sacked_sum(&s);
        row_series[i] = ns++;
    }
    rc = ns;
    misc[0] = s.dupacks; misc[1] = s.have_max ? s.data_start : 0;
    *nrx = s.nrx; *nkarn = s.nkarn;
done:
    free(s.s_start); free(s.s_end); free(s.s_t); free(s.s_ep); free(s.s_rt); free(s.rtx_segs);
    free(s.w_alive); free(s.sl); free(s.sr);
    free(s.by_end.key); free(s.by_end.id); free(s.by_start.key); free(s.by_start.id);
    return rc;
}
