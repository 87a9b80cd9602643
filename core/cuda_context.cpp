// The CUDA side of core/device.h and core/cuda.h: availability, the per-GPU Context (stream, cuBLAS
// handle, caching allocator), copies between devices, and the status checks of core/cuda_check.h.
// Compiled only when the build has CUDA (TAPESTRY_HAS_CUDA); plain C++ against the CUDA runtime API.
#include "core/cuda_context.h"

#include <cuda_runtime.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/cuda_check.h"
#include "core/error.h"

namespace tapestry {

namespace cuda {

namespace {
struct Probe {
  int count = 0;
  std::string reason;
};

const Probe& probe() {
  static const Probe result = [] {
    Probe p;
    const cudaError_t status = cudaGetDeviceCount(&p.count);
    if (status != cudaSuccess) {
      p.count = 0;
      // On a machine without a GPU the driver is absent, and CUDA reports that as an old driver.
      const bool no_driver = status == cudaErrorInsufficientDriver || status == cudaErrorNoDevice;
      p.reason = no_driver ? std::string("no NVIDIA GPU with a usable driver on this machine (no GPU, no driver, or a "
                                         "driver older than this build's CUDA; cudaGetDeviceCount: ") +
                                 cudaGetErrorString(status) + ")"
                           : std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
      cudaGetLastError();  // clear the sticky error so later calls are not confused by it
    } else if (p.count == 0) {
      p.reason = "no CUDA device is present";
    }
    return p;
  }();
  return result;
}

const char* curand_status_name(curandStatus_t status) {
  switch (status) {
    case CURAND_STATUS_SUCCESS: return "CURAND_STATUS_SUCCESS";
    case CURAND_STATUS_VERSION_MISMATCH: return "CURAND_STATUS_VERSION_MISMATCH";
    case CURAND_STATUS_NOT_INITIALIZED: return "CURAND_STATUS_NOT_INITIALIZED";
    case CURAND_STATUS_ALLOCATION_FAILED: return "CURAND_STATUS_ALLOCATION_FAILED";
    case CURAND_STATUS_TYPE_ERROR: return "CURAND_STATUS_TYPE_ERROR";
    case CURAND_STATUS_OUT_OF_RANGE: return "CURAND_STATUS_OUT_OF_RANGE";
    case CURAND_STATUS_LENGTH_NOT_MULTIPLE: return "CURAND_STATUS_LENGTH_NOT_MULTIPLE";
    case CURAND_STATUS_DOUBLE_PRECISION_REQUIRED: return "CURAND_STATUS_DOUBLE_PRECISION_REQUIRED";
    case CURAND_STATUS_LAUNCH_FAILURE: return "CURAND_STATUS_LAUNCH_FAILURE";
    case CURAND_STATUS_PREEXISTING_FAILURE: return "CURAND_STATUS_PREEXISTING_FAILURE";
    case CURAND_STATUS_INITIALIZATION_FAILED: return "CURAND_STATUS_INITIALIZATION_FAILED";
    case CURAND_STATUS_ARCH_MISMATCH: return "CURAND_STATUS_ARCH_MISMATCH";
    case CURAND_STATUS_INTERNAL_ERROR: return "CURAND_STATUS_INTERNAL_ERROR";
  }
  return "unknown cuRAND status";
}
}  // namespace

bool is_available() { return probe().count > 0; }
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason; }

namespace detail {
void fail_cuda(const char* call, cudaError_t status, const char* file, int line) {
  fail("cuda", call, " failed at ", file, ":", line, ": ", cudaGetErrorString(status), " (",
       cudaGetErrorName(status), ")");
}
void fail_cublas(const char* call, cublasStatus_t status, const char* file, int line) {
  fail("cublas", call, " failed at ", file, ":", line, ": ", cublasGetStatusString(status), " (",
       cublasGetStatusName(status), ")");
}
void fail_curand(const char* call, curandStatus_t status, const char* file, int line) {
  fail("curand", call, " failed at ", file, ":", line, ": ", curand_status_name(status));
}
void fail_cub(const char* call, cudaError_t status, const char* file, int line) {
  fail("cub", call, " failed at ", file, ":", line, ": ", cudaGetErrorString(status), " (",
       cudaGetErrorName(status), ")");
}
}  // namespace detail

namespace {

// cudaMalloc / cudaFree under the caching allocator.
class CudaMemory final : public MemorySource {
 public:
  CudaMemory(int index, cudaStream_t stream) : index_(index), stream_(stream) {}
  void* allocate(std::size_t nbytes) override {
    TP_CUDA_CHECK(cudaSetDevice(index_));
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, nbytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky, but leave no error behind for the next check
      return nullptr;
    }
    TP_CUDA_CHECK(status);
    return ptr;
  }
  void release(void* ptr, std::size_t) override {
    cudaSetDevice(index_);
    cudaFree(ptr);  // errors ignored: this runs on destructor paths, and never throws
  }
  void synchronize() override {
    cudaSetDevice(index_);
    cudaStreamSynchronize(stream_);
  }
  std::string name() const override { return to_string(Device::cuda(index_)); }

