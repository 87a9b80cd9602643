// CTC loss: checks on the host, the forward (α) and backward (β, gradient) recursions of
// ops/ctc_math.h per utterance (in float32 on the CPU, each frame's row vectorised, below), the
// reduction composed from primitive ops.
//
// Shapes: log_probs and its gradient (B, T, C), targets (B, S), lengths and per-utterance losses (B),
// α (B, T, L) with L = 2S + 1 (rows t ≥ T_b and positions s ≥ 2S_b + 1 of utterance b unused).
#include "ops/ctc.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/cpu_capability.h"
#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/ctc_math.h"
#include "ops/cuda/ctc.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/fast_exp.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

// ---- float32 on the CPU: each frame's row of α or β, vectorised over the positions s ----
//
// The recursions of ops/ctc_math.h, with each position's two or three terms summed as
// m + ln(Σ e^(a − m)) (m their maximum) through exp_nonpositive_as and log_1_to_4_as (ops/fast_exp.h)
// rather than nested log_adds of libm's log1p and exp: a row is then one loop the compiler runs in
// vector lanes. The gradient sums the posteriors e^(α + β − ln y − ln p) ≤ 1 of the positions that
// carry each class rather than their logs. float64 keeps ctc_math.h's scalar form.

// ln(e^a + e^b + e^c); −inf when all three are.
template <bool fused>
[[gnu::always_inline]] inline float log_sum_exp3(float a, float b, float c) {
  const float m = std::max(a, std::max(b, c));
  const bool none = m == -std::numeric_limits<float>::infinity();
  const float shift = none ? 0.0f : m;
  const float sum = exp_nonpositive_as<fused>(a - shift) + exp_nonpositive_as<fused>(b - shift) +
                    exp_nonpositive_as<fused>(c - shift);
  return none ? m : shift + log_1_to_4_as<fused>(sum);
}

// One utterance's extended labels z'_s as int32 (the gathers' index width) and where α_t(s) takes
// α_{t−1}(s − 2) too (eq. 8's condition); β_t(s) takes β_{t+1}(s + 2) where skip[s + 2].
struct Extended {
  std::vector<int32_t> label;
  std::vector<uint8_t> skip;
  Extended(const int64_t* z, int64_t L, int64_t blank) : label(L), skip(L, 0) {
    for (int64_t s = 0; s < L; ++s) label[s] = static_cast<int32_t>(ctc::extended_label(z, s, blank));
    for (int64_t s = 2; s < L; ++s) skip[s] = label[s] != blank && label[s] != label[s - 2];
  }
};

// α_t (row `cur`, L positions) from α_{t−1} (`prev`) and the frame's log-probabilities lp.
template <bool fused>
[[gnu::always_inline]] inline void alpha_row(const float* prev, const float* lp, const Extended& z, int64_t L,
                                             float* cur) {
  constexpr float none = -std::numeric_limits<float>::infinity();
  const int32_t* k = z.label.data();
  const uint8_t* skip = z.skip.data();
  cur[0] = lp[k[0]] + prev[0];
  if (L > 1) cur[1] = lp[k[1]] + log_sum_exp3<fused>(prev[1], prev[0], none);
#pragma omp simd
  for (int64_t s = 2; s < L; ++s) {
    const float two_back = prev[s - 2];  // read unconditionally: a load under a condition stays scalar
    cur[s] = lp[k[s]] + log_sum_exp3<fused>(prev[s], prev[s - 1], skip[s] ? two_back : none);
  }
}

// β_t (row `cur`) from β_{t+1} (`next`).
template <bool fused>
[[gnu::always_inline]] inline void beta_row(const float* next, const float* lp, const Extended& z, int64_t L,
                                            float* cur) {
  constexpr float none = -std::numeric_limits<float>::infinity();
  const int32_t* k = z.label.data();
  const uint8_t* skip = z.skip.data();
  cur[L - 1] = lp[k[L - 1]] + next[L - 1];
  if (L > 1) cur[L - 2] = lp[k[L - 2]] + log_sum_exp3<fused>(next[L - 2], next[L - 1], none);
#pragma omp simd
  for (int64_t s = 0; s < L - 2; ++s) {
    const float two_on = next[s + 2];
    cur[s] = lp[k[s]] + log_sum_exp3<fused>(next[s], next[s + 1], skip[s + 2] ? two_on : none);
  }
}

