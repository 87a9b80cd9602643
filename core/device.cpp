#include "core/device.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "core/caching_allocator.h"
#include "core/cuda.h"
#include "core/error.h"

namespace tapestry {

Device Device::best() { return cuda::is_available() ? Device::cuda(0) : Device::cpu(); }

Device Device::parse(const std::string& text) {
  if (text == "auto") return best();
  if (text == "cpu") return cpu();
  if (text == "cuda") return cuda(0);
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 &&
      text.find_first_not_of("0123456789", 5) == std::string::npos && text.size() < 10) {
    return cuda(std::stoi(text.substr(5)));
  }
  fail("Device::parse", "expected auto, cpu, cuda or cuda:N, got '", text, "'");
}

std::string to_string(const Device& device) {
  return device.is_cpu() ? std::string("cpu") : "cuda:" + std::to_string(device.index);
}

namespace {

// Host memory from the C library, 64-byte aligned (a cache line, and a full AVX-512 vector).
class HostMemory final : public MemorySource {
 public:
  void* allocate(std::size_t nbytes) override {
    return std::aligned_alloc(64, (std::max<std::size_t>(nbytes, 1) + 63) / 64 * 64);
  }
  void release(void* ptr, std::size_t) override { std::free(ptr); }
  void synchronize() override {}
  std::string name() const override { return "cpu"; }
};

// The CPU caches freed blocks like a GPU does (core/caching_allocator.h). Without a cache every
// output above glibc's mmap threshold (at most 32 MiB) came fresh from mmap and went back on free,
// so each op paid a page fault per 4 KiB of its output: a third of the time of a full-attention
// layer at N = 2048 went to faulting and unmapping pages (docs/PERFORMANCE.md).
//
// Under AddressSanitizer nothing is cached and blocks are exactly as large as asked: the sanitizer
// must see every free (use after free) and every block's true end (overflows).
#ifdef __SANITIZE_ADDRESS__
constexpr Caching kHostCaching = Caching::Off;
#else
constexpr Caching kHostCaching = Caching::On;
#endif

class CpuContext final : public Context {
 public:
  Device device() const override { return Device::cpu(); }
  Allocator& allocator() override { return allocator_; }

 private:
  CachingAllocator allocator_{std::make_unique<HostMemory>(), kHostCaching};
};

}  // namespace

Context& cuda_context(int index);  // core/cuda_context.cpp, or the stub below without CUDA

Context& context(Device device) {
  if (device.is_cpu()) {
    static CpuContext cpu;
    return cpu;
  }
  return cuda_context(device.index);
}

namespace cuda {
MemoryStats memory_stats(int index) { return context(Device::cuda(index)).allocator().stats(); }
void reset_peak_memory(int index) { context(Device::cuda(index)).allocator().reset_peak(); }
void empty_cache(int index) { context(Device::cuda(index)).allocator().empty_cache(); }
void synchronize(int index) { context(Device::cuda(index)).synchronize(); }
}  // namespace cuda

#ifndef TAPESTRY_HAS_CUDA
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t nbytes) {
  TP_CHECK(dst_device.is_cpu() && src_device.is_cpu(), "copy", "cannot copy from ", src_device,
           " to ", dst_device, ": ", cuda::unavailable_reason());
  if (nbytes) std::memcpy(dst, src, nbytes);
}

namespace cuda {
bool is_available() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return "this build of Tapestry has no CUDA support (TAPESTRY_CUDA=OFF)"; }
}  // namespace cuda

Context& cuda_context(int index) {
  fail("cuda", "cannot use device cuda:", index, ": ", cuda::unavailable_reason());
}

namespace cuda {
void set_float32_matmul(Float32Matmul, int index) { cuda_context(index); }
Float32Matmul float32_matmul(int index) {
  cuda_context(index);
  return Float32Matmul::Full;
}
}  // namespace cuda
#endif

}  // namespace tapestry
