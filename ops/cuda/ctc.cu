// CUDA kernels of the CTC loss, with the CPU's recursions (ops/ctc_math.h, ops/ctc.cpp).
//
// α and β: one block per utterance (grid-stride over the batch), its threads striding along the
// extended label positions s < 2S_b + 1, a loop over the frames with a barrier between them (each
// frame reads the previous frame's row, written by other threads). The gradient: one block per
// (utterance, frame) row, one thread per class, each summing its class's positions α_t(s) β_t(s) in
// ascending s, the CPU's order. No atomics: the same bits on every run.
//
// Shapes: log_probs and grad (B, T, C), targets (B, S), lengths, log_p, loss and dy (B), alpha and
// beta (B, T, L) with L = 2S + 1.
#include <cmath>

#include "core/creation.h"
#include "core/dispatch.h"
#include "ops/ctc_math.h"
#include "ops/cuda/ctc.h"
#include "ops/cuda/launch.cuh"

namespace tapestry::cuda {

namespace {

template <class F>
__global__ void ctc_alpha_kernel(const F* lp, const int64_t* targets, const int64_t* in_len, const int64_t* tg_len,
                                 int64_t B, int64_t T, int64_t C, int64_t S, int64_t blank, bool zero_infinity,
                                 F* alpha, F* log_p, F* loss) {
  const int64_t L = 2 * S + 1;
  for (int64_t b = blockIdx.x; b < B; b += gridDim.x) {
    const int64_t Tb = in_len[b], Lb = 2 * tg_len[b] + 1;  // the same in every thread of the block
    const F* x = lp + b * T * C;                           // (T, C)
    const int64_t* z = targets + b * S;                    // (S)
    F* a = alpha + b * T * L;                              // (T, L)
    if (Tb > 0) {
      for (int64_t s = threadIdx.x; s < Lb; s += blockDim.x) a[s] = ctc::alpha_start(x, z, s, blank);
      for (int64_t t = 1; t < Tb; ++t) {
        __syncthreads();  // row t − 1 complete
        for (int64_t s = threadIdx.x; s < Lb; s += blockDim.x)
          a[t * L + s] = ctc::alpha_step(a + (t - 1) * L, x + t * C, z, s, blank);
      }
      __syncthreads();  // the last row complete
    }
    if (threadIdx.x == 0) {
      const F l = Tb == 0 ? (Lb == 1 ? F(0) : ctc::minus_infinity<F>()) : ctc::log_likelihood(a + (Tb - 1) * L, Lb);
      log_p[b] = l;
      loss[b] = l == ctc::minus_infinity<F>() && zero_infinity ? F(0) : -l;
    }
  }
}

template <class F>
__global__ void ctc_beta_kernel(const F* lp, const int64_t* targets, const int64_t* in_len, const int64_t* tg_len,
                                const F* log_p, int64_t B, int64_t T, int64_t C, int64_t S, int64_t blank, F* beta) {
  const int64_t L = 2 * S + 1;
  for (int64_t b = blockIdx.x; b < B; b += gridDim.x) {
    const int64_t Tb = in_len[b], Lb = 2 * tg_len[b] + 1;
    if (Tb == 0 || log_p[b] == ctc::minus_infinity<F>()) continue;  // no gradient: β unused
    const F* x = lp + b * T * C;
    const int64_t* z = targets + b * S;
    F* be = beta + b * T * L;
    for (int64_t s = threadIdx.x; s < Lb; s += blockDim.x)
      be[(Tb - 1) * L + s] = ctc::beta_start(x + (Tb - 1) * C, z, s, Lb, blank);
    for (int64_t t = Tb - 2; t >= 0; --t) {
      __syncthreads();  // row t + 1 complete
      for (int64_t s = threadIdx.x; s < Lb; s += blockDim.x)
        be[t * L + s] = ctc::beta_step(be + (t + 1) * L, x + t * C, z, s, Lb, blank);
    }
    __syncthreads();  // before the block moves on to its next utterance
  }
}

// Row r = b·T + t of grad; thread k: lcab = log Σ_{s: z'_s = k} α_t(s) β_t(s), s ascending.
template <class F>
__global__ void ctc_gradient_kernel(const F* dy, const F* lp, const int64_t* targets, const int64_t* in_len,
                                    const int64_t* tg_len, const F* alpha, const F* beta, const F* log_p, int64_t B,
                                    int64_t T, int64_t C, int64_t S, int64_t blank, F* grad) {
  const int64_t L = 2 * S + 1;
  for (int64_t r = blockIdx.x; r < B * T; r += gridDim.x) {
    const int64_t b = r / T, t = r % T;
    const int64_t Tb = in_len[b], Sb = tg_len[b];
    const bool live = t < Tb && log_p[b] != ctc::minus_infinity<F>();
    const int64_t* z = targets + b * S;
    const F* a = alpha + r * L;  // α_t, (L)
    const F* be = beta + r * L;  // β_t, (L)
    for (int64_t k = threadIdx.x; k < C; k += blockDim.x) {
      if (!live) {
        grad[r * C + k] = F(0);
        continue;
      }
      F lcab = ctc::minus_infinity<F>();
      if (k == blank) {
        for (int64_t s = 0; s <= 2 * Sb; s += 2) lcab = ctc::log_add(lcab, a[s] + be[s]);
      } else {
        for (int64_t i = 0; i < Sb; ++i)
          if (z[i] == k) lcab = ctc::log_add(lcab, a[2 * i + 1] + be[2 * i + 1]);
      }
      grad[r * C + k] = ctc::ctc_gradient(dy[b], lcab, lp[r * C + k], log_p[b]);
    }
  }
}

template <class F>
const F* cdata(const Tensor& t) {
  return static_cast<const F*>(t.raw_data());
}
template <class F>
F* mdata(const Tensor& t) {
  return static_cast<F*>(t.raw_data());
}

}  // namespace

void ctc_forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                 const Tensor& target_lengths, int64_t blank, CtcInfinity infinity, const Tensor& alpha,
                 const Tensor& log_p, const Tensor& loss) {
  const int64_t B = log_probs.shape()[0], T = log_probs.shape()[1], C = log_probs.shape()[2];
  const int64_t S = targets.shape()[1];
  if (B == 0) return;
  CudaContext& ctx = active_context(log_probs.device());
  visit_floating(log_probs.dtype(), "ctc_loss", [&](auto tag) {
    using F = decltype(tag);
    const int threads = pow2_threads(2 * S + 1, 32, kThreads);
    ctc_alpha_kernel<F><<<static_cast<unsigned>(std::min(B, kMaxBlocks)), threads, 0, ctx.stream()>>>(
        cdata<F>(log_probs), cdata<int64_t>(targets), cdata<int64_t>(input_lengths), cdata<int64_t>(target_lengths),
        B, T, C, S, blank, infinity == CtcInfinity::Zero, mdata<F>(alpha), mdata<F>(log_p), mdata<F>(loss));
    TP_CUDA_CHECK_LAUNCH();
  });
}