 private:
  int index_;
  cudaStream_t stream_;
};

// cuBLAS's recommended workspace: 32 MiB on Hopper and later, 4 MiB before.
std::size_t cublas_workspace_bytes(int index) {
  int major = 0;
  TP_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
  return (major >= 9 ? std::size_t{32} : std::size_t{4}) << 20;
}

}  // namespace

CudaContext::CudaContext(int index) : index_(index) {
  activate();
  TP_CUDA_CHECK(cudaDeviceGetAttribute(&multiprocessors_, cudaDevAttrMultiProcessorCount, index_));
  // Non-blocking: the stream does not wait for the legacy default stream, which Tapestry never uses.
  TP_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  allocator_ = std::make_unique<CachingAllocator>(std::make_unique<CudaMemory>(index_, stream_));
}

void CudaContext::activate() const { TP_CUDA_CHECK(cudaSetDevice(index_)); }

void CudaContext::synchronize() {
  activate();
  TP_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

cublasHandle_t CudaContext::cublas() {
  std::call_once(cublas_once_, [this] {
    activate();
    cublasHandle_t handle = nullptr;
    TP_CUBLAS_CHECK(cublasCreate(&handle));
    // cublasSetStream resets the workspace to cuBLAS's own pool, so the workspace comes after it.
    TP_CUBLAS_CHECK(cublasSetStream(handle, stream_));
    auto workspace = std::make_unique<ScratchBuffer>(*allocator_, cublas_workspace_bytes(index_));
    TP_CUBLAS_CHECK(cublasSetWorkspace(handle, workspace->data(), workspace->size()));
    cublas_workspace_ = std::move(workspace);
    cublas_ = handle;
  });
  return cublas_;
}

CudaContext& active_context(Device device) {
  TP_CHECK(device.is_cuda(), "cuda", "internal error: ", device, " is not a CUDA device");
  CudaContext& ctx = static_cast<CudaContext&>(context(device));
  ctx.activate();
  return ctx;
}

void set_float32_matmul(Float32Matmul mode, int index) {
  active_context(Device::cuda(index)).set_float32_matmul(mode);
}
Float32Matmul float32_matmul(int index) { return active_context(Device::cuda(index)).float32_matmul(); }

}  // namespace cuda

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  // The copy is queued on the stream of a GPU involved (the destination's when both are), after the
  // work that produced src; a GPU source on another device is waited for first. Then the copy is
  // waited for, so the host can read dst, or reuse src, as soon as this returns.
  if (src_device.is_cuda() && dst_device.is_cuda() && src_device != dst_device) {
    context(src_device).synchronize();
  }
  cuda::CudaContext& ctx = cuda::active_context(dst_device.is_cuda() ? dst_device : src_device);
  TP_CUDA_CHECK(cudaMemcpyAsync(dst, src, nbytes, cudaMemcpyDefault, ctx.stream()));
  TP_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));
}

Context& cuda_context(int index) {
  if (!cuda::is_available()) fail("cuda", "cannot use device cuda:", index, ": ", cuda::unavailable_reason());
  TP_CHECK(index >= 0 && index < cuda::device_count(), "cuda", "device cuda:", index,
           " does not exist (", cuda::device_count(), " present)");
  // Never destroyed: tensors in static storage may outlive any static here, and the CUDA runtime may
  // already be shut down when static destructors run. The driver reclaims everything at exit.
  static std::mutex* const mutex = new std::mutex;
  static auto* const contexts = new std::vector<std::unique_ptr<cuda::CudaContext>>(cuda::device_count());
  std::lock_guard<std::mutex> lock(*mutex);
  auto& slot = (*contexts)[static_cast<std::size_t>(index)];
  if (!slot) slot = std::make_unique<cuda::CudaContext>(index);
  return *slot;
}

}  // namespace tapestry
