/* test_train_kill.c — a training process killed (SIGKILL) at any moment,
 * including in the middle of writing a checkpoint, leaves the previous
 * checkpoint loadable, and a re-run resumes and finishes with the same result
 * as a run never interrupted.
 *
 * `orakul run` with save_every 1 (every step writes the state file and a LoRA
 * file) is killed four times, each time after it has saved at least once in
 * this run: twice the moment a "<file>.tmp.<pid>" of this process appears (a
 * save is under way), twice after a random delay. After each kill the state
 * file and every step file at its final path open with ork_st_open (the
 * reader checks the exact file length: a partial file fails), the state's step
 * only moves forward, the LoRA file of the state's step exists, and the newest
 * LoRA is that one or the next (the LoRA is written before the state). Then a re-run resumes and finishes;
 * its final LoRA and state equal those of an uninterrupted run byte for byte,
 * and no temp file is left behind. */
#include "train_test_util.h"

#include "io/safetensors.h"

static char g_root[1024], g_dir[1200];

/* The step in the state file, 0 when absent; -1 when it does not open. */
static long long state_step(void) {
    char p[1400];
    tt_fmt(p, sizeof p, "%s/quickstart_state.safetensors", g_dir);
    if (!tt_exists(p)) return 0;
    ork_st_file *f;
    if (ork_st_open(p, &f) != ORK_OK) return -1;
    const char *s = ork_st_meta(f, "step");
    long long v = s ? atoll(s) : -1;
    ork_st_close(f);
    return v;
}

/* Is there a "*.tmp.<pid>" in the output folder? */
static int tmp_of(ork_proc *p) {
    char suffix[64];
    tt_fmt(suffix, sizeof suffix, ".tmp.%ld", ork_proc_pid(p));
    size_t sl = strlen(suffix);
    DIR *d = opendir(g_dir);
    int hit = 0;
    for (struct dirent *e; d && !hit && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        hit = n > sl && !strcmp(e->d_name + n - sl, suffix);
    }
    if (d) closedir(d);
    return hit;
}

