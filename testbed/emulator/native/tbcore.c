/* See tbcore.h.  Every step mirrors the Python reference line by line. */
#include "tbcore.h"
#include <math.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

/* --- MT19937 exactly as CPython's _randommodule.c ------------------------------------------ */
void tb_mt_load(tb_mt *g, const uint32_t state[625]) {
    memcpy(g->mt, state, 624 * sizeof(uint32_t));
    g->mti = (int32_t)state[624];
}

static uint32_t mt_next(tb_mt *g) {
    static const uint32_t mag01[2] = {0x0u, 0x9908b0dfu};
    uint32_t y;
    uint32_t *mt = g->mt;
    if (g->mti >= 624) {
        int kk;
        for (kk = 0; kk < 624 - 397; kk++) {
            y = (mt[kk] & 0x80000000u) | (mt[kk + 1] & 0x7fffffffu);
            mt[kk] = mt[kk + 397] ^ (y >> 1) ^ mag01[y & 1u];
        }
        for (; kk < 623; kk++) {
            y = (mt[kk] & 0x80000000u) | (mt[kk + 1] & 0x7fffffffu);
            mt[kk] = mt[kk + (397 - 624)] ^ (y >> 1) ^ mag01[y & 1u];
        }
        y = (mt[623] & 0x80000000u) | (mt[0] & 0x7fffffffu);
        mt[623] = mt[396] ^ (y >> 1) ^ mag01[y & 1u];
        g->mti = 0;
    }
    y = mt[g->mti++];
    y ^= (y >> 11);
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= (y >> 18);
    return y;
}

double tb_mt_random(tb_mt *g) {  /* random.random(): 53-bit double in [0, 1) */
    uint32_t a = mt_next(g) >> 5, b = mt_next(g) >> 6;
    return (a * 67108864.0 + b) * (1.0 / 9007199254740992.0);
}

typedef struct tb_sched tb_sched;
static void sched_free(tb_sched *s);

/* --- engine ---------------------------------------------------------------------------------- */
tb_engine *tb_engine_new(int n_dirs, const tb_dir_cfg *dirs, int n_media, const tb_medium_cfg *media) {
    tb_engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->n_dirs = n_dirs;
    e->n_media = n_media;
    e->wake_fd = -1;
    e->dirs = calloc((size_t)(n_dirs > 0 ? n_dirs : 1), sizeof(tb_dir));
    e->media = calloc((size_t)(n_media > 0 ? n_media : 1), sizeof(tb_medium));
    if (!e->dirs || !e->media) { tb_engine_free(e); return NULL; }
    for (int m = 0; m < n_media; m++) {
        e->media[m].cfg = media[m];
        tb_mt_load(&e->media[m].rng, media[m].mt_state);
    }
    int attached[64] = {0};
    for (int i = 0; i < n_dirs; i++) {
        tb_dir *d = &e->dirs[i];
        d->cfg = dirs[i];
        d->cfg.drop_idx = NULL;
        if (dirs[i].n_drop > 0) {
            int64_t *copy = malloc((size_t)dirs[i].n_drop * sizeof(int64_t));
            if (!copy) { tb_engine_free(e); return NULL; }
            memcpy(copy, dirs[i].drop_idx, (size_t)dirs[i].n_drop * sizeof(int64_t));
            d->cfg.drop_idx = copy;
        }
        d->loss = (tb_lossgen){.kind = d->cfg.loss_kind, .p = d->cfg.p, .r = d->cfg.r,
                               .loss_bad = d->cfg.loss_bad, .loss_good = d->cfg.loss_good,
                               .drop_idx = d->cfg.drop_idx, .n_drop = d->cfg.n_drop};
        d->last_arrival = d->origin_applied = INT64_MIN;
        tb_mt_load(&d->loss_rng, dirs[i].mt_loss);
        tb_mt_load(&d->jitter_rng, dirs[i].mt_jitter);
        d->air_id = dirs[i].medium >= 0 && dirs[i].medium < 64 ? attached[dirs[i].medium]++ : -1;
        d->q_cap = 1024;
        d->q_finish = malloc((size_t)d->q_cap * sizeof(int64_t));
        d->q_size = malloc((size_t)d->q_cap * sizeof(int64_t));
        if (!d->q_finish || !d->q_size) { tb_engine_free(e); return NULL; }
    }
    return e;
}

void tb_engine_free(tb_engine *e) {
    if (!e) return;
    if (e->dirs)
        for (int i = 0; i < e->n_dirs; i++) {
            free(e->dirs[i].q_finish);
            free(e->dirs[i].q_size);
            free((void *)e->dirs[i].cfg.drop_idx);
            sched_free(e->dirs[i].sch);
        }
    free(e->dirs);
    free(e->media);
    free(e);
}

