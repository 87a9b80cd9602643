// The CUDA side of core/device.h: availability and the per-GPU Context. Compiled only when the
// build has CUDA (TAPESTRY_HAS_CUDA); plain C++ against the CUDA runtime API.
//
// The allocator here takes memory straight from cudaMalloc. The size-binned caching allocator
// (DESIGN §2, "Memory") replaces it with the CUDA backend.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "core/device.h"
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
      p.reason = std::string("cudaGetDeviceCount: ") + cudaGetErrorString(status);
      cudaGetLastError();  // clear the sticky error so later calls are not confused by it
    } else if (p.count == 0) {
      p.reason = "no CUDA device is present";
    }
    return p;
  }();
  return result;
}
}  // namespace

bool is_available() { return probe().count > 0; }
int device_count() { return probe().count; }
std::string unavailable_reason() { return probe().reason; }

}  // namespace cuda

namespace {

void check_cuda(cudaError_t status, const char* what, const char* file, int line) {
  if (status != cudaSuccess) {
    fail("cuda", what, " failed at ", file, ":", line, ": ", cudaGetErrorString(status));
  }
}
#define TP_CUDA_CHECK(call) check_cuda((call), #call, __FILE__, __LINE__)

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int index) : index_(index) {}
  void* allocate(std::size_t nbytes) override {
    TP_CUDA_CHECK(cudaSetDevice(index_));
    void* ptr = nullptr;
    const cudaError_t status = cudaMalloc(&ptr, std::max<std::size_t>(nbytes, 1));
    if (status != cudaSuccess) {
      cudaGetLastError();
      fail("allocate", "cudaMalloc of ", nbytes, " bytes on cuda:", index_, " failed (",
           cudaGetErrorString(status), "); ", in_use_.load(), " bytes in use");
    }
    const int64_t now = in_use_ += static_cast<int64_t>(nbytes);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    ++allocations_;
    return ptr;
  }
  void deallocate(void* ptr, std::size_t nbytes) override {
    cudaSetDevice(index_);
    cudaFree(ptr);  // never throws from a destructor path
    in_use_ -= static_cast<int64_t>(nbytes);
  }
  MemoryStats stats() const override {
    return {in_use_.load(), peak_.load(), in_use_.load(), allocations_.load()};
  }
  void reset_peak() override { peak_ = in_use_.load(); }

 private:
  int index_;
  std::atomic<int64_t> in_use_{0}, peak_{0}, allocations_{0};
};

class CudaContext final : public Context {
 public:
  explicit CudaContext(int index) : index_(index), allocator_(index) {}
  Device device() const override { return Device::cuda(index_); }
  Allocator& allocator() override { return allocator_; }
  void synchronize() override {
    TP_CUDA_CHECK(cudaSetDevice(index_));
    TP_CUDA_CHECK(cudaDeviceSynchronize());
  }

 private:
  int index_;
  CudaAllocator allocator_;
};

}  // namespace

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t nbytes) {
  if (nbytes == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, nbytes);
    return;
  }
  if (dst_device.is_cuda()) context(dst_device);  // validates the device
  if (src_device.is_cuda()) context(src_device);
  TP_CUDA_CHECK(cudaMemcpy(dst, src, nbytes, cudaMemcpyDefault));
}

Context& cuda_context(int index) {
  if (!cuda::is_available()) fail("cuda", "cannot use device cuda:", index, ": ", cuda::unavailable_reason());
  TP_CHECK(index >= 0 && index < cuda::device_count(), "cuda", "device cuda:", index,
           " does not exist (", cuda::device_count(), " present)");
  static std::mutex mutex;
  static std::vector<std::unique_ptr<CudaContext>> contexts(cuda::device_count());
  std::lock_guard<std::mutex> lock(mutex);
  if (!contexts[index]) contexts[index] = std::make_unique<CudaContext>(index);
  return *contexts[index];
}

}  // namespace tapestry
