// Devices and the per-device Context (allocator; on CUDA also stream and library handles).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace tapestry {

enum class DeviceType { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  // The best device present: CUDA device 0 when a GPU is usable, else the CPU. (DESIGN calls this
  // "auto"; that word is reserved in C++.)
  static Device best();
  // "cpu", "cuda", "cuda:N" or "auto" (= best()); throws Error on anything else.
  static Device parse(const std::string& text);

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& other) const { return type == other.type && index == other.index; }
  bool operator!=(const Device& other) const { return !(*this == other); }
};

std::string to_string(const Device& device);  // "cpu", "cuda:0"
inline std::ostream& operator<<(std::ostream& out, const Device& d) { return out << to_string(d); }

namespace cuda {
// True when this build has CUDA and a usable GPU is present. Never throws.
bool is_available();
int device_count();
// Why is_available() is false: "built without CUDA", or the driver's own message.
std::string unavailable_reason();
}  // namespace cuda

// Allocation statistics, in bytes (allocations: number of blocks obtained from the system allocator).
// The CPU and CUDA contexts use the caching allocator (core/caching_allocator.h): in_use and peak
// count whole blocks (sizes rounded to their bin), and reserved includes the cached blocks.
struct MemoryStats {
  int64_t in_use = 0;
  int64_t peak = 0;
  int64_t reserved = 0;
  int64_t allocations = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(std::size_t nbytes) = 0;
  virtual void deallocate(void* ptr, std::size_t nbytes) = 0;
  virtual MemoryStats stats() const = 0;
  virtual void reset_peak() = 0;
  // Gives memory cached for reuse back to the system (a no-op for an allocator that caches none).
  virtual void empty_cache() {}
};

// Memory for the duration of a scope (CUB temporary storage, library workspaces), from a device's
// allocator, so that it is cached and counted like tensor memory. On CUDA the buffer may be
// destroyed while kernels queued on the device's stream still use it: its block is handed out
// again only to work queued after theirs on the same stream.
class ScratchBuffer {
 public:
  ScratchBuffer(Allocator& allocator, std::size_t nbytes)
      : allocator_(&allocator), data_(allocator.allocate(nbytes)), nbytes_(nbytes) {}
  ~ScratchBuffer() {
    if (data_) allocator_->deallocate(data_, nbytes_);
  }
  ScratchBuffer(ScratchBuffer&& other) noexcept
      : allocator_(other.allocator_), data_(other.data_), nbytes_(other.nbytes_) {
    other.data_ = nullptr;
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(ScratchBuffer&&) = delete;

  void* data() const { return data_; }
  std::size_t size() const { return nbytes_; }

 private:
  Allocator* allocator_;
  void* data_;
  std::size_t nbytes_;
};

// What a device owns. One Context per device, created on first use and living for the process;
// nothing device-specific is kept anywhere else.
class Context {
 public:
  virtual ~Context() = default;
  virtual Device device() const = 0;
  virtual Allocator& allocator() = 0;
  // Waits until all work queued on this device has finished (a no-op on the CPU).
  virtual void synchronize() {}
};

// The context of `device`; throws Error when the device is not usable (e.g. CUDA without a GPU).
Context& context(Device device);

}  // namespace tapestry

namespace tapestry {
// Copies nbytes between any two devices (host↔host, host↔GPU, GPU↔GPU); waits until done.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t nbytes);
}  // namespace tapestry