int tb_engine_dirs(const tb_engine *e) { return e->n_dirs; }
int64_t tb_last_arrival(const tb_engine *e, int dir) { return e->dirs[dir].last_arrival; }

/* The origin asked for from another thread while the I/O loop runs (tbloop.c applies it with
 * tb_apply_origin_request at its next iteration; the write to wake_fd wakes it). Once. */
void tb_request_origin(tb_engine *e, int64_t t) {
    if (__atomic_load_n(&e->origin_state, __ATOMIC_ACQUIRE) != 0) return;
    e->origin_req = t;
    __atomic_store_n(&e->origin_state, 1, __ATOMIC_RELEASE);
    int fd = __atomic_load_n(&e->wake_fd, __ATOMIC_ACQUIRE);
    uint64_t one = 1;
    if (fd >= 0 && write(fd, &one, sizeof one) < 0) { /* the loop sees the state at its next turn */ }
}

/* In the loop's thread: set every direction's origin to the one asked for, at the earliest its
 * last arrival.  1 when it did now. */
int tb_apply_origin_request(tb_engine *e) {
    if (__atomic_load_n(&e->origin_state, __ATOMIC_ACQUIRE) != 1) return 0;
    for (int k = 0; k < e->n_dirs; k++) {
        int64_t t = e->origin_req > e->dirs[k].last_arrival ? e->origin_req : e->dirs[k].last_arrival;
        tb_set_origin(e, k, t);
    }
    __atomic_store_n(&e->origin_state, 2, __ATOMIC_RELEASE);
    return 1;
}

int64_t tb_applied_origin(const tb_engine *e, int dir) {
    return __atomic_load_n(&e->dirs[dir].origin_applied, __ATOMIC_ACQUIRE);
}

/* DropTailQueue.admit */
static int q_admit(tb_dir *d, int64_t now, int64_t len) {
    while (d->q_len && d->q_finish[d->q_head] <= now) {
        d->q_bytes -= d->q_size[d->q_head];
        d->q_head = (d->q_head + 1) & (d->q_cap - 1);
        d->q_len--;
    }
    if (d->cfg.qlim_packets >= 0 && d->q_len >= d->cfg.qlim_packets) return 0;
    return d->cfg.qlim_bytes < 0 || d->q_bytes + len <= d->cfg.qlim_bytes;
}

/* DropTailQueue.push; returns -1 when out of memory */
static int q_push(tb_dir *d, int64_t finish, int64_t len) {
    if (d->q_len == d->q_cap) {
        int64_t cap = d->q_cap * 2;
        int64_t *f = malloc((size_t)cap * sizeof(int64_t)), *s = malloc((size_t)cap * sizeof(int64_t));
        if (!f || !s) { free(f); free(s); return -1; }
        for (int64_t k = 0; k < d->q_len; k++) {
            f[k] = d->q_finish[(d->q_head + k) & (d->q_cap - 1)];
            s[k] = d->q_size[(d->q_head + k) & (d->q_cap - 1)];
        }
        free(d->q_finish); free(d->q_size);
        d->q_finish = f; d->q_size = s; d->q_head = 0; d->q_cap = cap;
    }
    int64_t at = (d->q_head + d->q_len) & (d->q_cap - 1);
    d->q_finish[at] = finish;
    d->q_size[at] = len;
    d->q_len++;
    d->q_bytes += len;
    if (d->q_len > d->st.queue_max_packets) d->st.queue_max_packets = d->q_len;
    if (d->q_bytes > d->st.queue_max_bytes) d->st.queue_max_bytes = d->q_bytes;
    return 0;
}

/* Serializer.send */
static int64_t ser_send(tb_dir *d, int64_t now, int64_t len) {
    int64_t start;
    unsigned __int128 rem;
    if (now > d->busy_ns) { start = now; rem = 0; }
    else { start = d->busy_ns; rem = (unsigned __int128)d->rem; }
    rem += (unsigned __int128)(len + d->cfg.overhead) * (unsigned __int128)d->cfg.rate_unit;
    unsigned __int128 num = (unsigned __int128)d->cfg.rate_num;
    int64_t q = (int64_t)(rem / num);
    d->rem = (int64_t)(rem % num);
    d->busy_ns = start + q;
    return d->busy_ns;
}

