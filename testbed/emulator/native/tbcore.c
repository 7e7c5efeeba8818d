/* See tbcore.h.  Every step mirrors the Python reference line by line. */
#include "tbcore.h"
#include <stdlib.h>
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

/* --- engine ---------------------------------------------------------------------------------- */
tb_engine *tb_engine_new(int n_dirs, const tb_dir_cfg *dirs, int n_media, const tb_medium_cfg *media) {
    tb_engine *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->n_dirs = n_dirs;
    e->n_media = n_media;
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
        }
    free(e->dirs);
    free(e->media);
    free(e);
}

int tb_engine_dirs(const tb_engine *e) { return e->n_dirs; }

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

static int lost(tb_dir *d) {
    const tb_dir_cfg *c = &d->cfg;
    switch (c->loss_kind) {
    case TB_LOSS_ALWAYS: return 1;
    case TB_LOSS_BERNOULLI: return tb_mt_random(&d->loss_rng) < c->p;
    case TB_LOSS_GE: {
        double h;
        if (d->ge_bad) {
            if (tb_mt_random(&d->loss_rng) < c->r) d->ge_bad = 0;
            h = c->loss_bad;
        } else {
            if (tb_mt_random(&d->loss_rng) < c->p) d->ge_bad = 1;
            h = c->loss_good;
        }
        return h == 1.0 || (h != 0.0 && tb_mt_random(&d->loss_rng) < h);
    }
    case TB_LOSS_DROPLIST: {
        int64_t i = d->drop_pos++;
        while (d->drop_next < c->n_drop && c->drop_idx[d->drop_next] < i) d->drop_next++;
        return d->drop_next < c->n_drop && c->drop_idx[d->drop_next] == i;
    }
    default: return 0;
    }
}

/* DirectionModel.arrive; returns the verdict, *t_out the time (or -1 on out of memory) */
int tb_arrive(tb_engine *e, int dir, int64_t now, int64_t len, int64_t *t_out) {
    tb_dir *d = &e->dirs[dir];
    const tb_dir_cfg *c = &d->cfg;
    int64_t depart;
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
    if (c->loss_kind != TB_LOSS_NONE && lost(d)) {
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
