// CUDA kernels of the embedding lookup and its index-add.
//
// The lookup is a gather, one thread per output element (grid-stride).
//
// The index-add must sum repeated indices, and must do so deterministically (no float atomics,
// whose order changes the rounding from run to run). It sorts (index, position) pairs with CUB's
// radix sort, which is stable: positions that share an index come out adjacent and in increasing
// order. The first position of each run of equal indices owns that table row; block (run, column
// tile) has one thread per column that adds the run's dy rows into the row, one after another in
// position order, in the table's dtype. That is exactly the sequence of additions the CPU performs
// (ops/embedding.cpp walks positions in order for each column), so the gradient equals the CPU's
// bit for bit, and no two threads ever write the same element. Costs: one sort of N pairs over the
// bits that V needs; a run is summed sequentially, so an index repeated m times costs m dependent
// additions per column (as on the CPU).
#include <cub/device/device_radix_sort.cuh>

#include "core/creation.h"
#include "core/dispatch.h"
#include "ops/cuda/creation.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/embedding.h"
#include "ops/cuda/launch.cuh"

namespace tapestry::cuda {

namespace {

constexpr int64_t kMaxGridY = 65535;

template <class T, class I>
__global__ void embedding_forward_kernel(const T* table, const I* indices, T* out, int64_t N, int64_t D) {
  TP_GRID_STRIDE_LOOP(i, N * D) {
    const int64_t n = i / D, c = i % D;
    out[i] = table[static_cast<int64_t>(indices[n]) * D + c];
  }
}

// keys (N): the indices sorted; positions (N): where each came from, increasing within equal keys.
// Block x walks sorted positions (grid-stride); a block at the start of a run adds the run into its
// row, its threads (and the y blocks) covering the columns.
template <class T>
__global__ void embedding_backward_kernel(const int64_t* keys, const int64_t* positions, const T* dy, int64_t N,
                                          int64_t D, int64_t padding_idx, T* dtable) {
  for (int64_t i = blockIdx.x; i < N; i += gridDim.x) {
    const int64_t row = keys[i];
    if ((i > 0 && keys[i - 1] == row) || row == padding_idx) continue;  // not a run's first, or no gradient
    for (int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x; c < D;
         c += static_cast<int64_t>(gridDim.y) * blockDim.x) {
      T acc = dtable[row * D + c];
      for (int64_t j = i; j < N && keys[j] == row; ++j) acc += dy[positions[j] * D + c];
      dtable[row * D + c] = acc;
    }
  }
}

// Bits that hold every value in [0, V): radix sort needs no more passes than that.
int key_bits(int64_t V) {
  int bits = 1;
  while (bits < 63 && (int64_t{1} << bits) < V) ++bits;
  return bits;
}

}  // namespace

void embedding_forward(const Tensor& table, const Tensor& indices, const Tensor& out) {
  visit_floating_or_bfloat16(table.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    visit_index(indices.dtype(), "embedding", [&](auto index_tag) {
      using I = decltype(index_tag);
      const int64_t N = indices.numel(), D = table.shape()[1];
      if (N * D == 0) return;
      CudaContext& ctx = active_context(table.device());
      embedding_forward_kernel<T, I><<<blocks_for(N * D), kThreads, 0, ctx.stream()>>>(
          static_cast<const T*>(table.raw_data()), static_cast<const I*>(indices.raw_data()),
          static_cast<T*>(out.raw_data()), N, D);
      TP_CUDA_CHECK_LAUNCH();
    });
  });
}

void embedding_backward(const Tensor& dy, const Tensor& indices, int64_t padding_idx, const Tensor& dtable) {
  visit_floating(dtable.dtype(), "embedding", [&](auto tag) {
    using T = decltype(tag);
    const int64_t N = indices.numel(), V = dtable.shape()[0], D = dtable.shape()[1];
    if (N == 0 || D == 0) return;
    CudaContext& ctx = active_context(dtable.device());
    const Device device = dtable.device();
    // Keys as int64 (one sort instantiation for both index dtypes); values: positions 0 … N − 1.
    Tensor keys_in = indices;
    if (indices.dtype() != DType::Int64) {
      keys_in = empty(indices.shape(), {DType::Int64, device});
      cuda::copy_(keys_in, indices);
    }
    const Tensor positions_in = empty({N}, {DType::Int64, device});
    cuda::arange(positions_in, 0.0, 1.0);
    const Tensor keys = empty({N}, {DType::Int64, device}), positions = empty({N}, {DType::Int64, device});
    const int64_t* k_in = keys_in.data<int64_t>();
    const int64_t* p_in = positions_in.data<int64_t>();
    int64_t* k_out = keys.data<int64_t>();
    int64_t* p_out = positions.data<int64_t>();
    // Every key lies in [0, V) (checked before the forward), so sorting its low bits sorts it.
    const int end_bit = key_bits(V);
    size_t temp_bytes = 0;
    TP_CUB_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, k_in, k_out, p_in, p_out, N, 0, end_bit,
                                                 ctx.stream()));
    {
      ScratchBuffer temp(ctx.allocator(), temp_bytes);
      TP_CUB_CHECK(cub::DeviceRadixSort::SortPairs(temp.data(), temp_bytes, k_in, k_out, p_in, p_out, N, 0,
                                                   end_bit, ctx.stream()));
    }
    const int threads = pow2_threads(D, 32, kThreads);
    const dim3 grid(static_cast<unsigned>(std::min(N, kMaxBlocks)),
                    static_cast<unsigned>(std::min((D + threads - 1) / threads, kMaxGridY)));
    embedding_backward_kernel<T><<<grid, threads, 0, ctx.stream()>>>(
        k_out, p_out, static_cast<const T*>(dy.raw_data()), N, D, padding_idx, static_cast<T*>(dtable.raw_data()));
    TP_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace tapestry::cuda