void ctc_backward(const Tensor& dy, const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                  const Tensor& target_lengths, int64_t blank, const Tensor& alpha, const Tensor& log_p,
                  const Tensor& grad) {
  const int64_t B = log_probs.shape()[0], T = log_probs.shape()[1], C = log_probs.shape()[2];
  const int64_t S = targets.shape()[1];
  if (B * T * C == 0) return;
  CudaContext& ctx = active_context(log_probs.device());
  const Tensor beta = empty(alpha.shape(), alpha.options());  // (B, T, L)
  visit_floating(log_probs.dtype(), "ctc_loss", [&](auto tag) {
    using F = decltype(tag);
    const int threads = pow2_threads(2 * S + 1, 32, kThreads);
    ctc_beta_kernel<F><<<static_cast<unsigned>(std::min(B, kMaxBlocks)), threads, 0, ctx.stream()>>>(
        cdata<F>(log_probs), cdata<int64_t>(targets), cdata<int64_t>(input_lengths), cdata<int64_t>(target_lengths),
        cdata<F>(log_p), B, T, C, S, blank, mdata<F>(beta));
    TP_CUDA_CHECK_LAUNCH();
    ctc_gradient_kernel<F><<<static_cast<unsigned>(std::min(B * T, kMaxBlocks)), pow2_threads(C, 32, kThreads), 0,
                             ctx.stream()>>>(
        cdata<F>(dy), cdata<F>(log_probs), cdata<int64_t>(targets), cdata<int64_t>(input_lengths),
        cdata<int64_t>(target_lengths), cdata<F>(alpha), cdata<F>(beta), cdata<F>(log_p), B, T, C, S, blank,
        mdata<F>(grad));
    TP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tapestry::cuda