/* AirMedium.transmit */
static void air_transmit(tb_medium *m, int64_t now, int64_t ip_bytes, tb_dir *d,
                         int64_t *data_end_out, int64_t *end_out) {
    const tb_medium_cfg *c = &m->cfg;
    int64_t start = now > m->free_ns ? now : m->free_ns;
    int64_t bits = 22 + 8 * (ip_bytes + c->mac_overhead);
    int64_t symbols = (bits + c->ndbps - 1) / c->ndbps;
    if (bits <= 0) symbols = -((-bits) / c->ndbps);  /* Python's ceil for non-positive values */
    int64_t ppdu = c->preamble_ns + symbols * c->symbol_ns;
    int64_t data_start = start + c->difs_ns;
    if (c->cw) {
        int64_t slots = (int64_t)(tb_mt_random(&m->rng) * (double)(c->cw + 1));
        m->st.backoff_slots += slots;
        data_start += slots * c->slot_ns;
    }
    int64_t data_end = data_start + ppdu;
    int64_t end = data_end + c->tail_ns;
    m->free_ns = end;
    d->st.airtime_ns += end - start;
    m->st.exchanges++;
    *data_end_out = data_end;
    *end_out = end;
}

/* the generator's answer for one frame: lost? (loss.py) */
static int lost(tb_lossgen *g, tb_mt *rng) {
    switch (g->kind) {
    case TB_LOSS_ALWAYS: return 1;
    case TB_LOSS_BERNOULLI: return tb_mt_random(rng) < g->p;
    case TB_LOSS_GE: {
        double h;
        if (g->ge_bad) {
            if (tb_mt_random(rng) < g->r) g->ge_bad = 0;
            h = g->loss_bad;
        } else {
            if (tb_mt_random(rng) < g->p) g->ge_bad = 1;
            h = g->loss_good;
        }
        return h == 1.0 || (h != 0.0 && tb_mt_random(rng) < h);
    }
    case TB_LOSS_DROPLIST: {
        int64_t i = g->drop_pos++;
        while (g->drop_next < g->n_drop && g->drop_idx[g->drop_next] < i) g->drop_next++;
        return g->drop_next < g->n_drop && g->drop_idx[g->drop_next] == i;
    }
    default: return 0;
    }
}

static int sched_arrive(tb_engine *e, tb_dir *d, int64_t now, int64_t len, const uint8_t *f,
                        uint32_t caplen, int64_t *t_out);

int tb_arrive(tb_engine *e, int dir, int64_t now, int64_t len, int64_t *t_out) {
    return tb_arrive_frame(e, dir, now, len, NULL, 0, t_out);
}

/* DirectionModel.arrive; returns the verdict, *t_out the time (or -1 on out of memory) */
int tb_arrive_frame(tb_engine *e, int dir, int64_t now, int64_t len, const uint8_t *f,
                    uint32_t caplen, int64_t *t_out) {
    tb_dir *d = &e->dirs[dir];
    const tb_dir_cfg *c = &d->cfg;
    int64_t depart;
    d->last_arrival = now;
    if (d->sch) return sched_arrive(e, d, now, len, f, caplen, t_out);
    d->st.frames_in++;
    d->st.bytes_in += len;
    if (!c->shaped) {
        depart = now;
    } else {
        int64_t finish;
        if (!q_admit(d, now, len)) {
            d->st.dropped_queue++;
            *t_out = now;
            return TB_DROP_QUEUE;
        }
        if (c->medium < 0) {
            depart = finish = ser_send(d, now, len);
        } else {
            air_transmit(&e->media[c->medium], now, len - 14, d, &depart, &finish);
        }
        if (q_push(d, finish, len) < 0) return -1;
    }
    if (c->loss_kind != TB_LOSS_NONE && lost(&d->loss, &d->loss_rng)) {
        d->st.dropped_loss++;
        *t_out = depart;
        return TB_DROP_LOSS;
    }
    int64_t t = depart + c->delay_ns;
    if (c->jitter_span > 1)
        t += (int64_t)(tb_mt_random(&d->jitter_rng) * (double)c->jitter_span);
    if (!c->reorder) {
        if (t < d->last_delivery) t = d->last_delivery;
        d->last_delivery = t;
    }
    d->st.delivered++;
    d->st.bytes_delivered += len;
    *t_out = t;
    return TB_DELIVER;
}

int64_t tb_arrive_batch(tb_engine *e, int64_t n, const int32_t *dir, const int64_t *now,
                        const int64_t *len, uint8_t *verdict, int64_t *t) {
    for (int64_t i = 0; i < n; i++) {
        int v = tb_arrive(e, dir[i], now[i], len[i], &t[i]);
        if (v < 0) return -1;
        verdict[i] = (uint8_t)v;
    }
    return n;
}