// The posterior of each position at one frame, e^(α_t(s) + β_t(s) − ln y_t^{z'_s} − ln p) (Graves's
// β holds y_t as α does: eq. 14's division), at most 1: taken at most 0 in the exponent.
template <bool fused>
[[gnu::always_inline]] inline void posterior_row(const float* a, const float* b, const float* lp, const Extended& z,
                                                 int64_t L, float log_p, float* out) {
  const int32_t* k = z.label.data();
#pragma omp simd
  for (int64_t s = 0; s < L; ++s) out[s] = exp_nonpositive_as<fused>(std::min(a[s] + b[s] - lp[k[s]] - log_p, 0.0f));
}

struct CtcRows {
  void (*alpha)(const float*, const float*, const Extended&, int64_t, float*);
  void (*beta)(const float*, const float*, const Extended&, int64_t, float*);
  void (*posterior)(const float*, const float*, const float*, const Extended&, int64_t, float, float*);
};

void alpha_row_baseline(const float* p, const float* lp, const Extended& z, int64_t L, float* c) {
  alpha_row<false>(p, lp, z, L, c);
}
void beta_row_baseline(const float* n, const float* lp, const Extended& z, int64_t L, float* c) {
  beta_row<false>(n, lp, z, L, c);
}
void posterior_row_baseline(const float* a, const float* b, const float* lp, const Extended& z, int64_t L,
                            float log_p, float* out) {
  posterior_row<false>(a, b, lp, z, L, log_p, out);
}
#if TP_CPU_DISPATCH
TP_TARGET_AVX2 void alpha_row_avx2(const float* p, const float* lp, const Extended& z, int64_t L, float* c) {
  alpha_row<true>(p, lp, z, L, c);
}
TP_TARGET_AVX2 void beta_row_avx2(const float* n, const float* lp, const Extended& z, int64_t L, float* c) {
  beta_row<true>(n, lp, z, L, c);
}
TP_TARGET_AVX2 void posterior_row_avx2(const float* a, const float* b, const float* lp, const Extended& z, int64_t L,
                                       float log_p, float* out) {
  posterior_row<true>(a, b, lp, z, L, log_p, out);
}
// AVX-512: the rows above in intrinsics, their last positions one masked vector. The loops above,
// compiled for AVX-512, ran their positions in GCC's narrower epilogues and scalar code (at 65
// positions no 16-lane iteration ran at all: docs/PERFORMANCE.md). Operation for operation the
// loops' arithmetic (ops/fast_exp.h's vector forms): the same bits.

// The lanes of [s, s + 16) below n.
TP_TARGET_AVX512 inline __mmask16 positions_below(int64_t s, int64_t n) {
  return static_cast<__mmask16>(n - s >= 16 ? 0xFFFF : (1u << (n - s)) - 1);
}

// std::max(x, y), lane by lane: x < y ? y : x.
TP_TARGET_AVX512 inline __m512 max_of(__m512 x, __m512 y) {
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_LT_OQ), x, y);
}

// log_sum_exp3<true> on 16 lanes.
TP_TARGET_AVX512 inline __m512 log_sum_exp3_avx512(__m512 a, __m512 b, __m512 c) {
  const __m512 m = max_of(a, max_of(b, c));
  const __mmask16 none = _mm512_cmp_ps_mask(m, _mm512_set1_ps(-std::numeric_limits<float>::infinity()), _CMP_EQ_OQ);
  const __m512 shift = _mm512_maskz_mov_ps(static_cast<__mmask16>(~none), m);
  const __m512 sum = _mm512_add_ps(_mm512_add_ps(exp_nonpositive_avx512(_mm512_sub_ps(a, shift)),
                                                 exp_nonpositive_avx512(_mm512_sub_ps(b, shift))),
                                   exp_nonpositive_avx512(_mm512_sub_ps(c, shift)));
  return _mm512_mask_blend_ps(none, _mm512_add_ps(shift, log_1_to_4_avx512(sum)), m);
}

