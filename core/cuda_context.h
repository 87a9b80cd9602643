// Internal: the per-GPU Context of a build with CUDA, for the CUDA launchers (ops/cuda/*.cu) and
// core/cuda_context.cpp. Public code uses core/cuda.h, which has no CUDA types.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "core/caching_allocator.h"
#include "core/cuda.h"
#include "core/device.h"

namespace tapestry::cuda {

// What one GPU owns. Created on first use of the device and never destroyed (see cuda_context()).
class CudaContext final : public Context {
 public:
  explicit CudaContext(int index);
  CudaContext(const CudaContext&) = delete;
  CudaContext& operator=(const CudaContext&) = delete;

  Device device() const override { return Device::cuda(index_); }
  Allocator& allocator() override { return *allocator_; }
  // Waits for this context's stream (all of Tapestry's work on this GPU is queued there).
  void synchronize() override;

  int index() const { return index_; }
  // The non-default stream every kernel, library call and copy of this GPU is queued on.
  cudaStream_t stream() const { return stream_; }
  // Makes this GPU the calling thread's current device (kernels launch on the current device).
  void activate() const;
  // The cuBLAS handle, bound to stream() with a workspace from allocator(); created on first use
  // (cuBLAS's start-up is slow and many programs never multiply matrices). A handle must not be
  // used by two threads at once: hold cublas_mutex() across the calls that use it.
  cublasHandle_t cublas();
  std::mutex& cublas_mutex() { return cublas_mutex_; }
  // Number of multiprocessors, for sizing grids.
  int multiprocessors() const { return multiprocessors_; }

  void set_float32_matmul(Float32Matmul mode) { float32_matmul_ = mode; }
  Float32Matmul float32_matmul() const { return float32_matmul_; }

 private:
  int index_;
  int multiprocessors_ = 1;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<CachingAllocator> allocator_;
  std::once_flag cublas_once_;
  std::mutex cublas_mutex_;
  cublasHandle_t cublas_ = nullptr;
  std::unique_ptr<ScratchBuffer> cublas_workspace_;
  std::atomic<Float32Matmul> float32_matmul_{Float32Matmul::Full};
};

// The context of cuda:`device.index`, made the calling thread's current device. Throws Error when
// the device is not usable.
CudaContext& active_context(Device device);

}  // namespace tapestry::cuda