void tb_dir_stats_get(const tb_engine *e, int dir, tb_dir_stats *out) { *out = e->dirs[dir].st; }
void tb_medium_stats_get(const tb_engine *e, int m, tb_medium_stats *out) { *out = e->media[m].st; }

/* --- link schedules: schedule_model.ScheduledDirection, line for line -------------------------- */
typedef struct {   /* _Segment: the values in force from `start` on */
    int64_t start;
    int32_t step, mask;                     /* step -1: the base LinkSpec */
    int64_t num, unit, delay_ns, jitter_span, reorder, qp, qb, limit_packets, limit_bytes;
    double rate, delay;
    int32_t loss, own_loss;                 /* generator indices */
} tb_seg;

typedef struct { int64_t down, up; int32_t hold; } tb_outage;
typedef struct { int64_t t, seq; tb_change c; } tb_pending;         /* a time-tied record */
typedef struct { int32_t at_kind, kind, item; int64_t value, seq; } tb_tied;  /* kind 0 step, 1 down */
typedef struct {
    int64_t seen, start_ns, end_ns, until_ns;
    int32_t recorded, pad;
    tb_tcpseg *lost; int64_t n_lost, cap_lost;   /* the dropped frames' TCP ranges (copies_until) */
} tb_evstate;

typedef struct tb_sched {
    tb_sched_cfg cfg;
    tb_seg *segs; int64_t n_segs, cur[3];
    tb_lossgen *gens; int64_t n_gens;
    int32_t has_origin, has_last_rate;
    int64_t origin, busy, rem, last_num, last_unit;
    tb_outage *outages; int64_t n_out;
    tb_tied *tied; int64_t n_tied;
    tb_pending *pending; int64_t n_pend;
    tb_change *changes; int64_t n_changes;
    tb_evstate *ev;
    int64_t n, nbytes;                      /* frames and bytes arrived since the origin */
    int64_t op, op_left, op_t;              /* the trace: last opportunity used */
    int32_t wants_frames, pad;              /* an event has copies_until */
    tb_sched_stats st;
} tb_sched;

static void sched_free(tb_sched *s) {
    if (!s) return;
    if (s->ev)
        for (int64_t i = 0; i < s->cfg.n_events; i++) free(s->ev[i].lost);
    free(s->segs); free(s->gens); free(s->outages); free(s->tied); free(s->pending);
    free(s->changes); free(s->ev);
    free(s);
}

static int32_t new_gen(tb_sched *s, const tb_step_cfg *v) {   /* make_loss: a fresh generator */
    s->gens[s->n_gens] = (tb_lossgen){.kind = v->loss_kind, .p = v->p, .r = v->r,
                                      .loss_bad = v->loss_bad, .loss_good = v->loss_good,
                                      .drop_idx = v->drop_idx, .n_drop = v->n_drop};
    return (int32_t)s->n_gens++;
}

static const tb_step_cfg *seg_values(const tb_sched *s, const tb_seg *g) {
    return g->step < 0 ? &s->cfg.base : &s->cfg.steps[g->step];
}

/* _Segment.derive: the previous segment's LinkSpec with this one's changes */
static void derive(tb_sched *s, int64_t overhead, tb_seg *g, const tb_seg *prev) {
    const tb_step_cfg *v = seg_values(s, g);
    int32_t m = g->mask;
    if (prev) {
        g->num = prev->num; g->unit = prev->unit; g->rate = prev->rate; g->delay = prev->delay;
        g->delay_ns = prev->delay_ns; g->jitter_span = prev->jitter_span; g->reorder = prev->reorder;
        g->qp = prev->qp; g->qb = prev->qb;
    }
    if (m & TB_F_RATE) { g->num = v->rate_num; g->unit = v->rate_unit; g->rate = v->rate; }
    if (m & TB_F_DELAY) { g->delay = v->delay; g->delay_ns = v->delay_ns; }
    if (m & TB_F_JITTER) g->jitter_span = v->jitter_span;
    if (m & TB_F_REORDER) g->reorder = v->reorder;
    if (m & TB_F_QPACKETS) g->qp = v->queue_packets;
    if (m & TB_F_QBYTES) g->qb = v->queue_bytes;
    g->loss = (m & TB_F_LOSS) || !prev ? g->own_loss : prev->loss;
    /* LinkSpec.queue_limit_packets */
    if (g->qp >= 0) g->limit_packets = g->qp;
    else if (g->qb >= 0 || g->num == 0) g->limit_packets = -1;
    else {
        double bdp = g->rate * 2 * g->delay / 8 / (double)(s->cfg.frame_bytes + overhead);
        int64_t c = (int64_t)ceil(bdp);
        g->limit_packets = c > s->cfg.min_queue ? c : s->cfg.min_queue;
    }
    g->limit_bytes = g->qb;
}

