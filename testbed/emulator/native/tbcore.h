/* The emulator's model in C: the exact counterpart of testbed/emulator/{direction,queue,
 * serializer,loss,airtime}.py (see their docstrings for the semantics).  Sans-I/O: driven by
 * tb_arrive(engine, direction, now_ns, frame_len).  The Python model is the reference; the
 * differential test (tests/test_native_engine.py) checks both give identical verdicts and times. */
#ifndef TBCORE_H
#define TBCORE_H
#include <stdint.h>

#define TB_DELIVER 0
#define TB_DROP_LOSS 1
#define TB_DROP_QUEUE 2

enum { TB_LOSS_NONE = 0, TB_LOSS_ALWAYS, TB_LOSS_BERNOULLI, TB_LOSS_GE, TB_LOSS_DROPLIST };

/* CPython's random.Random: MT19937 (state as returned by getstate()[1]: 624 words + index). */
typedef struct { uint32_t mt[624]; int32_t mti; } tb_mt;

/* Configuration, filled by Python (testbed/emulator/native/__init__.py mirrors these). */
typedef struct {
    int64_t difs_ns, tail_ns, slot_ns, preamble_ns, symbol_ns;
    int32_t cw, mac_overhead, ndbps, pad;
    uint32_t mt_state[625];
} tb_medium_cfg;

typedef struct {
    int64_t rate_num;      /* serializer: rate = num/den bit/s; 0 = not shaped */
    int64_t rate_unit;     /* 8e9 * den: one byte in 1/num ns */
    int64_t overhead;
    int64_t delay_ns, jitter_span;   /* jitter uniform in [0, span) whole ns; span 1 = none */
    int64_t qlim_packets, qlim_bytes; /* -1: no limit */
    int32_t medium;        /* index into media, -1 none */
    int32_t reorder;
    int32_t shaped;        /* has a bottleneck queue (rate or medium) */
    int32_t loss_kind;
    double p, r, loss_bad, loss_good;
    const int64_t *drop_idx; int64_t n_drop;   /* sorted ascending, no duplicates */
    uint32_t mt_loss[625], mt_jitter[625];
} tb_dir_cfg;

typedef struct {  /* = DirectionStats */
    int64_t frames_in, delivered, dropped_loss, dropped_queue, queue_max_packets, queue_max_bytes,
            bytes_in, bytes_delivered, airtime_ns;
} tb_dir_stats;

typedef struct { int64_t exchanges, backoff_slots; } tb_medium_stats;

/* One direction's model state (DirectionModel). */
typedef struct {
    tb_dir_cfg cfg;
    int64_t *q_finish; int64_t *q_size; int64_t q_head, q_len, q_cap, q_bytes;  /* ring */
    int64_t busy_ns, rem;           /* serializer horizon and remainder (1/num ns) */
    tb_mt loss_rng, jitter_rng;
    int ge_bad; int64_t drop_next, drop_pos;
    int64_t last_delivery;
    int air_id;
    tb_dir_stats st;
} tb_dir;

typedef struct {  /* AirMedium */
    tb_medium_cfg cfg;
    tb_mt rng;
    int64_t free_ns;
    tb_medium_stats st;
} tb_medium;

typedef struct tb_engine {
    int n_dirs, n_media;
    tb_dir *dirs;
    tb_medium *media;
} tb_engine;

tb_engine *tb_engine_new(int n_dirs, const tb_dir_cfg *dirs, int n_media, const tb_medium_cfg *media);
void tb_engine_free(tb_engine *e);
int tb_arrive(tb_engine *e, int dir, int64_t now_ns, int64_t frame_len, int64_t *t_out);
int64_t tb_arrive_batch(tb_engine *e, int64_t n, const int32_t *dir, const int64_t *now,
                        const int64_t *len, uint8_t *verdict, int64_t *t);
void tb_dir_stats_get(const tb_engine *e, int dir, tb_dir_stats *out);
void tb_medium_stats_get(const tb_engine *e, int m, tb_medium_stats *out);
double tb_mt_random(tb_mt *g);
void tb_mt_load(tb_mt *g, const uint32_t state[625]);
int tb_engine_dirs(const tb_engine *e);

#endif
