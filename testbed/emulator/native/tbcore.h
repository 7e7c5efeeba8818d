/* The emulator's model in C: the exact counterpart of testbed/emulator/{direction,queue,
 * serializer,loss,airtime,schedule_model}.py (see their docstrings for the semantics).  Sans-I/O:
 * driven by tb_arrive(engine, direction, now_ns, frame_len); a direction with a link schedule
 * (tb_schedule) also by tb_set_origin and tb_drain_changes.  The Python model is the reference;
 * the differential tests (tests/testbed/emulator/test_native_engine.py, test_native_schedule.py)
 * check both give identical verdicts, times and change records. */
#ifndef TBCORE_H
#define TBCORE_H
#include <stdint.h>

#define TB_DELIVER 0
#define TB_DROP_LOSS 1
#define TB_DROP_QUEUE 2
#define TB_DROP_OUTAGE 3
#define TB_DROP_EVENT 4

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

/* A loss generator (loss.make_loss): its parameters and state; draws from the caller's stream. */
typedef struct {
    int32_t kind, ge_bad;
    double p, r, loss_bad, loss_good;
    const int64_t *drop_idx; int64_t n_drop, drop_next, drop_pos;
} tb_lossgen;

struct tb_sched;

/* One direction's model state (DirectionModel, or ScheduledDirection when sch is set). */
typedef struct {
    tb_dir_cfg cfg;
    int64_t *q_finish; int64_t *q_size; int64_t q_head, q_len, q_cap, q_bytes;  /* ring */
    int64_t busy_ns, rem;           /* serializer horizon and remainder (1/num ns) */
    tb_mt loss_rng, jitter_rng;
    tb_lossgen loss;
    int64_t last_delivery, last_arrival;
    int64_t origin_applied;         /* INT64_MIN until the origin is set (atomic) */
    struct tb_sched *sch;
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
    int64_t origin_req;             /* tb_request_origin: the time asked for, */
    int32_t origin_state;           /* 0 none, 1 asked, 2 applied (atomic) */
    int32_t wake_fd;                /* an eventfd of the running loop that wakes it, or -1 */
    tb_dir *dirs;
    tb_medium *media;
} tb_engine;

/* --- link schedules (schedule_model.ScheduledDirection) --------------------------------------
 * Python (native/__init__.py) turns a LinkSpec's Schedule into these, with every rounding of
 * seconds to ns done as the model does it; its arrays stay owned by the caller for the engine's
 * life.  Moments: at_kind TB_AT_TIME (at: ns after the origin), TB_AT_FRAMES, TB_AT_BYTES. */
enum { TB_AT_TIME = 0, TB_AT_FRAMES, TB_AT_BYTES };
enum { TB_CH_STEP = 0, TB_CH_DOWN, TB_CH_UP, TB_CH_EVENT, TB_CH_TRACE };
enum { TB_F_RATE = 1, TB_F_DELAY = 2, TB_F_JITTER = 4, TB_F_REORDER = 8, TB_F_LOSS = 16,
       TB_F_QPACKETS = 32, TB_F_QBYTES = 64 };

typedef struct {  /* a step (or the base LinkSpec): the fields named in mask */
    int32_t at_kind, mask;
    int64_t at;
    int64_t rate_num, rate_unit;   /* rate_num 0: unshaped */
    double rate, delay;            /* LinkSpec.rate / delay, for the default queue limit */
    int64_t delay_ns, jitter_span, reorder;
    int64_t queue_packets, queue_bytes;   /* -1: None */
    int32_t loss_kind, pad;
    double p, r, loss_bad, loss_good;
    const int64_t *drop_idx; int64_t n_drop;
} tb_step_cfg;

typedef struct { int32_t at_kind, hold; int64_t at, duration_ns; } tb_outage_cfg;

typedef struct {  /* frame 0: a window event [start_ns, end_ns) after the origin; copies 1: its
                   * dropped frames' TCP copies are dropped until until_ns after the origin */
    int64_t frame, count, min_bytes, start_ns, end_ns, delay_ns, until_ns;
    int32_t drop, copies;
} tb_event_cfg;

/* schedule_model.tcp_segment: an unfragmented IPv4/TCP segment's addresses, ports, sequence
 * number and payload bytes (> 0) */
typedef struct { uint32_t src, dst, seq, len; uint16_t sport, dport; } tb_tcpseg;

typedef struct {
    int64_t frame_bytes, min_queue;       /* LinkSpec.frame_bytes, MIN_DEFAULT_QUEUE */
    tb_step_cfg base;
    int64_t n_steps, n_outages, n_events, n_ms, period_ns;   /* n_ms 0: no trace */
    const tb_step_cfg *steps;
    const tb_outage_cfg *outages;
    const tb_event_cfg *events;
    const int64_t *ms_ns;                 /* the trace's opportunities, ns within a period */
} tb_sched_cfg;

typedef struct {  /* = schedule_model.ScheduleChange without its text (kind, item name it) */
    int32_t kind, item;
    int64_t configured_ns;   /* meaningful when has_configured */
    int64_t actual_ns, frames_before;
    int32_t has_configured, pad;
} tb_change;

typedef struct { int64_t dropped_outage, dropped_event, delayed_event, changes; } tb_sched_stats;

tb_engine *tb_engine_new(int n_dirs, const tb_dir_cfg *dirs, int n_media, const tb_medium_cfg *media);
void tb_engine_free(tb_engine *e);
int tb_arrive(tb_engine *e, int dir, int64_t now_ns, int64_t frame_len, int64_t *t_out);
/* tb_arrive with the frame's first caplen bytes (ScheduledDirection.arrive's `frame`) */
int tb_arrive_frame(tb_engine *e, int dir, int64_t now_ns, int64_t frame_len, const uint8_t *f,
                    uint32_t caplen, int64_t *t_out);
int tb_tcp_segment(const uint8_t *f, uint32_t caplen, tb_tcpseg *out);
int64_t tb_arrive_batch(tb_engine *e, int64_t n, const int32_t *dir, const int64_t *now,
                        const int64_t *len, uint8_t *verdict, int64_t *t);
void tb_dir_stats_get(const tb_engine *e, int dir, tb_dir_stats *out);
void tb_medium_stats_get(const tb_engine *e, int m, tb_medium_stats *out);
double tb_mt_random(tb_mt *g);
void tb_mt_load(tb_mt *g, const uint32_t state[625]);
int tb_engine_dirs(const tb_engine *e);
int tb_schedule(tb_engine *e, int dir, const tb_sched_cfg *cfg);
int tb_set_origin(tb_engine *e, int dir, int64_t t_ns);
int64_t tb_drain_changes(tb_engine *e, int dir, int64_t now_ns, int has_now, tb_change *out, int64_t cap);
int64_t tb_last_arrival(const tb_engine *e, int dir);
void tb_request_origin(tb_engine *e, int64_t t_ns);
int tb_apply_origin_request(tb_engine *e);
int64_t tb_applied_origin(const tb_engine *e, int dir);
void tb_sched_stats_get(const tb_engine *e, int dir, tb_sched_stats *out);

#endif