int tb_schedule(tb_engine *e, int dir, const tb_sched_cfg *cfg) {
    tb_dir *d = &e->dirs[dir];
    int64_t ns = cfg->n_steps, no = cfg->n_outages, ne = cfg->n_events;
    tb_sched *s = calloc(1, sizeof *s);
    if (!s) return -1;
    s->cfg = *cfg;
    s->segs = calloc((size_t)ns + 1, sizeof *s->segs);
    s->gens = calloc((size_t)ns + 1, sizeof *s->gens);
    s->outages = calloc((size_t)no + 1, sizeof *s->outages);
    s->tied = calloc((size_t)(ns + no) + 1, sizeof *s->tied);
    s->pending = calloc((size_t)(ns + 2 * no) + 2, sizeof *s->pending);
    s->changes = calloc((size_t)(ns + 2 * no + ne) + 2, sizeof *s->changes);
    s->ev = calloc((size_t)ne + 1, sizeof *s->ev);
    if (!s->segs || !s->gens || !s->outages || !s->tied || !s->pending || !s->changes || !s->ev) {
        sched_free(s);
        return -1;
    }
    tb_seg *base = &s->segs[0];
    base->start = INT64_MIN;
    base->step = -1;
    base->mask = -1;
    base->own_loss = new_gen(s, &cfg->base);
    derive(s, d->cfg.overhead, base, NULL);
    s->n_segs = 1;
    s->op = -1;
    for (int64_t i = 0; i < ne; i++) s->wants_frames |= cfg->events[i].copies;
    d->sch = s;
    return 0;
}

static void record(tb_sched *s, int32_t kind, int32_t item, int has_conf, int64_t conf, int64_t actual) {
    s->changes[s->n_changes++] = (tb_change){.kind = kind, .item = item, .configured_ns = conf,
                                             .actual_ns = actual, .frames_before = s->n,
                                             .has_configured = has_conf};
    s->st.changes++;
}

static void pend_add(tb_sched *s, int64_t t, int64_t seq, int32_t kind, int32_t item, int64_t conf) {
    int64_t i = s->n_pend++;   /* kept sorted by (t, seq) */
    while (i > 0 && (s->pending[i - 1].t > t || (s->pending[i - 1].t == t && s->pending[i - 1].seq > seq))) {
        s->pending[i] = s->pending[i - 1];
        i--;
    }
    s->pending[i] = (tb_pending){t, seq, {.kind = kind, .item = item, .configured_ns = conf,
                                          .has_configured = 1}};
}

static void emit_until(tb_sched *s, int64_t now) {
    int64_t k = 0;
    while (k < s->n_pend && s->pending[k].t <= now) {
        tb_change *c = &s->pending[k].c;
        record(s, c->kind, c->item, c->has_configured, c->configured_ns, s->pending[k].t);
        k++;
    }
    if (k) {
        memmove(s->pending, s->pending + k, (size_t)(s->n_pend - k) * sizeof *s->pending);
        s->n_pend -= k;
    }
}

static int outage_less(const tb_outage *a, const tb_outage *b) {
    return a->down != b->down ? a->down < b->down : a->up != b->up ? a->up < b->up : a->hold < b->hold;
}

static void add_outage(tb_sched *s, int32_t item, int64_t down, int64_t seq, int configured) {
    const tb_outage_cfg *o = &s->cfg.outages[item];
    tb_outage x = {down, down + o->duration_ns, o->hold};
    int64_t i = s->n_out++;
    while (i > 0 && outage_less(&x, &s->outages[i - 1])) {
        s->outages[i] = s->outages[i - 1];
        i--;
    }
    s->outages[i] = x;
    if (configured) pend_add(s, down, seq, TB_CH_DOWN, item, down);
    else record(s, TB_CH_DOWN, item, 0, 0, down);
    pend_add(s, x.up, seq + 1, TB_CH_UP, item, x.up);
}

static void insert_segment(tb_sched *s, int64_t overhead, tb_seg g) {
    int64_t p = 0;
    while (p < s->n_segs && s->segs[p].start <= g.start) p++;   /* bisect_right */
    memmove(s->segs + p + 1, s->segs + p, (size_t)(s->n_segs - p) * sizeof *s->segs);
    s->segs[p] = g;
    s->n_segs++;
    for (int64_t k = p; k < s->n_segs; k++) derive(s, overhead, &s->segs[k], k ? &s->segs[k - 1] : NULL);
    for (int j = 0; j < 3; j++)
        if (s->cur[j] >= p) s->cur[j]++;
}