// lp[k[s]] for the lanes `lanes` of positions [s, s + 16), 0 elsewhere (never stored).
TP_TARGET_AVX512 inline __m512 emitted(const float* lp, const int32_t* k, int64_t s, __mmask16 lanes) {
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lanes, _mm512_maskz_loadu_epi32(lanes, k + s), lp, 4);
}

// The lanes of [s, s + 16) whose skip byte is set.
TP_TARGET_AVX512 inline __mmask16 skips(const uint8_t* skip, int64_t s, __mmask16 lanes) {
  return _mm512_mask_test_epi32_mask(lanes, _mm512_maskz_cvtepu8_epi32(lanes, _mm_maskz_loadu_epi8(lanes, skip + s)),
                                     _mm512_set1_epi32(0xFF));
}

TP_TARGET_AVX512 void alpha_row_avx512(const float* prev, const float* lp, const Extended& z, int64_t L, float* cur) {
  const __m512 none = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const int32_t* k = z.label.data();
  cur[0] = lp[k[0]] + prev[0];
  if (L > 1) cur[1] = lp[k[1]] + log_sum_exp3<true>(prev[1], prev[0], -std::numeric_limits<float>::infinity());
  for (int64_t s = 2; s < L; s += 16) {
    const __mmask16 lanes = positions_below(s, L);
    const __m512 two_back = _mm512_mask_loadu_ps(none, skips(z.skip.data(), s, lanes), prev + s - 2);
    const __m512 sum = log_sum_exp3_avx512(_mm512_maskz_loadu_ps(lanes, prev + s),
                                           _mm512_maskz_loadu_ps(lanes, prev + s - 1), two_back);
    _mm512_mask_storeu_ps(cur + s, lanes, _mm512_add_ps(emitted(lp, k, s, lanes), sum));
  }
}

TP_TARGET_AVX512 void beta_row_avx512(const float* next, const float* lp, const Extended& z, int64_t L, float* cur) {
  const __m512 none = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const int32_t* k = z.label.data();
  cur[L - 1] = lp[k[L - 1]] + next[L - 1];
  if (L > 1)
    cur[L - 2] = lp[k[L - 2]] + log_sum_exp3<true>(next[L - 2], next[L - 1], -std::numeric_limits<float>::infinity());
  for (int64_t s = 0; s < L - 2; s += 16) {
    const __mmask16 lanes = positions_below(s, L - 2);
    const __m512 two_on = _mm512_mask_loadu_ps(none, skips(z.skip.data(), s + 2, lanes), next + s + 2);
    const __m512 sum = log_sum_exp3_avx512(_mm512_maskz_loadu_ps(lanes, next + s),
                                           _mm512_maskz_loadu_ps(lanes, next + s + 1), two_on);
    _mm512_mask_storeu_ps(cur + s, lanes, _mm512_add_ps(emitted(lp, k, s, lanes), sum));
  }
}

TP_TARGET_AVX512 void posterior_row_avx512(const float* a, const float* b, const float* lp, const Extended& z,
                                           int64_t L, float log_p, float* out) {
  const __m512 zero = _mm512_setzero_ps(), lpv = _mm512_set1_ps(log_p);
  for (int64_t s = 0; s < L; s += 16) {
    const __mmask16 lanes = positions_below(s, L);
    const __m512 x = _mm512_sub_ps(
        _mm512_sub_ps(_mm512_add_ps(_mm512_maskz_loadu_ps(lanes, a + s), _mm512_maskz_loadu_ps(lanes, b + s)),
                      emitted(lp, z.label.data(), s, lanes)),
        lpv);
    // std::min(x, 0): 0 < x ? 0 : x
    const __m512 capped = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(zero, x, _CMP_LT_OQ), x, zero);
    _mm512_mask_storeu_ps(out + s, lanes, exp_nonpositive_avx512(capped));
  }
}
#endif

// The three, as the capability in use compiled them (core/cpu_capability.h).
CtcRows ctc_rows() {
#if TP_CPU_DISPATCH
  switch (cpu_capability()) {
    case CpuCapability::Avx512: return {alpha_row_avx512, beta_row_avx512, posterior_row_avx512};
    case CpuCapability::Avx2: return {alpha_row_avx2, beta_row_avx2, posterior_row_avx2};
    case CpuCapability::Baseline: break;
  }
#endif
  return {alpha_row_baseline, beta_row_baseline, posterior_row_baseline};
}

