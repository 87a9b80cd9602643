#include "ops/dropout.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <type_traits>

#include "core/cpu_capability.h"
#include "ops/common.h"
#include "ops/cuda/dropout.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/elementwise_math.h"
#include "ops/shape.h"

#if TP_CPU_DISPATCH
#include <immintrin.h>
#endif

namespace tapestry {

namespace {

constexpr int64_t kParallelWork = 32768;  // elements below which a loop stays on one thread

// The draw that decides which elements survive (ops/dropout.h): element i takes 16-bit draw i % 8
// of the Philox block of counter first + i / 8 under `seed` and survives iff it is ≥ cut. One block
// (ten rounds) serves eight elements: the rounds were most of dropout's cost on a CPU.
struct DropMask {
  uint64_t first = 0, seed = 0;
  uint32_t cut = 0;  // round(p · 2^16), at most 2^16 − 1
  double scale = 1;  // 1 / (1 − p)

  DropMask(uint64_t first, uint64_t seed, double p)
      : first(first), seed(seed), cut(static_cast<uint32_t>(std::min(65535.0, std::nearbyint(p * 65536.0)))),
        scale(1.0 / (1.0 - p)) {}
};

// ---- kernels (the CPU loops; a tensor on a GPU takes the CUDA launcher of ops/cuda/dropout.h) ----

// With AVX2 and AVX-512, Philox blocks are drawn kBlocks at a time, their rounds lane by lane over
// arrays, so that the compiler runs the blocks side by side in vector registers (16 lanes of AVX-512);
// float32 and bfloat16 under AVX-512 take the same steps written in intrinsics (mask_blocks_avx512_vector).
constexpr int64_t kBlocks = 16;

// out[i] = a(in[i]) · scale where element i survives, else 0, for the elements of blocks [q0, q1)
// below n, with a the identity or, kRelu, relu (math::Relu): the same draws as
// philox_block(first + q, seed) block by block (core/random.h), in integer arithmetic, so that every
// CPU capability gives the same bits.
template <bool kRelu, class T>
[[gnu::always_inline]] inline void mask_blocks(const T* in, T* out, int64_t n, int64_t q0, int64_t q1,
                                               const DropMask& mask) {
  using C = compute_t<T>;  // bfloat16 is scaled in float32 and rounded once
  const C scale = static_cast<C>(mask.scale);
  for (int64_t q = q0; q < q1; q += kBlocks) {
    uint32_t c0[kBlocks], c1[kBlocks], c2[kBlocks], c3[kBlocks];
    for (int64_t l = 0; l < kBlocks; ++l) {
      const uint64_t counter = mask.first + static_cast<uint64_t>(q + l);
      c0[l] = static_cast<uint32_t>(counter), c1[l] = static_cast<uint32_t>(counter >> 32), c2[l] = c3[l] = 0;
    }
    uint32_t k0 = static_cast<uint32_t>(mask.seed), k1 = static_cast<uint32_t>(mask.seed >> 32);
    for (int round = 0; round < 10; ++round) {  // philox4x32_10's rounds, lane by lane
      for (int64_t l = 0; l < kBlocks; ++l) {
        const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0[l];
        const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2[l];
        c0[l] = static_cast<uint32_t>(p1 >> 32) ^ c1[l] ^ k0;
        c1[l] = static_cast<uint32_t>(p1);
        c2[l] = static_cast<uint32_t>(p0 >> 32) ^ c3[l] ^ k1;
        c3[l] = static_cast<uint32_t>(p0);
      }
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    // Block l's eight 16-bit draws, uniform_bits16's order: the low then the high half of each word.
    uint32_t draws[kBlocks * 8];
    for (int64_t l = 0; l < kBlocks; ++l) {
      const uint32_t words[4] = {c0[l], c1[l], c2[l], c3[l]};
      for (int64_t j = 0; j < 8; ++j) draws[l * 8 + j] = (words[j >> 1] >> (16 * (j & 1))) & 0xFFFFu;
    }
    const int64_t first = 8 * q, count = std::min<int64_t>(8 * std::min(kBlocks, q1 - q), n - first);
    for (int64_t i = 0; i < count; ++i) {
      const C v = kRelu ? math::Relu{}.forward(C(in[first + i])) : C(in[first + i]);
      out[first + i] = draws[i] >= mask.cut ? T(v * scale) : T(0);
    }
  }
}

// The baseline (SSE2) has no fast 32 × 32 → 64-bit vector product: there a block at a time, as
// core/random.h draws it, runs faster than the lanes above, with the same draws.
template <bool kRelu, class T>
void mask_blocks_baseline(const T* in, T* out, int64_t n, int64_t q0, int64_t q1, const DropMask& mask) {
  using C = compute_t<T>;
  const C scale = static_cast<C>(mask.scale);
  for (int64_t q = q0; q < q1; ++q) {
    const PhiloxBlock block = philox_block(mask.first + static_cast<uint64_t>(q), mask.seed);
    for (int64_t j = 0, i = 8 * q; j < 8 && i < n; ++j, ++i) {
      const C v = kRelu ? math::Relu{}.forward(C(in[i])) : C(in[i]);
      out[i] = uniform_bits16(block, j) >= mask.cut ? T(v * scale) : T(0);
    }
  }
}
#if TP_CPU_DISPATCH
template <bool kRelu, class T>
TP_TARGET_AVX2 void mask_blocks_avx2(const T* in, T* out, int64_t n, int64_t q0, int64_t q1, const DropMask& mask) {
  mask_blocks<kRelu>(in, out, n, q0, q1, mask);
}

// Every 64-bit lane: the maskz forms with it stand for the plain ones, whose undefined pass-through
// GCC 12 warns may be used uninitialised.
constexpr __mmask8 kAll64 = 0xFF;

// The low 32 bits of x in every lane.
TP_TARGET_AVX512 inline __m512i u32(uint64_t x) {
  return _mm512_set1_epi32(static_cast<int>(static_cast<uint32_t>(x)));
}

// The 32 × 32 → 64-bit products a · m of 16 lanes: their high words, their low words in *lo.
TP_TARGET_AVX512 inline __m512i mul_hi_lo(__m512i a, __m512i m, __m512i* lo) {
  const __m512i even = _mm512_maskz_mul_epu32(kAll64, a, m);                                // lanes 0, 2, …
  const __m512i odd = _mm512_maskz_mul_epu32(kAll64, _mm512_maskz_srli_epi64(kAll64, a, 32), m);  // lanes 1, 3, …
  *lo = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_maskz_slli_epi64(kAll64, odd, 32));
  return _mm512_mask_blend_epi32(0xAAAA, _mm512_maskz_srli_epi64(kAll64, even, 32), odd);
}

// The elements of `valid` from p as float32, the others 0.
TP_TARGET_AVX512 inline __m512 load16(const float* p, __mmask16 valid) { return _mm512_maskz_loadu_ps(valid, p); }
TP_TARGET_AVX512 inline __m512 load16(const bfloat16* p, __mmask16 valid) {
  const __m512i words = _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_maskz_loadu_epi16(valid, p));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, words, 16));  // a bfloat16 is a float32's top half
}