static tb_seg step_segment(tb_sched *s, int64_t start, int32_t item) {
    const tb_step_cfg *v = &s->cfg.steps[item];
    tb_seg g = {.start = start, .step = item, .mask = v->mask, .own_loss = -1};
    if (v->mask & TB_F_LOSS) g.own_loss = new_gen(s, v);
    return g;
}

int tb_set_origin(tb_engine *e, int dir, int64_t t) {
    tb_dir *d = &e->dirs[dir];
    tb_sched *s = d->sch;
    if (!s) {   /* a constant direction ignores it (DirectionModel.set_origin); the first is kept */
        int64_t none = INT64_MIN;
        __atomic_compare_exchange_n(&d->origin_applied, &none, t, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
        return 0;
    }
    if (s->has_origin) return -1;
    if (t < d->last_arrival) return -2;
    __atomic_store_n(&d->origin_applied, t, __ATOMIC_RELEASE);
    s->has_origin = 1;
    s->origin = t;
    int64_t seq = 0;
    for (int32_t i = 0; i < s->cfg.n_steps; i++, seq++) {
        const tb_step_cfg *v = &s->cfg.steps[i];
        if (v->at_kind == TB_AT_TIME) {
            int64_t at = t + v->at;
            s->segs[s->n_segs] = step_segment(s, at, i);
            derive(s, d->cfg.overhead, &s->segs[s->n_segs], &s->segs[s->n_segs - 1]);
            s->n_segs++;
            pend_add(s, at, seq, TB_CH_STEP, i, at);
        }
        else s->tied[s->n_tied++] = (tb_tied){v->at_kind, 0, i, v->at, seq};
    }
    for (int32_t i = 0; i < s->cfg.n_outages; i++, seq += 2) {
        const tb_outage_cfg *o = &s->cfg.outages[i];
        if (o->at_kind == TB_AT_TIME) add_outage(s, i, t + o->at, seq, 1);
        else s->tied[s->n_tied++] = (tb_tied){o->at_kind, 1, i, o->at, seq};
    }
    for (int64_t i = 0; i < s->cfg.n_events; i++) {
        const tb_event_cfg *v = &s->cfg.events[i];
        s->ev[i].start_ns = v->frame ? 0 : t + v->start_ns;
        s->ev[i].end_ns = v->frame ? 0 : t + v->end_ns;
        s->ev[i].until_ns = t + v->until_ns;
    }
    if (s->cfg.n_ms) pend_add(s, t, -1, TB_CH_TRACE, 0, t);
    emit_until(s, t);
    return 0;
}

int64_t tb_drain_changes(tb_engine *e, int dir, int64_t now, int has_now, tb_change *out, int64_t cap) {
    tb_sched *s = e->dirs[dir].sch;
    if (!s) return 0;
    if (has_now) emit_until(s, now);
    int64_t n = s->n_changes < cap ? s->n_changes : cap;
    memcpy(out, s->changes, (size_t)n * sizeof *out);
    memmove(s->changes, s->changes + n, (size_t)(s->n_changes - n) * sizeof *out);
    s->n_changes -= n;
    return n;
}

void tb_sched_stats_get(const tb_engine *e, int dir, tb_sched_stats *out) {
    const tb_sched *s = e->dirs[dir].sch;
    *out = s ? s->st : (tb_sched_stats){0};
}

/* _resolve: frame- and byte-tied items whose count is reached take effect at `now` */
static void resolve(tb_sched *s, int64_t overhead, int64_t now) {
    tb_tied due[s->n_tied];
    int64_t nd = 0, kept = 0;
    for (int64_t i = 0; i < s->n_tied; i++) {
        tb_tied x = s->tied[i];
        if ((x.at_kind == TB_AT_FRAMES ? s->n : s->nbytes) >= x.value) {
            int64_t j = nd++;   /* sorted by seq */
            while (j > 0 && due[j - 1].seq > x.seq) { due[j] = due[j - 1]; j--; }
            due[j] = x;
        }
        else s->tied[kept++] = x;
    }
    s->n_tied = kept;
    for (int64_t i = 0; i < nd; i++) {
        if (due[i].kind == 0) {
            insert_segment(s, overhead, step_segment(s, now, due[i].item));
            record(s, TB_CH_STEP, due[i].item, 0, 0, now);
        }
        else add_outage(s, due[i].item, now, due[i].seq, 0);
    }
}

static const tb_seg *seg_at(tb_sched *s, int stage, int64_t t) {
    int64_t i = s->cur[stage];
    while (i + 1 < s->n_segs && s->segs[i + 1].start <= t) i++;
    s->cur[stage] = i;
    return &s->segs[i];
}

static const tb_outage *outage_at(const tb_sched *s, int64_t t) {
    for (int64_t i = 0; i < s->n_out; i++)
        if (s->outages[i].down <= t && t < s->outages[i].up) return &s->outages[i];
    return NULL;
}

static int64_t floordiv(int64_t a, int64_t b) { int64_t q = a / b; return (a % b && (a < 0) != (b < 0)) ? q - 1 : q; }

static int64_t op_time(const tb_sched *s, int64_t n) {
    int64_t len = s->cfg.n_ms, loops = floordiv(n, len);
    return s->origin + loops * s->cfg.period_ns + s->cfg.ms_ns[n - loops * len];
}

static int64_t first_op_after(const tb_sched *s, int64_t t) {   /* first opportunity at a time > t */
    if (t < s->origin) return 0;
    int64_t loops = (t - s->origin) / s->cfg.period_ns, rest = (t - s->origin) % s->cfg.period_ns;
    int64_t lo = 0, hi = s->cfg.n_ms;   /* bisect_right(ms_ns, rest) */
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (rest < s->cfg.ms_ns[mid]) hi = mid; else lo = mid + 1;
    }
    return loops * s->cfg.n_ms + lo;
}