struct CtcForward {
  Tensor alpha;  // (B, T, L)
  Tensor log_p;  // (B): log p(z_b | x_b), −inf when no path has a nonzero probability
  Tensor loss;   // (B): −log_p, or 0 for an infinite one under CtcInfinity::Zero
};

CtcForward ctc_forward(const Tensor& lp_t, const Tensor& targets_t, const Tensor& in_len_t, const Tensor& tg_len_t,
                       int64_t blank, CtcInfinity infinity) {
  const int64_t B = lp_t.shape()[0], T = lp_t.shape()[1], C = lp_t.shape()[2], S = targets_t.shape()[1];
  const int64_t L = 2 * S + 1;
  CtcForward out{empty({B, T, L}, lp_t.options()), empty({B}, lp_t.options()), empty({B}, lp_t.options())};
  if (on_cuda("ctc_loss", lp_t, [&] {
        cuda::ctc_forward(lp_t, targets_t, in_len_t, tg_len_t, blank, infinity, out.alpha, out.log_p, out.loss);
      }))
    return out;
  visit_floating(lp_t.dtype(), "ctc_loss", [&](auto tag) {
    using F = decltype(tag);
    const F* lp = lp_t.data<F>();
    const int64_t* targets = targets_t.data<int64_t>();
    const int64_t* in_len = in_len_t.data<int64_t>();
    const int64_t* tg_len = tg_len_t.data<int64_t>();
    F* alpha = out.alpha.data<F>();
    F* log_p = out.log_p.data<F>();
    F* loss = out.loss.data<F>();
    const CtcRows rows = ctc_rows();
#pragma omp parallel for schedule(dynamic) if (B > 1)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t Tb = in_len[b], Lb = 2 * tg_len[b] + 1;
      const F* x = lp + b * T * C;       // (T, C)
      const int64_t* z = targets + b * S;  // (S)
      F* a = alpha + b * T * L;           // (T, L)
      F lpb;
      if (Tb == 0) {
        lpb = Lb == 1 ? F(0) : ctc::minus_infinity<F>();  // zero frames emit only the empty labelling
      } else {
        for (int64_t s = 0; s < Lb; ++s) a[s] = ctc::alpha_start(x, z, s, blank);
        if constexpr (std::is_same_v<F, float>) {
          const Extended ext(z, Lb, blank);
          for (int64_t t = 1; t < Tb; ++t) rows.alpha(a + (t - 1) * L, x + t * C, ext, Lb, a + t * L);
        } else {
          for (int64_t t = 1; t < Tb; ++t)
            for (int64_t s = 0; s < Lb; ++s) a[t * L + s] = ctc::alpha_step(a + (t - 1) * L, x + t * C, z, s, blank);
        }
        lpb = ctc::log_likelihood(a + (Tb - 1) * L, Lb);
      }
      log_p[b] = lpb;
      loss[b] = lpb == ctc::minus_infinity<F>() && infinity == CtcInfinity::Zero ? F(0) : -lpb;
    }
  });
  return out;
}

