#include "ops/dropout.h"

#include <cmath>

#include "ops/common.h"
#include "ops/cuda/dropout.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

constexpr int64_t kParallelWork = 32768;  // elements below which a loop stays on one thread

// The draw that decides which elements survive: element i (row-major) takes word i % 4 of the
// Philox block of counter first + i / 4 under `seed`, so a draw of n elements reserves ⌈n / 4⌉
// counters. One block (ten rounds) serves four elements: on a CPU the mask is a quarter of the
// cost it would be with a block per element.
struct DropMask {
  uint64_t first = 0, seed = 0;
  double p = 0;
};

// ---- kernels (the CPU loops; a tensor on a GPU takes the CUDA launcher of ops/cuda/dropout.h) ----

// out = in ⊙ keep / (1 − p), element i kept iff uniform_float(word i % 4 of block first + i / 4) ≥ p.
// Forward applies it to x, backward to dy: dropout is linear in x for a fixed mask.
Tensor apply_mask(const Tensor& in, const DropMask& mask) {
  const Tensor src = contiguous(in.detach());
  Tensor out = empty(in.shape(), in.options());
#ifdef TAPESTRY_HAS_CUDA
  if (in.device().is_cuda()) {
    cuda::dropout_mask(src, out, mask.first, mask.seed, mask.p, 1.0 / (1.0 - mask.p));
    return out;
  }
#endif
  check_cpu("dropout", in);
  const int64_t n = in.numel();
  visit_floating(in.dtype(), "dropout", [&](auto tag) {
    using T = decltype(tag);
    const T* a = src.data<T>();
    T* b = out.data<T>();
    const T scale = static_cast<T>(1.0 / (1.0 - mask.p));
    const int64_t blocks = (n + 3) / 4;
#pragma omp parallel for schedule(static) if (n > kParallelWork)
    for (int64_t q = 0; q < blocks; ++q) {
      const PhiloxBlock block = philox_block(mask.first + static_cast<uint64_t>(q), mask.seed);
      for (int64_t w = 0, i = 4 * q; w < 4 && i < n; ++w, ++i) {
        b[i] = uniform_float(block.w[w]) >= mask.p ? a[i] * scale : T(0);
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
  const DropMask mask{gen.reserve((static_cast<uint64_t>(x.numel()) + 3) / 4), gen.seed(), p};
  Tensor y = apply_mask(x, mask);
  // dx = dy ⊙ keep / (1 − p)   (the same mask, regenerated from its counters)
  record("dropout", {x}, {y}, [mask](const std::vector<Tensor>& dy, Gradients& g) {
    g.accumulate(0, apply_mask(dy[0], mask));
  });
  return y;
}

}  // namespace tapestry