static int64_t trace_send(tb_sched *s, int64_t a, int64_t len) {
    int64_t need = len - 14 + 4;   /* ETH_HEADER, TUN_HEADER */
    const int64_t opb = 1504;      /* OPPORTUNITY_BYTES */
    if (s->op_left && a < s->op_t && outage_at(s, s->op_t) == NULL) {
        int64_t take = need < s->op_left ? need : s->op_left;
        need -= take;
        s->op_left -= take;
    }
    while (need > 0) {
        int64_t n = first_op_after(s, a > s->busy - 1 ? a : s->busy - 1);
        if (n < s->op + 1) n = s->op + 1;
        int64_t t = op_time(s, n);
        const tb_outage *o = s->n_out ? outage_at(s, t) : NULL;
        while (o) {
            int64_t m = first_op_after(s, o->up - 1);
            if (m > n) n = m;
            t = op_time(s, n);
            o = outage_at(s, t);
        }
        s->op = n; s->op_t = t;
        int64_t take = need < opb ? need : opb;
        need -= take;
        s->op_left = opb - take;
        s->busy = t;
    }
    return s->op_t;
}

static int64_t transmit(tb_sched *s, int64_t overhead, int64_t a, int64_t len) {
    int64_t busy = s->busy, st = a > busy ? a : busy;
    int moved = 0;
    if (s->n_out) {
        const tb_outage *o = outage_at(s, st);
        while (o) {
            st = o->up; moved = 1;
            o = outage_at(s, st);
        }
    }
    if (s->cfg.n_ms && s->has_origin && st >= s->origin) {
        s->has_last_rate = 0;
        return trace_send(s, a, len);
    }
    const tb_seg *g = seg_at(s, 1, st);
    int64_t finish, rem;
    if (g->num == 0) { finish = st; rem = 0; }
    else {
        int same = s->has_last_rate && s->last_num == g->num && s->last_unit == g->unit;
        unsigned __int128 r = (st == busy && !moved && same) ? (unsigned __int128)s->rem : 0;
        r += (unsigned __int128)(len + overhead) * (unsigned __int128)g->unit;
        finish = st + (int64_t)(r / (unsigned __int128)g->num);
        rem = (int64_t)(r % (unsigned __int128)g->num);
        s->has_last_rate = 1; s->last_num = g->num; s->last_unit = g->unit;
    }
    s->rem = rem;
    s->busy = finish;
    return finish;
}

static inline uint16_t get16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static inline uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* schedule_model.tcp_segment: 1 and *out filled for an IPv4/TCP segment with a payload, else 0 */
int tb_tcp_segment(const uint8_t *f, uint32_t caplen, tb_tcpseg *out) {
    if (!f || caplen < 34 || get16(f + 12) != 0x0800 || f[14] >> 4 != 4 || f[23] != 6
        || (get16(f + 20) & 0x3FFF)) return 0;
    uint32_t ihl = (f[14] & 15u) * 4, l4 = 14 + ihl;
    if (caplen < l4 + 20) return 0;
    int64_t payload = (int64_t)get16(f + 16) - ihl - (f[l4 + 12] >> 4) * 4;
    if (payload <= 0) return 0;
    *out = (tb_tcpseg){.src = get32(f + 26), .dst = get32(f + 30), .seq = get32(f + l4 + 4),
                       .len = (uint32_t)payload, .sport = get16(f + l4), .dport = get16(f + l4 + 2)};
    return 1;
}

