// prodigy_cuda.cu — the Prodigy step on the device (see prodigy_math.h):
// the element math of prodigy_elem.h (the CPU's float ops bit for bit), the
// sums in double with a fixed order (per-block trees, then one thread adds
// the blocks in order: the same bits every run), and the global estimate kept
// in device memory the plugin owns (ork_prodigy_dev), so nothing waits for
// the host. All on the caller's stream, no sync. Owns that memory.
#include <cuda_runtime.h>

#include "prodigy_elem.h"
#include "prodigy_math.h"

#define PD_THREADS 256
#define PD_MAXB 1024

struct ork_prodigy_dev {
    double d, d_max, d_num;
    long long k;
    double num, den; // this step's sums
    double dlr;      // this step's d·lr·bc (old d)
    double d_old;    // this step's d before the update
    int skip;        // lr <= 0 or den == 0: no update (prodigyopt returns)
    int found;       // load: a head was taken
    double partial[2 * PD_MAXB];
};

namespace {

__device__ ork_prodigy_head *head_of(void *state) { return static_cast<ork_prodigy_head *>(state); }
__device__ float *floats_of(void *state) { return reinterpret_cast<float *>(static_cast<char *>(state) + ORK_PRODIGY_HEAD); }

__global__ void k_init(ork_prodigy_dev *g, double d0) {
    g->d = d0, g->d_max = d0, g->d_num = 0, g->k = 0, g->found = 0;
}

// The head stepped most (launched once per parameter, in order).
__global__ void k_load(ork_prodigy_dev *g, void *state) {
    const ork_prodigy_head *h = head_of(state);
    if (h->inited && h->d > 0 && (!g->found || h->k > g->k)) {
        g->d = h->d, g->d_max = h->d_max, g->d_num = h->d_num, g->k = h->k;
        g->found = 1;
    }
}

__global__ void k_begin(ork_prodigy_dev *g, ork_prodigy_hparams h, double lr) {
    double bc = 1;
    if (h.use_bias_correction) bc = sqrt(1 - pow(h.beta2, (double)(g->k + 1))) / (1 - pow(h.beta1, (double)(g->k + 1)));
    g->d_old = g->d;
    g->dlr = g->d * lr * bc;
    g->num = 0, g->den = 0;
    g->skip = !(lr > 0);
}

// p0 = the parameter at its first step (no thread writes inited here).
__global__ void k_p0(const void *param, ork_dtype pdt, void *state, long long n) {
    if (head_of(state)->inited) return;
    float *p0 = floats_of(state) + 3 * n;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        p0[i] = pd_load(param, pdt, i);
}

__global__ void k_phase1(ork_prodigy_dev *g, ork_prodigy_hparams h, const void *param, ork_dtype pdt,
                         const float *grad, void *state, long long n) {
    __shared__ double sd[PD_THREADS], ss[PD_THREADS];
    if (blockIdx.x == 0 && threadIdx.x == 0) head_of(state)->inited = 1;
    double dot = 0, sabs = 0;
    if (!g->skip) {
        const pd_scalars c = pd_scalars_make(h.beta1, h.beta2, h.beta3, h.weight_decay, h.decouple,
                                             h.safeguard_warmup, h.d0, g->d_old, g->dlr);
        float *m = floats_of(state), *v = m + n, *s = v + n, *p0 = s + n;
        for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
             i += (long long)gridDim.x * blockDim.x) {
            double di;
            float mi = m[i], vi = v[i], si = s[i];
            sabs += pd_phase1(&c, pd_load(param, pdt, i), grad[i], p0[i], &mi, &vi, &si, &di);
            dot += di;
            m[i] = mi, v[i] = vi, s[i] = si;
        }
    }
    sd[threadIdx.x] = dot, ss[threadIdx.x] = sabs;
    __syncthreads();
    for (int w = PD_THREADS / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) sd[threadIdx.x] += sd[threadIdx.x + w], ss[threadIdx.x] += ss[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) g->partial[2 * blockIdx.x] = sd[0], g->partial[2 * blockIdx.x + 1] = ss[0];
}

// The blocks' sums in order into the step's sums.
__global__ void k_reduce(ork_prodigy_dev *g, ork_prodigy_hparams h, int blocks) {
    if (g->skip) return;
    double dot = 0, sabs = 0;
    for (int b = 0; b < blocks; b++) dot += g->partial[2 * b], sabs += g->partial[2 * b + 1];
    g->num += (g->d_old / h.d0) * g->dlr * dot;
    g->den += sabs;
}

