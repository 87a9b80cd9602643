// Check macros for the status codes of the CUDA runtime, cuBLAS, cuRAND and CUB. Each throws
// tapestry::Error naming the call, the file and line, and the library's own name and message:
//
//   cuda: cudaMemcpyAsync(...) failed at ops/cuda/copy.cu:88: an illegal memory access was
//   encountered (cudaErrorIllegalAddress)
//
// Usable from .cu and .cpp files of a build with CUDA (TAPESTRY_HAS_CUDA). After every kernel
// launch, TP_CUDA_CHECK_LAUNCH() reports a bad launch configuration at the launch site; a fault
// inside a kernel surfaces at the next synchronising call (a copy to the host), checked the same way.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <curand.h>

namespace tapestry::cuda::detail {
[[noreturn]] void fail_cuda(const char* call, cudaError_t status, const char* file, int line);
[[noreturn]] void fail_cublas(const char* call, cublasStatus_t status, const char* file, int line);
[[noreturn]] void fail_curand(const char* call, curandStatus_t status, const char* file, int line);
[[noreturn]] void fail_cub(const char* call, cudaError_t status, const char* file, int line);
}  // namespace tapestry::cuda::detail

#define TP_CUDA_CHECK(call)                                                             \
  do {                                                                                  \
    const cudaError_t tp_status_ = (call);                                              \
    if (tp_status_ != cudaSuccess)                                                      \
      ::tapestry::cuda::detail::fail_cuda(#call, tp_status_, __FILE__, __LINE__);       \
  } while (0)

// After a kernel launch: a launch that could not start (bad configuration, no kernel image for
// this GPU) is reported here, where it was made.
#define TP_CUDA_CHECK_LAUNCH() TP_CUDA_CHECK(cudaGetLastError())

#define TP_CUBLAS_CHECK(call)                                                           \
  do {                                                                                  \
    const cublasStatus_t tp_status_ = (call);                                           \
    if (tp_status_ != CUBLAS_STATUS_SUCCESS)                                            \
      ::tapestry::cuda::detail::fail_cublas(#call, tp_status_, __FILE__, __LINE__);     \
  } while (0)

#define TP_CURAND_CHECK(call)                                                           \
  do {                                                                                  \
    const curandStatus_t tp_status_ = (call);                                           \
    if (tp_status_ != CURAND_STATUS_SUCCESS)                                            \
      ::tapestry::cuda::detail::fail_curand(#call, tp_status_, __FILE__, __LINE__);     \
  } while (0)

// CUB's device-wide algorithms return cudaError_t; this names CUB in the message.
#define TP_CUB_CHECK(call)                                                              \
  do {                                                                                  \
    const cudaError_t tp_status_ = (call);                                              \
    if (tp_status_ != cudaSuccess)                                                      \
      ::tapestry::cuda::detail::fail_cub(#call, tp_status_, __FILE__, __LINE__);        \
  } while (0)