// The elements of `valid` of v to p, bfloat16 rounded as bfloat16's constructor rounds (core/bfloat16.h):
// to nearest, ties to even, a NaN kept quiet.
TP_TARGET_AVX512 inline void store16(float* p, __mmask16 valid, __m512 v) { _mm512_mask_storeu_ps(p, valid, v); }
TP_TARGET_AVX512 inline void store16(bfloat16* p, __mmask16 valid, __m512 v) {
  const __m512i word = _mm512_castps_si512(v), one = _mm512_set1_epi32(1);
  const __m512i odd = _mm512_maskz_and_epi32(0xFFFF, _mm512_maskz_srli_epi32(0xFFFF, word, 16), one);
  const __m512i rounded = _mm512_maskz_srli_epi32(
      0xFFFF, _mm512_maskz_add_epi32(0xFFFF, word, _mm512_maskz_add_epi32(0xFFFF, odd, _mm512_set1_epi32(0x7FFF))),
      16);
  const __m512i quiet = _mm512_maskz_or_epi32(0xFFFF, _mm512_maskz_srli_epi32(0xFFFF, word, 16),
                                               _mm512_set1_epi32(0x40));
  const __m512i bits = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), rounded, quiet);
  _mm256_mask_storeu_epi16(p, valid, _mm512_maskz_cvtepi32_epi16(0xFFFF, bits));
}

