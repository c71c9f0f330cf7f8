/* train/progress.c — see progress.h. On a terminal the line is redrawn in
 * place: with "\r" and the ANSI erase-to-end-of-line code where the console
 * takes ANSI codes (every POSIX terminal; a Windows console once
 * ork_console_ansi has turned its virtual-terminal processing on), else with
 * "\r" and spaces over the rest of the previous line (an older Windows
 * console). Not a terminal (a file, a pipe): plain lines, no escape code. */
#include "train/progress.h"

#include "platform/platform.h"
#include "train/metrics.h"
#include "util/log.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ork_progress {
    ork_progress_opts o;
    int tty, ansi, line_open, sink_held;
    int drawn; /* characters of the line on the row now (for the plain redraw) */
    double t_begin, t_prev_end, t_last_draw, extra_s; /* extra_s: time outside steps */
    int64_t n_steps;                                  /* steps ended */
    ork_ema step_time, loss;
    double win_sum, last_loss;
    int64_t win_n;
    double win_time, last_s; /* step seconds since the last printed line; the last step's */
    int64_t win_steps;
};

static double now_s(void) { return 1e-9 * (double)ork_time_ns(); }

/* The log sink while a line is redrawn: clear the row before a log line. */
static void clear_line(ork_log_level lvl, const char *line, void *user) {
    (void)lvl, (void)line;
    ork_progress *p = user;
    if (!p->line_open) return;
    if (p->ansi) fputs("\r\x1b[K", p->o.out);
    else fprintf(p->o.out, "\r%*s\r", p->drawn, "");
    fflush(p->o.out);
    p->line_open = 0;
}

ork_status ork_progress_create(const ork_progress_opts *o, ork_progress **out) {
    ork_progress *p = calloc(1, sizeof *p);
    if (!p) return ORK_E_NOMEM;
    p->o = *o;
    if (!p->o.out) p->o.out = stdout;
    if (p->o.log_every <= 0) p->o.log_every = 10;
    if (!p->o.mem_label) p->o.mem_label = "mem";
    p->tty = o->tty >= 0 ? o->tty : ork_isatty(p->o.out);
    p->ansi = o->tty >= 0 ? o->tty : p->tty && ork_console_ansi(p->o.out);
    ork_ema_init(&p->step_time, 0.9);
    ork_ema_init(&p->loss, ORK_LOSS_EMA_BETA);
    p->t_prev_end = NAN;
    if (p->tty) {
        ork_log_set_sink(clear_line, p);
        p->sink_held = 1;
    }
    *out = p;
    return ORK_OK;
}

void ork_progress_destroy(ork_progress *p) {
    if (!p) return;
    if (p->line_open) {
        fputc('\n', p->o.out);
        fflush(p->o.out);
    }
    if (p->sink_held) ork_log_set_sink(NULL, NULL);
    free(p);
}

void ork_progress_begin(ork_progress *p) {
    p->t_begin = now_s();
    if (isfinite(p->t_prev_end)) p->extra_s += p->t_begin - p->t_prev_end;
}

double ork_progress_s_per_it(const ork_progress *p) { return ork_ema_value(&p->step_time); }
double ork_progress_last_s(const ork_progress *p) { return p->last_s; }
double ork_progress_loss_ema(const ork_progress *p) { return ork_ema_value(&p->loss); }

const char *ork_progress_eta_str(double s, char *buf, size_t n) {
    if (!isfinite(s) || s < 0) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0fs", s);
    else if (s < 3600) snprintf(buf, n, "%dm%02ds", (int)(s / 60), (int)fmod(s, 60));
    else snprintf(buf, n, "%dh%02dm", (int)(s / 3600), (int)fmod(s / 60, 60));
    return buf;
}

void ork_progress_end(ork_progress *p, const ork_progress_step *s) {
    double t = now_s();
    ork_ema_add(&p->step_time, t - p->t_begin);
    p->last_s = t - p->t_begin;
    p->win_time += p->last_s;
    p->win_steps++;
    p->t_prev_end = t;
    p->n_steps++;
    p->last_loss = s->loss;
    if (!s->skipped && isfinite(s->loss)) {
        ork_ema_add(&p->loss, s->loss);
        p->win_sum += s->loss;
        p->win_n++;
    }
    int last = s->step >= p->o.total, first = s->step == p->o.start + 1;
    int due = p->tty ? (last || first || t - p->t_last_draw >= 0.2) : (last || first || s->step % p->o.log_every == 0);
    if (!due) return;
    double spi = ork_progress_s_per_it(p);
    /* a terminal shows the smoothed figure; plain lines (logs, benches) the
     * mean step time since the previous line, which averages nothing stale */
    double shown_spi = p->tty || !p->win_steps ? spi : p->win_time / (double)p->win_steps;
    double eta = (double)(p->o.total - s->step) * (spi + p->extra_s / (double)p->n_steps);
    char line[512], es[32], ema[32];
    double shown = p->win_n ? p->win_sum / (double)p->win_n : p->last_loss;
    double e = ork_progress_loss_ema(p);
    if (isfinite(e)) snprintf(ema, sizeof ema, "%.4f", e);
    else snprintf(ema, sizeof ema, "-");
    int n = snprintf(line, sizeof line, "step %lld/%lld  loss %.6f  ema %s  lr %.3g  grad_norm %.4g  %.3f s/it  %s %.2f GiB (peak %.2f)  ETA %s",
                     (long long)s->step, (long long)p->o.total, shown, ema, s->lr, s->grad_norm, shown_spi, p->o.mem_label,
                     (double)s->mem_in_use / 1073741824.0, (double)s->mem_peak / 1073741824.0,
                     ork_progress_eta_str(eta, es, sizeof es));
    if (n < 0) return;
    if (n >= (int)sizeof line) n = (int)sizeof line - 1; /* what was printed */
    if (p->tty) {
        if (p->ansi) fprintf(p->o.out, "\r%s\x1b[K", line);
        else fprintf(p->o.out, "\r%s%*s", line, p->drawn > n ? p->drawn - n : 0, "");
        p->drawn = n;
        p->line_open = 1;
        if (last) {
            fputc('\n', p->o.out);
            p->line_open = 0;
        }
    } else {
        fprintf(p->o.out, "%s\n", line);
    }
    fflush(p->o.out);
    p->t_last_draw = t;
    p->win_sum = 0;
    p->win_n = 0;
    p->win_time = 0;
    p->win_steps = 0;
}