// For t < T_b, with lcab_t(k) = log Σ_{s: z'_s = k} α_t(s) β_t(s) (Graves et al. 2006, eq. 14–15):
//   ∂ℓ_b/∂(log y_t^k) = −e^{lcab_t(k) − log y_t^k − log p(z_b|x_b)}      (eq. 16, w.r.t. log y)
// and 0 for t ≥ T_b and for an utterance with log p = −inf; scaled by dy_b.
Tensor ctc_backward(const Tensor& dy_in, const Tensor& lp_t, const Tensor& targets_t, const Tensor& in_len_t,
                    const Tensor& tg_len_t, int64_t blank, const Tensor& alpha_t, const Tensor& log_p_t) {
  const Tensor dy = contiguous(dy_in);
  Tensor grad = empty(lp_t.shape(), lp_t.options());
  if (on_cuda("ctc_loss", dy, [&] {
        cuda::ctc_backward(dy, lp_t, targets_t, in_len_t, tg_len_t, blank, alpha_t, log_p_t, grad);
      }))
    return grad;
  const int64_t B = lp_t.shape()[0], T = lp_t.shape()[1], C = lp_t.shape()[2], S = targets_t.shape()[1];
  const int64_t L = 2 * S + 1;
  visit_floating(lp_t.dtype(), "ctc_loss", [&](auto tag) {
    using F = decltype(tag);
    const F* lp = lp_t.data<F>();
    const int64_t* targets = targets_t.data<int64_t>();
    const int64_t* in_len = in_len_t.data<int64_t>();
    const int64_t* tg_len = tg_len_t.data<int64_t>();
    const F* alpha = alpha_t.data<F>();
    const F* log_p = log_p_t.data<F>();
    const F* dys = dy.data<F>();
    F* g = grad.data<F>();
    const CtcRows rows = ctc_rows();
#pragma omp parallel for schedule(dynamic) if (B > 1)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t Tb = in_len[b], Lb = 2 * tg_len[b] + 1;
      const F* x = lp + b * T * C;          // (T, C)
      const int64_t* z = targets + b * S;     // (S)
      const F* a = alpha + b * T * L;        // (T, L)
      F* gb = g + b * T * C;                 // (T, C)
      std::fill(gb, gb + T * C, F(0));
      if (Tb == 0 || log_p[b] == ctc::minus_infinity<F>()) continue;
      std::vector<F> beta(static_cast<size_t>(Tb * Lb));  // (T_b, L_b)
      for (int64_t s = 0; s < Lb; ++s) beta[(Tb - 1) * Lb + s] = ctc::beta_start(x + (Tb - 1) * C, z, s, Lb, blank);
      if constexpr (std::is_same_v<F, float>) {
        const Extended ext(z, Lb, blank);
        for (int64_t t = Tb - 2; t >= 0; --t)
          rows.beta(beta.data() + (t + 1) * Lb, x + t * C, ext, Lb, beta.data() + t * Lb);
        // ∂ℓ_b/∂(log y_t^k) = −dy_b Σ_{s: z'_s = k} (the posterior of s at t): eq. 16 with lcab's sum
        // taken over the posteriors themselves.
        std::vector<float> posterior(static_cast<size_t>(Lb));
        for (int64_t t = 0; t < Tb; ++t) {
          rows.posterior(a + t * L, beta.data() + t * Lb, x + t * C, ext, Lb, log_p[b], posterior.data());
          float* gt = gb + t * C;
          for (int64_t s = 0; s < Lb; ++s) gt[ext.label[s]] += posterior[s];  // s ascending
          for (int64_t k = 0; k < C; ++k) gt[k] = gt[k] == 0.0f ? 0.0f : -dys[b] * gt[k];
        }
        continue;
      }
      for (int64_t t = Tb - 2; t >= 0; --t)
        for (int64_t s = 0; s < Lb; ++s)
          beta[t * Lb + s] = ctc::beta_step(beta.data() + (t + 1) * Lb, x + t * C, z, s, Lb, blank);
      std::vector<F> lcab(static_cast<size_t>(C));
      for (int64_t t = 0; t < Tb; ++t) {
        std::fill(lcab.begin(), lcab.end(), ctc::minus_infinity<F>());
        for (int64_t s = 0; s < Lb; ++s) {  // s ascending: the order the CUDA kernel sums in too
          const int64_t k = ctc::extended_label(z, s, blank);
          lcab[k] = ctc::log_add(lcab[k], a[t * L + s] + beta[t * Lb + s]);
        }
        for (int64_t k = 0; k < C; ++k) gb[t * C + k] = ctc::ctc_gradient(dys[b], lcab[k], x[t * C + k], log_p[b]);
      }
    }
  });
  return grad;
}

