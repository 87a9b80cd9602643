#include "ops/dropout.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "core/cpu_capability.h"
#include "ops/common.h"
#include "ops/cuda/dropout.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/elementwise_math.h"
#include "ops/shape.h"

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
// arrays, so that the compiler runs the blocks side by side in vector registers (16 lanes of AVX-512).
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
template <bool kRelu, class T>
TP_TARGET_AVX512 void mask_blocks_avx512(const T* in, T* out, int64_t n, int64_t q0, int64_t q1,
                                         const DropMask& mask) {
  mask_blocks<kRelu>(in, out, n, q0, q1, mask);
}
#endif

// The mask kernel of the capability in use: float32 and bfloat16 take the widest, float64 the
// baseline's.
template <bool kRelu, class T>
auto mask_kernel() {
#if TP_CPU_DISPATCH
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, bfloat16>) {
    switch (cpu_capability()) {
      case CpuCapability::Avx512: return mask_blocks_avx512<kRelu, T>;
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

Tensor dropout(const Tensor& x, double p, Generator& gen, Mode mode) {
  check_arguments("dropout", x, p);
  if (mode == Mode::Eval) return x;
  const DropMask mask(gen.reserve((static_cast<uint64_t>(x.numel()) + 7) / 8), gen.seed(), p);
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
  const DropMask mask(gen.reserve((static_cast<uint64_t>(x.numel()) + 7) / 8), gen.seed(), p);
  if (p == 0) return relu(x);
  Tensor y = apply_mask(x, mask, Activation::Relu);
  // The backward reads y alone (no draws); the layer after it usually holds y already.
  record("relu_dropout", {x}, {y}, [mask, ys = Saved(y)](const std::vector<Tensor>& dy, Gradients& g) {
    g.accumulate(0, relu_dropout_backward(dy[0], ys.get(), mask));
  });
  return y;
}

}  // namespace tapestry
