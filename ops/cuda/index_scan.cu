// The device-side check of integer indices (ops/cuda/index_scan.h).
//
// Why on the device: copying the indices to the host to scan them there would move the whole index
// tensor over the bus on every call (an embedding's (B, S) tokens, every step). The kernel reads them
// in place and only two counters come back. Either way the host must wait for the answer before it
// throws or goes on, so the wait itself is the same.
//
// The first offending position is found as max(n − position) (so zero-filled memory means "none",
// and one cudaMemsetAsync initialises both counters); the valid count is a sum. Both are combined
// across blocks with integer atomics, which are exact: the result is the same whatever order the
// blocks run in.
#include "core/dispatch.h"
#include "ops/cuda/block_reduce.cuh"
#include "ops/cuda/index_scan.h"
#include "ops/cuda/launch.cuh"

namespace tapestry::cuda {

namespace {

struct MaxU64 {
  __device__ unsigned long long combine(unsigned long long a, unsigned long long b) const { return b > a ? b : a; }
};
struct SumU64 {
  __device__ unsigned long long combine(unsigned long long a, unsigned long long b) const { return a + b; }
};

// counters[0] = max over invalid positions i of n − i (0: none), counters[1] = number of valid indices.
template <class I>
__global__ void scan_indices_kernel(const I* indices, int64_t n, int64_t limit, bool has_skip, int64_t skip,
                                    unsigned long long* counters) {
  __shared__ unsigned long long buf[kThreads];
  unsigned long long first = 0, valid = 0;
  TP_GRID_STRIDE_LOOP(i, n) {
    const int64_t v = static_cast<int64_t>(indices[i]);
    if (has_skip && v == skip) continue;
    if (v < 0 || v >= limit) {
      const unsigned long long key = static_cast<unsigned long long>(n - i);
      first = key > first ? key : first;
    } else {
      ++valid;
    }
  }
  first = block_reduce(buf, first, MaxU64{});
  valid = block_reduce(buf, valid, SumU64{});
  if (threadIdx.x == 0) {
    if (first) atomicMax(&counters[0], first);
    if (valid) atomicAdd(&counters[1], valid);
  }
}

}  // namespace

IndexScan scan_indices(const char* op, const Tensor& indices, int64_t limit, std::optional<int64_t> skip) {
  return visit_index(indices.dtype(), op, [&](auto tag) {
    using I = decltype(tag);
    const int64_t n = indices.numel();
    IndexScan scan;
    if (n == 0) return scan;
    CudaContext& ctx = active_context(indices.device());
    ScratchBuffer counters(ctx.allocator(), 2 * sizeof(unsigned long long));
    auto* c = static_cast<unsigned long long*>(counters.data());
    TP_CUDA_CHECK(cudaMemsetAsync(c, 0, 2 * sizeof(unsigned long long), ctx.stream()));
    const I* p = static_cast<const I*>(indices.raw_data());
    scan_indices_kernel<I><<<blocks_for(n), kThreads, 0, ctx.stream()>>>(p, n, limit, skip.has_value(),
                                                                          skip.value_or(0), c);
    TP_CUDA_CHECK_LAUNCH();
    unsigned long long host[2] = {0, 0};
    copy_bytes(host, Device::cpu(), c, indices.device(), sizeof(host));  // waits for the kernel
    scan.valid = static_cast<int64_t>(host[1]);
    if (host[0] != 0) {
      scan.bad_position = n - static_cast<int64_t>(host[0]);
      I value{};
      copy_bytes(&value, Device::cpu(), p + scan.bad_position, indices.device(), sizeof(I));
      scan.bad_value = static_cast<int64_t>(value);
      scan.valid = 0;  // as the CPU's scan reports it: nothing is computed
    }
    return scan;
  });
}

}  // namespace tapestry::cuda