// An int64 (B) lengths tensor on the host, each entry in [0, limit].
std::vector<int64_t> read_lengths(const char* op, const char* name, const Tensor& lengths, int64_t B, int64_t limit,
                                  const char* limit_name) {
  TP_CHECK(lengths.dtype() == DType::Int64, op, name, " must be int64, got ", lengths.dtype(), " of shape ",
           to_string(lengths.shape()));
  TP_CHECK(lengths.shape() == Shape{B}, op, name, " must have shape (B) = (", B, "), got ",
           to_string(lengths.shape()));
  std::vector<int64_t> v = lengths.to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    TP_CHECK(v[b] >= 0 && v[b] <= limit, op, name, "[", b, "] = ", v[b], " is out of range [0, ", limit, "] (",
             limit_name, " = ", limit, ")");
  return v;
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank, CtcReduction reduction, CtcInfinity infinity) {
  if (autocast_widens({&log_probs}))  // ops/autocast.h
    return ctc_loss(autocast_float32(log_probs), targets, input_lengths, target_lengths, blank, reduction, infinity);
  const char* op = "ctc_loss";
  TP_CHECK(log_probs.defined() && targets.defined() && input_lengths.defined() && target_lengths.defined(), op,
           "got an undefined tensor among log_probs, targets, input_lengths, target_lengths");
  TP_CHECK(is_floating(log_probs.dtype()), op, "log_probs must be floating, got ", log_probs.dtype(), " of shape ",
           to_string(log_probs.shape()));
  TP_CHECK(log_probs.dim() == 3, op, "log_probs must have shape (B, T, C), got ", to_string(log_probs.shape()));
  const int64_t B = log_probs.shape()[0], T = log_probs.shape()[1], C = log_probs.shape()[2];
  TP_CHECK(C >= 1, op, "log_probs must have at least one class (the blank), got shape ", to_string(log_probs.shape()));
  check_same_device(op, {&log_probs, &targets, &input_lengths, &target_lengths});
  TP_CHECK(targets.dtype() == DType::Int64, op, "targets must be int64, got ", targets.dtype(), " of shape ",
           to_string(targets.shape()));
  TP_CHECK(targets.dim() == 2 && targets.shape()[0] == B, op, "targets must have shape (B, S) with B = ", B,
           " (log_probs of shape ", to_string(log_probs.shape()), "), got ", to_string(targets.shape()));
  TP_CHECK(blank >= 0 && blank < C, op, "blank = ", blank, " is out of range for ", C, " classes (log_probs of shape ",
           to_string(log_probs.shape()), ")");
  const int64_t S = targets.shape()[1];
  const std::vector<int64_t> in_len = read_lengths(op, "input_lengths", input_lengths, B, T, "T");
  const std::vector<int64_t> tg_len = read_lengths(op, "target_lengths", target_lengths, B, S, "S");
  const Tensor z = contiguous(targets);
  const std::vector<int64_t> labels = z.to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < tg_len[b]; ++i) {
      const int64_t k = labels[static_cast<size_t>(b * S + i)];
      TP_CHECK(k >= 0 && k < C && k != blank, op, "targets[", b, ", ", i, "] = ", k, " is ",
               k == blank ? "the blank" : "out of range", " (", C, " classes, blank = ", blank,
               "); labels must lie in [0, C) and differ from the blank");
    }

  const Tensor x = contiguous(log_probs.detach());
  const Tensor il = contiguous(input_lengths), tl = contiguous(target_lengths);
  const CtcForward f = ctc_forward(x, z, il, tl, blank, infinity);
  // d(log y_t^k) = dy_b · ∂ℓ_b/∂(log y_t^k), the α/β formula of ctc_backward above
  record(op, {log_probs}, {f.loss},
         [blank, xs = Saved(x), zs = Saved(z), ils = Saved(il), tls = Saved(tl), as = Saved(f.alpha),
          lps = Saved(f.log_p)](const std::vector<Tensor>& dy, Gradients& g) {
           g.accumulate(0, ctc_backward(dy[0], xs.get(), zs.get(), ils.get(), tls.get(), blank, as.get(), lps.get()));
         });

  switch (reduction) {
    case CtcReduction::None: return f.loss;
    case CtcReduction::Sum: return sum(f.loss);
    case CtcReduction::Mean: {
      std::vector<double> weight(static_cast<size_t>(B));  // 1 / (max(S_b, 1) · B)
      for (int64_t b = 0; b < B; ++b)
        weight[static_cast<size_t>(b)] = 1.0 / (static_cast<double>(std::max<int64_t>(tg_len[b], 1)) * static_cast<double>(B));
      const Tensor w = to(to(from_vector<double>(weight, {B}), log_probs.dtype()), log_probs.device());
      return sum(f.loss * w);
    }
  }
  fail(op, "unknown reduction");
}

}  // namespace tapestry
