#include "ops/dropout.h"

#include <algorithm>
#include <cmath>

#include "ops/common.h"
#include "ops/cuda/dropout.h"
#include "ops/dispatch.h"
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

// out = in ⊙ keep / (1 − p). Forward applies it to x, backward to dy: dropout is linear in x for a
// fixed mask.
Tensor apply_mask(const Tensor& in, const DropMask& mask) {
  const Tensor src = contiguous(in.detach());
  Tensor out = empty(in.shape(), in.options());
  if (on_cuda("dropout", in, [&] { cuda::dropout_mask(src, out, mask.first, mask.seed, mask.cut, mask.scale); }))
    return out;
  const int64_t n = in.numel();
  visit_floating_or_bfloat16(in.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    using C = compute_t<T>;  // bfloat16 is scaled in float32 and rounded once
    const T* a = src.data<T>();
    T* b = out.data<T>();
    const C scale = static_cast<C>(mask.scale);
    const int64_t blocks = (n + 7) / 8;
#pragma omp parallel for schedule(static) if (n > kParallelWork)
    for (int64_t q = 0; q < blocks; ++q) {
      const PhiloxBlock block = philox_block(mask.first + static_cast<uint64_t>(q), mask.seed);
      for (int64_t j = 0, i = 8 * q; j < 8 && i < n; ++j, ++i) {
        b[i] = uniform_bits16(block, j) >= mask.cut ? T(C(a[i]) * scale) : T(0);
      }
    }
  });
  return out;
}

}  // namespace

Tensor dropout(const Tensor& x, double p, Generator& gen, Mode mode) {
  check_floating("dropout", x);
  TP_CHECK(p >= 0 && p < 1, "dropout", "the drop probability p must lie in [0, 1), got ", p,
           " (for a tensor of shape ", to_string(x.shape()), ")");
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

}  // namespace tapestry
