/* train/outputs.c — what a run reports besides the LoRA: samples (rank 0),
 * the progress line, metrics.jsonl and loss.png, and the streaming figures
 * (bytes, rates, lane times) measured over the steady-state steps.
 * [control-thread] */
#include "train/job.h"

#include "platform/platform.h"
#include "train/plot.h"
#include "util/log.h"

#include <stdio.h>

/* Steady-state streaming figures (steps after the first of this process):
 * bytes each way per step, their average rate over the step time, pinned
 * host memory and the process's peak resident set. */
void ork_train_stream_stats_mark(job *j, int64_t step, int64_t start, int64_t last) {
    if (step != start + 1 && step != last) return;
    ork_graph_sync(j->g);
    int e = step == last && step != start + 1;
    j->ss_t[e] = ork_train_now();
    j->ss_h2d[e] = ork_ce_bytes(j->ce, ORK_LANE_H2D);
    j->ss_d2h[e] = ork_ce_bytes(j->ce, ORK_LANE_D2H);
    j->ss_steps[e] = step;
    ork_streamer *st = ork_wstore_streamer(j->ws);
    if (st) {
        ork_streamer_stats ss;
        ork_streamer_stats_get(st, &ss);
        j->ss_loads[e][0] = ss.loads;
        j->ss_loads[e][1] = ss.lent_loads;
        j->ss_loads[e][2] = ss.reused;
        j->ss_loads[e][3] = ss.early_loads;
    }
    if (j->tstream) j->ss_loads[e][4] = ork_tstream_reused(j->tstream);
    static const ork_lane busy_lane[3] = {ORK_LANE_H2D, ORK_LANE_D2H, ORK_LANE_DEC};
    for (int l = 0; j->ss_timing && l < 3; l++) {
        double c = 0, d = 0;
        if (ork_ce_busy(j->ce, busy_lane[l], &c, &d) != ORK_OK ||
            (l < 2 && ork_ce_waited(j->ce, l ? ORK_LANE_H2D : ORK_LANE_COMPUTE, &j->ss_wait[e][l]) != ORK_OK))
            j->ss_timing = 0; /* a diagnostic: the run goes on without it */
        j->ss_busy[e][l] = c + d;
    }
}

void ork_train_stream_stats_report(job *j) {
    uint64_t peak_rss = 0;
    (void)ork_peak_rss(&peak_rss); /* 0 when the system will not say */
    int64_t n = j->ss_steps[1] - j->ss_steps[0];
    double dt = j->ss_t[1] - j->ss_t[0];
    if (n > 0 && dt > 0) {
        double h = (double)(j->ss_h2d[1] - j->ss_h2d[0]) / (double)n, d = (double)(j->ss_d2h[1] - j->ss_d2h[0]) / (double)n;
        ORK_INFO("streaming measured over %lld steps: %.3f s/step; host->device %.2f GB/step (%.1f GB/s), "
                 "device->host %.2f GB/step (%.1f GB/s)", (long long)n, dt / (double)n, h / 1e9, h / 1e9 / (dt / (double)n),
                 d / 1e9, d / 1e9 / (dt / (double)n));
        if (ork_wstore_streamer(j->ws)) {
            double q[4];
            for (int k = 0; k < 4; k++) q[k] = (double)(j->ss_loads[1][k] - j->ss_loads[0][k]) / (double)n;
            ORK_INFO("streaming loads: %.1f blocks per step (%.1f through the lent gradients' memory, %.1f copied ahead "
                     "at the step before's end), %.1f visits found their block still in its slot", q[0], q[1], q[3], q[2]);
        }
        if (j->tstream)
            ORK_INFO("streaming trainable state: %.1f forward visits per step found their block's record still in its slot",
                     (double)(j->ss_loads[1][4] - j->ss_loads[0][4]) / (double)n);
        if (j->ss_timing) {
            double b[3], step_s = dt / (double)n;
            for (int l = 0; l < 3; l++) b[l] = (j->ss_busy[1][l] - j->ss_busy[0][l]) / (double)n;
            ORK_INFO("streaming lanes: host->device busy %.3f s/step (%.0f%% of the step, copies at %.1f GB/s), "
                     "decodes %.3f s/step on their own lane, device->host busy %.3f s/step (%.0f%%)", b[0],
                     100.0 * b[0] / step_s, b[0] > 0 ? h / 1e9 / b[0] : 0.0, b[2], b[1], 100.0 * b[1] / step_s);
            ORK_INFO("streaming waits: the compute lane stood %.3f s/step for loads, the host->device lane %.3f s/step "
                     "for free slots", (j->ss_wait[1][0] - j->ss_wait[0][0]) / (double)n,
                     (j->ss_wait[1][1] - j->ss_wait[0][1]) / (double)n);
        }
    }
    ORK_INFO("host memory: %.1f GiB pinned for streaming, peak resident set %.1f GiB",
             (double)ork_ce_host_bytes(j->ce) / 1073741824.0, (double)peak_rss / 1073741824.0);
}

