/* tests/ops/grad_check.h — finite-difference gradient checks for the CPU ops.
 *
 * A case is a forward function over leaf inputs (F32 parameters with F32
 * grads). The check draws a random projection r per output, runs forward +
 * ork_backward_from(outs, r), and compares each input's analytic gradient
 * with the central difference (S(x + h) − S(x − h)) / 2h of
 * S = Σ_k out·r, accumulated in double over the F32 forward.
 * Why F32 kernels and not an F64 path: this checks the very kernels that
 * train, and F32's rounding (~1e-7 relative) is far below the FD step's
 * truncation error (h = 1e-2: ~1e-5 relative) and the tolerance (rel. L2
 * error of the whole gradient <= 1e-3; honest runs measure <= 5e-5 and a 1% error in one term fails (checked by mutating kernels), plus a per-element bound), so a wrong
 * backward (errors of O(1)) cannot hide, while honest rounding never fails.
 * Inputs of kinked ops (relu, maxpool) are placed away from the kinks. */
#ifndef ORK_TEST_GRAD_CHECK_H
#define ORK_TEST_GRAD_CHECK_H

#include "ork_test.h"
#include "tensor/graph.h"
#include "tensor/ops.h"
#include "tensor/tape.h"

#include <stdint.h>

#define GC_MAX_IN 8
#define GC_MAX_OUT 8

typedef ork_status (*gc_fwd)(ork_graph *g, ork_tensor **in, void *ctx, ork_tensor **outs, int *nout);

typedef struct gc_env {
    ork_alloc *alloc;
    ork_graph *g;
    const ork_ops *ops;
    const ork_tensor_api *tapi;
    uint64_t rng;
} gc_env;

extern gc_env G;

double gc_randn(void);
double gc_rand01(void);
/* A parameter leaf (F32, requires_grad) of the given shape, N(0, sd²) values. */
ork_tensor *gc_param(int ndim, const int64_t *shape, double sd);
/* A frozen leaf (no grad), F32 or BF16. */
ork_tensor *gc_const(ork_dtype dt, int ndim, const int64_t *shape, double sd);
/* Values with gaps >= gap between any two (kinks away from the FD step). */
void gc_fill_spread(ork_tensor *t, double gap);

/* Check every input in[i] with check[i] != 0 (check NULL: all params).
 * Returns 1 when all gradients agree; prints a line per failing input. */
int gc_check(const char *name, gc_fwd fwd, void *ctx, int nin, ork_tensor **in, const int *check, double tol);

void gc_free(int n, ork_tensor **t);
int gc_setup(void);
int gc_teardown(void);

#endif
