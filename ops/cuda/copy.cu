// CUDA kernels of fill_ and copy_: the copy side of the shape ops (contiguous, clone, to(dtype),
// concat, stack, pad all write through copy_) and of creation (full, zeros, ones).
#include "core/dispatch.h"
#include "ops/cuda/elementwise.h"
#include "ops/cuda/map.cuh"

namespace tapestry::cuda {

namespace {

template <class T>
struct Constant {
  T value;
  __device__ T operator()() const { return value; }
};

// static_cast, as the CPU's copy_ converts (float → bool is x != 0, float → int truncates).
template <class Out>
struct Convert {
  template <class In> __device__ Out operator()(In x) const { return static_cast<Out>(x); }
};

}  // namespace

void fill_(const Tensor& self, double value) {
  visit_all(self.dtype(), [&](auto tag) {
    using T = decltype(tag);
    gpu_map<T>("fill_", self, Constant<T>{static_cast<T>(value)});
  });
}

void copy_(const Tensor& self, const Tensor& src) {
  if (self.dtype() == src.dtype() && self.shape() == src.shape() && self.is_contiguous() &&
      src.is_contiguous()) {
    if (self.numel() == 0) return;
    CudaContext& ctx = active_context(self.device());
    TP_CUDA_CHECK(cudaMemcpyAsync(self.raw_data(), src.raw_data(),
                                  static_cast<size_t>(self.numel()) * element_size(self.dtype()),
                                  cudaMemcpyDeviceToDevice, ctx.stream()));
    return;
  }
  visit_all(self.dtype(), [&](auto out_tag) {
    using Out = decltype(out_tag);
    visit_all(src.dtype(), [&](auto in_tag) {
      using In = decltype(in_tag);
      gpu_map<Out, In>("copy_", self, Convert<Out>{}, src);
    });
  });
}

}  // namespace tapestry::cuda
