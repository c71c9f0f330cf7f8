/* train/dist_glue.c — the job's data parallelism (core/dist,
 * docs/multigpu.md): the device of this process, the rendezvous, the dataset
 * encoded by rank 0 first, the gradients' bucketed all-reduce, a resume that
 * every rank starts from rank 0's state, and the step's loss averaged over the
 * ranks. With one process (dist NULL) each is a no-op. [control-thread] */
#include "train/job.h"

#include "util/log.h"

#include <math.h>
#include <stdlib.h>

#ifdef ORAKUL_HAVE_CUDA
#include "cuda/cuda_ctx.h"
#endif

/* The CUDA device of this process: LOCAL_RANK when distributed, else device: cuda:N. */
ork_status ork_train_dist_device(job *j, int *index) {
    ORK_TRY(ork_dist_env_read(&j->denv));
    *index = 0;
#ifdef ORAKUL_HAVE_CUDA
    if (j->be->device == ORK_DEV_CUDA)
        ORK_TRY(ork_dist_device_index(&j->denv, j->p->device, ork_cuda_device_count(), index));
#endif
    j->device_index = *index;
    return ORK_OK;
}

/* The rendezvous and the communicator (the device is current); NULL dist for one process. */
ork_status ork_train_dist_start(job *j) {
    uint64_t h = 0;
    if (ork_dist_env_active(&j->denv)) ORK_TRY(ork_dist_config_hash(ork_config_file(j->cfg), &h));
    ORK_TRY(ork_dist_start(&j->denv, j->be, &j->g->k, j->alloc, h, &j->dist));
    ork_dist_quiet_other_ranks(j->dist);
    return ORK_OK;
}

/* Rank 0 encodes the dataset first (turn 1: it is done), the others then
 * read its latent cache (turn 0: they wait for it). */
ork_status ork_train_dist_dataset_turn(job *j, int after) {
    if (!j->dist || (ork_dist_rank(j->dist) == 0) != after) return ORK_OK;
    return ork_dist_barrier(j->dist);
}

/* The LoRA gradients into buckets all-reduced during the backward; hooks after the weight store's. */
ork_status ork_train_dist_grads(job *j) {
    if (!j->dist) return ORK_OK;
    int *blk = malloc(((size_t)j->n_params + 1) * sizeof *blk);
    if (!blk) return ORK_E_NOMEM;
    for (int i = 0; i < j->n_params; i++) blk[i] = ork_lora_block(j->lora, i / 2);
    ork_status s = ork_gsync_create(j->dist, j->g, j->alloc, j->pt, blk, j->n_params, j->info.n_blocks,
                                    ork_gsync_bucket_bytes(), &j->gsync);
    free(blk);
    ORK_TRY(s);
    ork_block_hooks h;
    ork_gsync_hooks(j->gsync, &j->ws_hooks, &h);
    ork_runner_set_hooks(j->runner, &h);
    return ORK_OK;
}

/* After ork_train_load_state: every rank resumes from the same step with the same
 * dataset, and holds rank 0's LoRA and optimizer state bit for bit. */
ork_status ork_train_dist_resume(job *j, int64_t *start) {
    if (!j->dist) return ORK_OK;
    double v[4] = {(double)*start, -(double)*start, (double)j->n_items, -(double)j->n_items};
    ORK_TRY(ork_dist_allreduce_host(j->dist, v, 4, ORK_NCCL_MAX));
    if (v[0] != -v[1])
        return ORK_FAIL(ORK_E_CONFIG, "distributed: the ranks found saved states at different steps (%.0f .. %.0f) in "
                        "%s: every rank must see the same output folder (shared storage)", -v[1], v[0], j->out_dir);
    if (v[2] != -v[3])
        return ORK_FAIL(ORK_E_CONFIG, "distributed: the ranks see different datasets (%.0f .. %.0f images): every "
                        "rank must see the same dataset folders", -v[3], v[2]);
    ORK_TRY(ork_dist_comm_after_compute(j->dist));
    for (int i = 0; i < j->n_params; i++) {
        ORK_TRY(ork_dist_broadcast(j->dist, ork_tensor_data(j->pt[i]), ork_tensor_nbytes(j->pt[i])));
        ORK_TRY(ork_dist_broadcast(j->dist, ork_tensor_data(j->state[i]), ork_tensor_nbytes(j->state[i])));
    }
    ORK_TRY(ork_dist_compute_after_comm(j->dist));
    return ork_dist_wait(j->dist, "rank 0's LoRA and optimizer state");
}

/* After the micro-steps: the gradients averaged over the ranks, the loss the
 * ranks' mean (non-finite on any rank: non-finite everywhere, so every rank
 * skips the same steps). */
ork_status ork_train_dist_step_end(job *j, float *loss, int *bad) {
    if (!j->dist) return ORK_OK;
    ORK_TRY(ork_gsync_finish(j->gsync));
    double v = *bad ? NAN : (double)*loss;
    ORK_TRY(ork_dist_allreduce_host(j->dist, &v, 1, ORK_NCCL_SUM));
    *loss = (float)(v / ork_dist_world(j->dist));
    *bad = !isfinite(*loss);
    return ORK_OK;
}