static int count_tmp(void) {
    DIR *d = opendir(g_dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    return n;
}

static int alive(ork_proc *p) { return !ork_proc_wait(p, 0, NULL); }

static void test_kill_and_resume(void) {
    char out[1100], data[1100], cfg[1100], log[1100], ref_out[1100], ref_cfg[1100], ref_log[1100];
    CU_ASSERT_FATAL(tt_setup("kill", g_root, sizeof g_root) == 0);
    tt_fmt(out, sizeof out, "%s/out", g_root);
    tt_fmt(data, sizeof data, "%s/data", g_root);
    tt_fmt(cfg, sizeof cfg, "%s/train.yaml", g_root);
    tt_fmt(g_dir, sizeof g_dir, "%s/quickstart", out);
    tt_cfg c = tt_cfg_default(out, data);
    c.steps = 30;
    c.save_every = 1;
    c.keep = 3;
    c.dtype = "float32";
    CU_ASSERT_FATAL(tt_write_config(cfg, &c) == 0);

    uint64_t lcg = 0x9e3779b97f4a7c15ull; /* the random delays: fixed seed, the moments still vary with timing */
    long long prev = 0;
    int killed = 0, in_save = 0;
    for (int k = 0; k < 4; k++) {
        char lo[1200], le[1200];
        tt_fmt(lo, sizeof lo, "%s/kill%d.out", g_root, k);
        tt_fmt(le, sizeof le, "%s/kill%d.err", g_root, k);
        ork_proc *proc = tt_spawn_run(cfg, lo, le);
        CU_ASSERT_FATAL(proc != NULL);
        /* wait until this run has saved at least once */
        double t0 = tt_now();
        while (alive(proc) && state_step() <= prev && tt_now() - t0 < 90) usleep(2000);
        int hit_tmp = 0;
        if (k % 2 == 0) { /* the moment a save of this process is under way */
            while (alive(proc) && !(hit_tmp = tmp_of(proc)) && tt_now() - t0 < 90) usleep(100);
        } else {
            lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
            usleep((useconds_t)((lcg >> 33) % 600000));
        }
        int st = 0, ended = ork_proc_wait(proc, 0, &st); /* ended by itself: not killed */
        ork_proc_kill(proc);
        ork_proc_wait(proc, ORK_PROC_FOREVER, &st);
        ork_proc_free(proc);
        int was_killed = !ended && st == 137; /* 128 + SIGKILL; TerminateProcess's code */
        if (ended) { /* it ended before the kill: say how */
            char *t = tt_read_all(le, NULL);
            printf("  kill %d: orakul ended by itself, exit %d; its stderr:\n%s\n", k, st, t ? t : "");
            free(t);
        }
        killed += was_killed;
        in_save += hit_tmp && was_killed;

        long long s = state_step();
        long long steps[64];
        int n = tt_step_files(g_dir, "quickstart", steps, 64);
        printf("  kill %d (%s): state at step %lld, %d step files, newest %lld, %d temp files\n", k,
               hit_tmp ? "during a save" : "random moment", s, n, n ? steps[n - 1] : -1LL, count_tmp());
        CU_ASSERT(s >= 1 && s >= prev && s < c.steps); /* loadable, never backwards, not finished */
        /* keep files, or keep + 1 when the kill fell between the new LoRA's commit and
         * the pruning that follows it (then the newest file is one save ahead of the state) */
        CU_ASSERT(n >= 1 && n <= c.keep + (n > 0 && steps[n - 1] == s + 1));
        if (n) { /* the state's LoRA is there; one save later at most (killed before the state followed) */
            char p[1400];
            tt_fmt(p, sizeof p, "%s/quickstart_%09lld.safetensors", g_dir, s);
            CU_ASSERT(tt_exists(p));
            CU_ASSERT(steps[n - 1] == s || steps[n - 1] == s + 1);
        }
        for (int i = 0; i < n; i++) { /* every file at a final path is complete */
            char p[1400];
            tt_fmt(p, sizeof p, "%s/quickstart_%09lld.safetensors", g_dir, steps[i]);
            ork_st_file *f;
            CU_ASSERT(ork_st_open(p, &f) == ORK_OK);
            ork_st_close(f);
        }
        if (s > 0) prev = s;
    }
    CU_ASSERT(killed == 4);
    CU_ASSERT(in_save >= 1);

    /* the re-run resumes and finishes */
    tt_fmt(log, sizeof log, "%s/final", g_root);
    CU_ASSERT_FATAL(tt_run(cfg, log, 150) == 0);
    char p[1400];
    tt_fmt(p, sizeof p, "%s.err", log);
    CU_ASSERT(tt_file_has(p, "resuming from"));
    CU_ASSERT(state_step() == c.steps);
    CU_ASSERT(count_tmp() == 0); /* the killed runs' temp files were cleaned up */

    /* ... and ends exactly where an uninterrupted run ends */
    tt_fmt(ref_out, sizeof ref_out, "%s/ref", g_root);
    tt_fmt(ref_cfg, sizeof ref_cfg, "%s/ref.yaml", g_root);
    tt_fmt(ref_log, sizeof ref_log, "%s/ref", g_root);
    c.out = ref_out;
    c.save_every = 10;
    CU_ASSERT_FATAL(tt_write_config(ref_cfg, &c) == 0);
    CU_ASSERT_FATAL(tt_run(ref_cfg, ref_log, 150) == 0);
    char leaf[16];
    tt_fmt(leaf, sizeof leaf, "%09d", c.steps);
    CU_ASSERT(tt_same_output(out, ref_out, leaf)); /* g_dir is out/quickstart */
    CU_ASSERT(tt_same_output(out, ref_out, "state"));
    tt_rm_rf(g_root);
}

static const ork_test_case cases[] = {
    {"kill_and_resume", test_kill_and_resume},
    {NULL, NULL},
};
ORK_TEST_MAIN("train_kill", NULL, NULL, cases)