// mask_blocks for float32 and bfloat16 in AVX-512 intrinsics, with the same draws and values: GCC's
// vectors of the lanes above take each product as a 64 × 64-bit one and gather the draws lane by
// lane. Here the blocks' words are transposed in registers, and each pair of blocks' 16 draws widened
// to 32 bits; bfloat16 is scaled in float32 and rounded once, as compute_t says.
template <bool kRelu, class T>
TP_TARGET_AVX512 void mask_blocks_avx512_vector(const T* in, T* out, int64_t n, int64_t q0, int64_t q1,
                                                const DropMask& mask) {
  static_assert(kBlocks == 16, "one block per lane");
  const __m512i m0 = u32(0xD2511F53u), m1 = u32(0xCD9E8D57u), cut = u32(mask.cut);
  // Lane l runs block offset[l]: after the transposition below, the 256-bit halves of the words hold
  // blocks 0–1, 2–3, …, 14–15 in turn.
  const __m512i offset = _mm512_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
  const __m512 scale = _mm512_set1_ps(static_cast<float>(mask.scale)), zero = _mm512_setzero_ps();
  for (int64_t q = q0; q < q1; q += kBlocks) {
    // Counters first + q + offset: their low words, and their high words with the low words' carry.
    const uint64_t base = mask.first + static_cast<uint64_t>(q);
    __m512i c0 = _mm512_add_epi32(u32(base), offset);
    const __mmask16 carry = _mm512_cmplt_epu32_mask(c0, u32(base));
    __m512i c1 = _mm512_mask_add_epi32(u32(base >> 32), carry, u32(base >> 32), u32(1));
    __m512i c2 = _mm512_setzero_si512(), c3 = _mm512_setzero_si512();
    uint32_t k0 = static_cast<uint32_t>(mask.seed), k1 = static_cast<uint32_t>(mask.seed >> 32);
    for (int round = 0; round < 10; ++round) {  // philox4x32_10's rounds
      __m512i lo0, lo1;
      const __m512i hi0 = mul_hi_lo(c0, m0, &lo0), hi1 = mul_hi_lo(c2, m1, &lo1);
      c0 = _mm512_ternarylogic_epi32(hi1, c1, u32(k0), 0x96);  // a three-way xor
      c1 = lo1;
      c2 = _mm512_ternarylogic_epi32(hi0, c3, u32(k1), 0x96);
      c3 = lo0;
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    // A 4 × 4 transposition in each 128 bits: w[j] holds the four words of lanes j, 4 + j, 8 + j, 12 + j.
    const __m512i a = _mm512_maskz_unpacklo_epi32(0xFFFF, c0, c1), b = _mm512_maskz_unpackhi_epi32(0xFFFF, c0, c1);
    const __m512i c = _mm512_maskz_unpacklo_epi32(0xFFFF, c2, c3), d = _mm512_maskz_unpackhi_epi32(0xFFFF, c2, c3);
    const __m512i w[4] = {_mm512_maskz_unpacklo_epi64(kAll64, a, c), _mm512_maskz_unpackhi_epi64(kAll64, a, c),
                          _mm512_maskz_unpacklo_epi64(kAll64, b, d), _mm512_maskz_unpackhi_epi64(kAll64, b, d)};
    const int64_t first = 8 * q, count = std::min<int64_t>(8 * std::min(kBlocks, q1 - q), n - first);
    for (int64_t v = 0; v * 16 < count; ++v) {
      // Blocks 2v and 2v + 1: their 16 draws in uniform_bits16's order, the low then the high half of
      // each word, which is memory order.
      const __m256i pair = v < 4 ? _mm512_maskz_extracti64x4_epi64(0xF, w[v], 0)
                                 : _mm512_maskz_extracti64x4_epi64(0xF, w[v - 4], 1);
      const __mmask16 valid = count - v * 16 >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (count - v * 16)) - 1);
      const __m512 x = load16(in + first + v * 16, valid);
      __mmask16 keep = _mm512_cmpge_epu32_mask(_mm512_maskz_cvtepu16_epi32(0xFFFF, pair), cut);
      if (kRelu) keep &= _mm512_cmp_ps_mask(x, zero, _CMP_NLE_UQ);  // relu: x > 0 or NaN passes
      store16(out + first + v * 16, valid, _mm512_maskz_mul_ps(keep, x, scale));
    }
  }
}
#endif

// The mask kernel of the capability in use: float32 and bfloat16 take the widest, float64 the
// baseline's.
template <bool kRelu, class T>
auto mask_kernel() {
#if TP_CPU_DISPATCH
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16>) {
    switch (cpu_capability()) {
      case CpuCapability::Avx512: return mask_blocks_avx512_vector<kRelu, T>;
      case CpuCapability::Avx2: return mask_blocks_avx2<kRelu, T>;
      case CpuCapability::Baseline: break;
    }
  }
#endif
  return mask_blocks_baseline<kRelu, T>;
}

enum class Activation { None, Relu };

// out = a(in) ⊙ keep / (1 − p), a the identity or relu. Forward applies it to x, dropout's backward
// (a the identity) to dy: dropout is linear in x for a fixed mask. On a GPU, relu runs as its own
// kernel before the mask's.
Tensor apply_mask(const Tensor& in, const DropMask& mask, Activation activation = Activation::None) {
  const bool relu_first = activation == Activation::Relu && in.device().is_cuda();
  const Tensor src = contiguous(relu_first ? relu(in.detach()) : in.detach());
  Tensor out = empty(in.shape(), in.options());
  if (on_cuda("dropout", in, [&] { cuda::dropout_mask(src, out, mask.first, mask.seed, mask.cut, mask.scale); }))
    return out;
  const int64_t n = in.numel();
  visit_floating_or_bfloat16(in.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const auto kernel = activation == Activation::Relu ? mask_kernel<true, T>() : mask_kernel<false, T>();
    const T* a = src.data<T>();
    T* b = out.data<T>();
    // Each task takes kBlocks Philox blocks: 8 · kBlocks elements.
    const int64_t blocks = (n + 7) / 8, tasks = (blocks + kBlocks - 1) / kBlocks;
#pragma omp parallel for schedule(static) if (n > kParallelWork)
    for (int64_t t = 0; t < tasks; ++t) kernel(a, b, n, t * kBlocks, std::min(blocks, (t + 1) * kBlocks), mask);
  });
  return out;
}

