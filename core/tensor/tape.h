/* tensor/tape.h — the autograd tape: one node per op recorded while grad is
 * enabled and any input requires grad; a reverse walk runs each node's
 * hand-written backward.
 *
 * Gradients. A leaf parameter (ORK_TF_PARAM) accumulates into its persistent
 * F32 grad (made and zeroed once, tag "grads"); zero it with
 * ork_tensor_zero_grad between optimizer steps. Any other tensor's grad is an
 * arena tensor of its own dtype. After a node's backward ran, the tape drops
 * its saved tensors (a tensor's arena block is freed when no later-run node
 * still needs it and it is neither a view nor ORK_TF_KEEP) and the grads of its
 * outputs, so peak memory falls as the walk proceeds. A backward consumes the
 * whole tape (it is empty afterwards).
 *
 * Per-block checkpointing, the trainer's recipe (FLUX: 57 blocks):
 *   forward, grad off:  for i: ork_graph_copy_to(carry -> ckpt[i]);
 *                              r = ork_graph_region_begin(g);
 *                              model->block(i, &carry);
 *                              copy carry -> ckpt[i + 1]; ork_graph_region_end(g, r);
 *                              carry = ckpt[i + 1] (ork_graph_leaf, no grad)
 *   loss:  grad on, leaves from ckpt[n]; loss; ork_backward(g, loss);
 *          dcarry = the leaves' ->grad, copied to a persistent buffer.
 *   backward, for i = n-1 .. 0, grad on:
 *          r = ork_graph_region_begin(g);
 *          in[j] = ork_graph_leaf(g, ckpt[i].t[j], needs_grad_j); carry = in;
 *          model->block(i, &carry);                       (recorded)
 *          ork_backward_from(g, carry.n, carry.t, dcarry); (LoRA grads accumulate)
 *          copy in[j]->grad -> dcarry; ork_graph_region_end(g, r);
 * Re-running block i from ckpt[i] with grad on is bit-identical to its first
 * run, so the gradients equal those of one straight backward over the whole
 * model (tests/tensor asserts this). [control-thread] */
#ifndef ORK_TENSOR_TAPE_H
#define ORK_TENSOR_TAPE_H

#include "tensor/graph.h"

typedef struct ork_tape ork_tape;
typedef struct ork_tape_node ork_tape_node;

/* Computes the inputs' gradients from the outputs' (n->out[i]->grad, NULL =
 * zero for multi-output nodes) with ork_grad_new / ork_grad_push. */
typedef ork_status (*ork_bwd_fn)(ork_graph *g, ork_tape_node *n);

#define ORK_NODE_MAX_SAVED 6

struct ork_tape_node {
    const char *op;            /* "linear", "attention", ... for error lines */
    ork_bwd_fn bwd;
    int nin, nout;
    ork_tensor **in;           /* borrowed from the graph (pool memory) */
    ork_tensor **out;
    ork_tensor *saved[ORK_NODE_MAX_SAVED]; /* tensors whose data backward reads */
    int nsaved;
    void *aux[4];              /* arena blocks owned by the node (lse, mean, rstd, h) */
    int naux;
    union {                    /* per-op parameters */
        float f[4];
        int i[ORK_MAX_DIMS + 2];
        ork_attn_desc attn;
        ork_conv2d_desc conv;
    } p;
};

ork_status ork_tape_create(ork_tape **out);
void ork_tape_destroy(ork_tape *t);
size_t ork_tape_len(const ork_tape *t);
/* Drops nodes past len (region end), releasing nothing else. */
void ork_tape_truncate(ork_tape *t, size_t len);

/* Should an op with these inputs record? grad enabled and any requires_grad. */
int ork_tape_wants(const ork_graph *g, int nin, ork_tensor *const *in);
/* Append a node (pool memory); marks outputs requires_grad with node = it. */
ork_status ork_tape_push(ork_graph *g, const char *op, ork_bwd_fn bwd, int nin, ork_tensor *const *in,
                         int nout, ork_tensor *const *out, ork_tape_node **node);
/* The node's backward will read t's data. */
void ork_tape_save(ork_tape_node *n, ork_tensor *t);

/* Backward from a scalar (numel 1): its gradient is 1. */
ork_status ork_backward(ork_graph *g, ork_tensor *loss);
/* Backward from given output gradients (same numel as outs[i]; NULL = none). */
ork_status ork_backward_from(ork_graph *g, int n, ork_tensor *const *outs, ork_tensor *const *grads);

/* For backward functions. A fresh arena tensor shaped like t, dtype dt. */
ork_status ork_grad_new(ork_graph *g, const ork_tensor *t, ork_dtype dt, ork_tensor **dx);
/* Add dx (shape of t; consumed) into t's gradient: adopted, accumulated, or
 * (params) accumulated into the F32 grad. No-op when !t->requires_grad. */
ork_status ork_grad_push(ork_graph *g, ork_tensor *t, ork_tensor *dx);
/* A parameter's persistent F32 grad buffer (made and zeroed on first use),
 * for kernels that accumulate in place (gemm beta = 1); NULL when t is not a
 * parameter needing a grad. */
ork_status ork_grad_param(ork_graph *g, ork_tensor *t, float **buf);

#endif