/* _overlap: the same addresses and ports and overlapping sequence ranges (modulo 2^32) */
static int tcp_copy(const tb_tcpseg *a, const tb_tcpseg *b) {
    return a->src == b->src && a->dst == b->dst && a->sport == b->sport && a->dport == b->dport
        && ((uint32_t)(b->seq - a->seq) < a->len || (uint32_t)(a->seq - b->seq) < b->len);
}

static int sched_arrive(tb_engine *e, tb_dir *d, int64_t now, int64_t len, const uint8_t *f,
                        uint32_t caplen, int64_t *t_out) {
    tb_sched *s = d->sch;
    int64_t overhead = d->cfg.overhead, extra = 0;
    int drop_event = 0;
    d->st.frames_in++;
    d->st.bytes_in += len;
    if (s->has_origin) {
        if (s->n_pend && s->pending[0].t <= now) emit_until(s, now);
        if (s->n_tied) resolve(s, overhead, now);
        tb_tcpseg seg;
        int tcp = s->wants_frames && tb_tcp_segment(f, caplen, &seg);
        for (int64_t i = 0; i < s->cfg.n_events; i++) {
            const tb_event_cfg *v = &s->cfg.events[i];
            tb_evstate *st = &s->ev[i];
            if (tcp && st->n_lost && now < st->until_ns)
                for (int64_t k = 0; k < st->n_lost && !drop_event; k++)
                    drop_event = tcp_copy(&st->lost[k], &seg);
            if (len < v->min_bytes) continue;
            int hit;
            if (v->frame) {
                st->seen++;
                hit = v->frame <= st->seen && st->seen < v->frame + v->count;
            }
            else hit = st->start_ns <= now && now < st->end_ns;
            if (hit) {
                if (!st->recorded) {
                    st->recorded = 1;
                    record(s, TB_CH_EVENT, (int32_t)i, !v->frame, st->start_ns, now);
                }
                drop_event = drop_event || v->drop;
                extra += v->delay_ns;
                if (tcp && v->copies && now < st->until_ns) {
                    if (st->n_lost == st->cap_lost) {
                        int64_t cap = st->cap_lost ? 2 * st->cap_lost : 4;
                        tb_tcpseg *m = realloc(st->lost, (size_t)cap * sizeof *m);
                        if (!m) return -1;
                        st->lost = m; st->cap_lost = cap;
                    }
                    st->lost[st->n_lost++] = seg;
                }
            }
        }
        s->n++;
        s->nbytes += len;
    }
    if (s->n_out) {
        const tb_outage *o = outage_at(s, now);
        if (o && !o->hold) {
            s->st.dropped_outage++;
            *t_out = now;
            return TB_DROP_OUTAGE;
        }
    }
    const tb_seg *g = seg_at(s, 0, now);
    d->cfg.qlim_packets = g->limit_packets;
    d->cfg.qlim_bytes = g->limit_bytes;
    if (!q_admit(d, now, len)) {
        d->st.dropped_queue++;
        *t_out = now;
        return TB_DROP_QUEUE;
    }
    int64_t depart, finish;
    if (d->cfg.medium >= 0) air_transmit(&e->media[d->cfg.medium], now, len - 14, d, &depart, &finish);
    else depart = finish = transmit(s, overhead, now, len);
    if (q_push(d, finish, len) < 0) return -1;
    g = seg_at(s, 2, depart);
    int is_lost = g->loss >= 0 && lost(&s->gens[g->loss], &d->loss_rng);
    if (drop_event) {
        s->st.dropped_event++;
        *t_out = depart;
        return TB_DROP_EVENT;
    }
    if (is_lost) {
        d->st.dropped_loss++;
        *t_out = depart;
        return TB_DROP_LOSS;
    }
    int64_t t = depart + g->delay_ns;
    if (g->jitter_span > 1) t += (int64_t)(tb_mt_random(&d->jitter_rng) * (double)g->jitter_span);
    if (!g->reorder) {
        if (t < d->last_delivery) t = d->last_delivery;
        d->last_delivery = t;
    }
    if (extra) {
        t += extra;
        s->st.delayed_event++;
    }
    d->st.delivered++;
    d->st.bytes_delivered += len;
    *t_out = t;
    return TB_DELIVER;
}