void check_arguments(const char* op, const Tensor& x, double p) {
  check_floating(op, x);
  TP_CHECK(p >= 0 && p < 1, op, "the drop probability p must lie in [0, 1), got ", p, " (for a tensor of shape ",
           to_string(x.shape()), ")");
}

// dx = dy · scale where y > 0, else 0: y > 0 where the element was kept and x > 0 (a NaN x gives a NaN
// y, which is not > 0, as in relu's backward). On a GPU, dropout's backward kernel then relu's.
Tensor relu_dropout_backward(const Tensor& dy_in, const Tensor& y, const DropMask& mask) {
  if (y.device().is_cuda()) {
    const Tensor zero = zeros({}, y.options());
    return where(gt(y, zero), apply_mask(dy_in, mask), zero);
  }
  const Tensor dy = contiguous(dy_in);
  Tensor dx = empty(y.shape(), y.options());  // y is relu_dropout's own output: contiguous
  const int64_t n = y.numel();
  visit_floating_or_bfloat16(y.dtype(), "relu_dropout", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;
    const C scale = static_cast<C>(mask.scale);
    const T* d = dy.data<T>();
    const T* v = y.data<T>();
    T* out = dx.data<T>();
#pragma omp parallel for schedule(static) if (n > kParallelWork)
    for (int64_t i = 0; i < n; ++i) {
      const T g = T(C(d[i]) * scale);  // before the test, so that the loop is a select, not a branch
      out[i] = v[i] > T(0) ? g : T(0);
    }
  });
  return dx;
}

}  // namespace

DropoutDraw reserve_dropout(Generator& gen, int64_t n, double p) {
  return {gen.reserve((static_cast<uint64_t>(n) + 7) / 8), gen.seed(), p};
}

template <class T>
void apply_dropout(const DropoutDraw& draw, const T* in, T* out, int64_t begin, int64_t end) {
  // A precondition, not a check: the callers run inside OpenMP regions, where a throw would end the
  // program; their ranges start at chunks of rows that are multiples of 8 (ops/norm.cpp asserts it).
  assert(begin % 8 == 0 && begin <= end && "elements that do not start a Philox block");
  // The draw of the elements from `begin` on: their blocks' counters start begin / 8 further.
  const DropMask mask(draw.first + static_cast<uint64_t>(begin / 8), draw.seed, draw.p);
  mask_kernel<false, T>()(in, out, end - begin, 0, (end - begin + 7) / 8, mask);
}
template void apply_dropout<float>(const DropoutDraw&, const float*, float*, int64_t, int64_t);
template void apply_dropout<double>(const DropoutDraw&, const double*, double*, int64_t, int64_t);

Tensor dropout(const Tensor& x, double p, Generator& gen, Mode mode) {
  check_arguments("dropout", x, p);
  if (mode == Mode::Eval) return x;
  const DropoutDraw draw = reserve_dropout(gen, x.numel(), p);
  const DropMask mask(draw.first, draw.seed, p);
  // p = 0 keeps every element, scaled by 1: x itself (the draws are still reserved, so that the
  // generator's later draws do not depend on p). Computing that mask was a tenth of a training step.
  if (p == 0) return x;
  Tensor y = apply_mask(x, mask);
  // dx = dy ⊙ keep / (1 − p)   (the same mask, regenerated from its counters)
  record("dropout", {x}, {y}, [mask](const std::vector<Tensor>& dy, Gradients& g) {
    g.accumulate(0, apply_mask(dy[0], mask));
  });
  return y;
}

Tensor relu_dropout(const Tensor& x, double p, Generator& gen, Mode mode) {
  check_arguments("relu_dropout", x, p);
  if (mode == Mode::Eval) return relu(x);
  const DropoutDraw draw = reserve_dropout(gen, x.numel(), p);
  const DropMask mask(draw.first, draw.seed, p);
  if (p == 0) return relu(x);
  Tensor y = apply_mask(x, mask, Activation::Relu);
  // The backward reads y alone (no draws); the layer after it usually holds y already.
  record("relu_dropout", {x}, {y}, [mask, ys = Saved(y)](const std::vector<Tensor>& dy, Gradients& g) {
    g.accumulate(0, relu_dropout_backward(dy[0], ys.get(), mask));
  });
  return y;
}

}  // namespace tapestry