__global__ void k_finish(ork_prodigy_dev *g, ork_prodigy_hparams h) {
    if (g->skip || g->den == 0) {
        g->skip = 1;
        return;
    }
    double b3 = h.beta3 < 0 ? sqrt(h.beta2) : h.beta3;
    g->d_num = b3 * g->d_num + g->num;
    double d_hat = h.d_coef * g->d_num / g->den;
    if (g->d == h.d0) g->d = g->d > d_hat ? g->d : d_hat;
    if (d_hat > g->d_max) g->d_max = d_hat;
    double grown = g->d * h.growth_rate;
    g->d = g->d_max < grown ? g->d_max : grown;
    g->k++;
}

__global__ void k_phase2(const ork_prodigy_dev *g, ork_prodigy_hparams h, void *param, ork_dtype pdt,
                         const float *grad, void *state, long long n) {
    if (g->skip) return;
    const double d = g->d, dlr = g->dlr;
    const pd_scalars c = pd_scalars_make(h.beta1, h.beta2, h.beta3, h.weight_decay, h.decouple, h.safeguard_warmup,
                                         h.d0, d, dlr);
    const float deps = (float)(d * h.eps), wdk = (float)(h.decouple ? -h.weight_decay * dlr : 0.0);
    const float step = (float)(c.has_m ? -dlr : -dlr * d);
    const float *m = floats_of(state), *v = m + n;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        float p = pd_load(param, pdt, i), num = c.has_m ? m[i] : grad[i];
        if (!c.has_m && c.coupled) num = PD_ADD(num, PD_MUL(c.wd, p));
        pd_store(param, pdt, i, pd_phase2(p, num, v[i], deps, wdk, step));
    }
}

__global__ void k_head(const ork_prodigy_dev *g, void *state) {
    ork_prodigy_head *h = head_of(state);
    h->d = g->d, h->d_max = g->d_max, h->d_num = g->d_num, h->k = g->k;
}

int blocks_for(long long n) {
    long long b = (n + PD_THREADS - 1) / PD_THREADS;
    return (int)(b < 1 ? 1 : b > PD_MAXB ? PD_MAXB : b);
}

} // namespace

extern "C" ork_status ork_prodigy_dev_new(ork_prodigy_dev **out) {
    void *p = nullptr;
    if (cudaMalloc(&p, sizeof(ork_prodigy_dev)) != cudaSuccess) return ORK_E_CUDA;
    *out = static_cast<ork_prodigy_dev *>(p);
    return ORK_OK;
}

extern "C" void ork_prodigy_dev_free(ork_prodigy_dev *dev) { cudaFree(dev); }

extern "C" ork_status ork_prodigy_step_cuda(const ork_prodigy_hparams *h, ork_prodigy_dev *g, int load, double lr,
                                            int n, void *const *param, const ork_dtype *pdt,
                                            const float *const *grad, void *const *state, const int64_t *numel,
                                            ork_prodigy_stream stream) {
    cudaStream_t st = reinterpret_cast<cudaStream_t>(stream);
    const ork_prodigy_hparams hp = *h;
    if (load) {
        k_init<<<1, 1, 0, st>>>(g, hp.d0);
        for (int i = 0; i < n; i++) k_load<<<1, 1, 0, st>>>(g, state[i]);
    }
    k_begin<<<1, 1, 0, st>>>(g, hp, lr);
    for (int i = 0; i < n; i++) {
        int b = blocks_for(numel[i]);
        k_p0<<<b, PD_THREADS, 0, st>>>(param[i], pdt[i], state[i], numel[i]);
        k_phase1<<<b, PD_THREADS, 0, st>>>(g, hp, param[i], pdt[i], grad[i], state[i], numel[i]);
        k_reduce<<<1, 1, 0, st>>>(g, hp, b);
    }
    k_finish<<<1, 1, 0, st>>>(g, hp);
    for (int i = 0; i < n; i++) {
        k_phase2<<<blocks_for(numel[i]), PD_THREADS, 0, st>>>(g, hp, param[i], pdt[i], grad[i], state[i], numel[i]);
        k_head<<<1, 1, 0, st>>>(g, state[i]);
    }
    return cudaGetLastError() == cudaSuccess ? ORK_OK : ORK_E_CUDA;
}
