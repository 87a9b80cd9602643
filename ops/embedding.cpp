// Embedding. Shapes: table (V, D); indices (N) once flattened; out, dy (N, D) once flattened.
#include "ops/embedding.h"

#include <algorithm>

#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/embedding.h"
#include "ops/cuda/index_scan.h"
#include "ops/dispatch.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

constexpr int64_t kParallelWork = 32768;  // elements below which a loop stays on one thread
constexpr int64_t kColumnBlock = 64;      // columns per task in the index-add

// ---- kernels (the CPU loops; a tensor on a GPU takes the CUDA launchers of ops/cuda/embedding.h) ----

struct BadIndex {
  int64_t position = -1;  // row-major; −1 when every index is in range
  int64_t value = 0;
};

// The first index outside [0, V).
BadIndex first_out_of_range(const Tensor& indices, int64_t V) {
  const Tensor idx = contiguous(indices);
  cuda::IndexScan scan;  // on a GPU the indices are scanned in place; only the verdict comes back
  if (on_cuda("embedding", indices, [&] { scan = cuda::scan_indices("embedding", idx, V); }))
    return BadIndex{scan.bad_position, scan.bad_value};
  return visit_index(idx.dtype(), "embedding", [&](auto tag) {
    using I = decltype(tag);
    const I* p = idx.data<I>();
    for (int64_t n = 0; n < idx.numel(); ++n)
      if (p[n] < 0 || static_cast<int64_t>(p[n]) >= V) return BadIndex{n, static_cast<int64_t>(p[n])};
    return BadIndex{};
  });
}

// out (N, D) = table[indices]
Tensor embedding_forward(const Tensor& table, const Tensor& indices) {
  const Tensor tab = contiguous(table.detach());
  const Tensor idx = contiguous(indices);
  const int64_t N = idx.numel(), D = table.shape()[1];
  Shape shape = indices.shape();
  shape.push_back(D);
  Tensor out = empty(shape, table.options());
  if (on_cuda("embedding", table, [&] { cuda::embedding_forward(tab, idx, out); })) return out;
  visit_floating_or_bfloat16(table.dtype(), "embedding", [&](auto tag) {  // rows copied bit for bit
    using T = decltype(tag);
    visit_index(idx.dtype(), "embedding", [&](auto index_tag) {
      using I = decltype(index_tag);
      const I* ip = idx.data<I>();
      const T* src = tab.data<T>();
      T* dst = out.data<T>();
#pragma omp parallel for schedule(static) if (N > 1 && N * D > kParallelWork)
      for (int64_t n = 0; n < N; ++n) std::copy_n(src + static_cast<int64_t>(ip[n]) * D, D, dst + n * D);
    });
  });
  return out;
}

// dtable[indices[n]] += dy[n] for n with indices[n] ≠ padding_idx, into `dtable` in place. Tasks own
// column blocks, so repeated indices need no atomics and every sum runs in index order.
void embedding_backward(const Tensor& dy_in, const Tensor& indices, int64_t padding_idx, const Tensor& dtable) {
  const auto in_float32 = [&](const Tensor& dtable32, const Tensor& dy32) {
    embedding_backward(dy32, indices, padding_idx, dtable32);
  };
  if (add_in_float32(dtable, dy_in, in_float32)) return;  // a bfloat16 table (ops/autocast.h)
  const Tensor dy = contiguous(dy_in);
  TP_CHECK(dtable.is_contiguous(), "embedding", "internal error: the gradient buffer is not contiguous");
  if (!on_cuda("embedding", dy_in, [&] { cuda::embedding_backward(dy, indices, padding_idx, dtable); })) {
    const int64_t N = indices.numel(), D = dtable.shape()[1];
    const int64_t blocks = (D + kColumnBlock - 1) / kColumnBlock;
    visit_floating(dtable.dtype(), "embedding", [&](auto tag) {
      using T = decltype(tag);
      visit_index(indices.dtype(), "embedding", [&](auto index_tag) {
        using I = decltype(index_tag);
        const I* ip = indices.data<I>();
        const T* g = dy.data<T>();
        T* dst = dtable.data<T>();
#pragma omp parallel for schedule(static) if (blocks > 1 && N * D > kParallelWork)
        for (int64_t k = 0; k < blocks; ++k) {
          const int64_t c0 = k * kColumnBlock, c1 = std::min(D, c0 + kColumnBlock);
          for (int64_t n = 0; n < N; ++n) {
            const int64_t row = static_cast<int64_t>(ip[n]);
            if (row == padding_idx) continue;
            for (int64_t c = c0; c < c1; ++c) dst[row * D + c] += g[n * D + c];
          }
        }
      });
    });
  }
  dtable.storage().bump_version();
}

}  // namespace

Tensor embedding(const Tensor& table, const Tensor& indices, int64_t padding_idx) {
  check_floating("embedding", table);
  TP_CHECK(indices.defined(), "embedding", "got undefined indices");
  check_same_device("embedding", {&table, &indices});
  TP_CHECK(table.dim() == 2, "embedding", "the table must be 2-d (V, D), got shape ", to_string(table.shape()));
  TP_CHECK(is_integer(indices.dtype()), "embedding", "indices must be int32 or int64, got ", indices.dtype(),
           " of shape ", to_string(indices.shape()));
  const int64_t V = table.shape()[0];
  TP_CHECK(padding_idx >= -1 && padding_idx < V, "embedding", "padding_idx must be -1 (none) or in [0, ", V,
           "), got ", padding_idx);
  const BadIndex bad = first_out_of_range(indices, V);
  if (bad.position >= 0) {
    fail("embedding", "index ", bad.value, " at position ", index_string(bad.position, indices.shape()),
         " of the indices (shape ", to_string(indices.shape()), ") is out of range for a table of ", V,
         " rows (shape ", to_string(table.shape()), ")");
  }
  Tensor out = embedding_forward(table, indices);
  // dtable[v] += Σ_{i : indices[i] = v ≠ padding_idx} dy[i]   (index-add; repeats sum)
  record("embedding", {table}, {out},
         [padding_idx, is = Saved(contiguous(indices))](const std::vector<Tensor>& dy, Gradients& g) {
           embedding_backward(dy[0], is.get(), padding_idx, g.buffer(0));
         });
  return out;
}

}  // namespace tapestry