/* ---- samples, progress line, metrics.jsonl, loss.png ------------------------- */

ork_status ork_train_sample_now(job *j, int64_t step) {
    /* the weight store's hooks (or the streamed state's), not the runner's
     * chain: a forward-only pass has no gradients to hand on */
    ork_block_hooks hk = j->tstream ? ork_train_streamed_hooks(j) : j->ws_hooks;
    ork_denoiser d = {.g = j->g, .alloc = j->alloc, .vt = j->mvt, .model = j->model, .info = &j->info, .hooks = &hk,
                      .codec = &j->codec,
                      .device_index = j->device_index};
    /* with the EMA on, the samples use its weights (ai-toolkit's sample(): ema.eval() ... ema.train()) */
    ORK_TRY(ork_train_ema_swap(j, 1));
    ork_status s = ork_samples_run(j->samples, &d, step, NULL);
    ork_status r = ork_train_ema_swap(j, 0);
    return s != ORK_OK ? s : r;
}

void ork_train_plot_now(job *j) {
    char m[1100], p[1100];
    snprintf(m, sizeof m, "%s/metrics.jsonl", j->out_dir);
    snprintf(p, sizeof p, "%s/loss.png", j->out_dir);
    if (ork_plot_loss_file(m, p) != ORK_OK) ORK_WARN("%s was not redrawn", p);
}

ork_status ork_train_outputs_open(job *j, int64_t start, int64_t log_every) {
    char m[1100];
    snprintf(m, sizeof m, "%s/metrics.jsonl", j->out_dir);
    if (ork_dist_rank(j->dist) == 0) ORK_TRY(ork_metrics_open(m, start, &j->metrics)); /* rank 0 writes the run's files */
    ork_progress_opts po = {.out = stdout, .tty = -1, .start = start, .total = j->p->train.steps,
                            .log_every = log_every, .mem_label = j->be->device == ORK_DEV_CPU ? "mem" : "VRAM"};
    ORK_TRY(ork_progress_create(&po, &j->progress));
    return ork_samples_due(j->samples, start, start, j->p->train.steps) ? ork_train_sample_now(j, start) : ORK_OK;
}

ork_status ork_train_step_outputs(job *j, int64_t step, double loss, double norm, int skipped) {
    double lr = ork_lr_at(&j->lr, step - 1);
    size_t in_use = ork_alloc_in_use(j->alloc, NULL);
    ork_progress_step ps = {.step = step, .loss = loss, .skipped = skipped, .lr = lr, .grad_norm = norm,
                            .mem_in_use = in_use, .mem_peak = ork_alloc_peak(j->alloc)};
    ork_progress_end(j->progress, &ps);
    ork_metrics_row r = {.step = step, .loss = loss, .lr = lr, .grad_norm = norm,
                         .s_per_it = ork_progress_last_s(j->progress), .vram_gib = (double)in_use / 1073741824.0,
                         .skipped = skipped, .has_preservation = j->dop_on, .loss_preservation = j->dop_loss};
    return j->metrics ? ork_metrics_append(j->metrics, &r) : ORK_OK;
}
