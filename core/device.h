/// @file
/// Devices and the per-device Context (allocator; on CUDA also stream and library handles).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace tapestry {

/// The kinds of device.
enum class DeviceType { CPU, CUDA };

/// A device: the CPU, or CUDA device `index`.
struct Device {
  DeviceType type = DeviceType::CPU;  ///< the kind of device
  int index = 0;  ///< the CUDA device's index (0 for the CPU)

  /// The CPU.
  static Device cpu() { return {DeviceType::CPU, 0}; }
  /// CUDA device `index` (whether it exists is checked where it is used).
  static Device cuda(int index = 0) { return {DeviceType::CUDA, index}; }
  /// The best device present: CUDA device 0 when a GPU is usable, else the CPU. (DESIGN calls this
  /// "auto"; that word is reserved in C++.)
  static Device best();
  /// "cpu", "cuda", "cuda:N" or "auto" (= best()); throws Error on anything else.
  static Device parse(const std::string& text);

  ///@{
  /// Whether the device is the CPU or a CUDA device; devices are equal when kind and index are.
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& other) const { return type == other.type && index == other.index; }
  bool operator!=(const Device& other) const { return !(*this == other); }
  ///@}
};

std::string to_string(const Device& device);  ///< "cpu", "cuda:0"
/// Prints to_string(d).
inline std::ostream& operator<<(std::ostream& out, const Device& d) { return out << to_string(d); }

namespace cuda {
/// True when this build has CUDA and a usable GPU is present. Never throws.
bool is_available();
/// The number of CUDA devices present (0 in a build without CUDA or without a GPU).
int device_count();
/// Why is_available() is false: "built without CUDA", or the driver's own message.
std::string unavailable_reason();
}  // namespace cuda

/// Allocation statistics, in bytes (allocations: number of blocks obtained from the system allocator).
/// The CPU and CUDA contexts use the caching allocator (core/caching_allocator.h): in_use and peak
/// count whole blocks (sizes rounded to their bin), and reserved includes the cached blocks.
struct MemoryStats {
  int64_t in_use = 0;  ///< bytes in blocks handed out now
  int64_t peak = 0;  ///< the most in_use since the start or reset_peak()
  int64_t reserved = 0;  ///< bytes held from the system: in use plus cached
  int64_t allocations = 0;  ///< blocks obtained from the system
};

/// Where a device's memory comes from (each Context owns one).
class Allocator {
 public:
  virtual ~Allocator() = default;
  /// A block of at least `nbytes` bytes, 64-byte aligned on the CPU; throws Error when out of memory.
  virtual void* allocate(std::size_t nbytes) = 0;
  /// Returns a block from allocate(nbytes).
  virtual void deallocate(void* ptr, std::size_t nbytes) = 0;
  /// The statistics now.
  virtual MemoryStats stats() const = 0;
  /// Sets peak to in_use.
  virtual void reset_peak() = 0;
  /// Gives memory cached for reuse back to the system (a no-op for an allocator that caches none).
  virtual void empty_cache() {}
};

/// Memory for the duration of a scope (CUB temporary storage, library workspaces), from a device's
/// allocator, so that it is cached and counted like tensor memory. On CUDA the buffer may be
/// destroyed while kernels queued on the device's stream still use it: its block is handed out
/// again only to work queued after theirs on the same stream.
class ScratchBuffer {
 public:
  /// Allocates `nbytes` from `allocator`; freed when the buffer goes out of scope.
  ScratchBuffer(Allocator& allocator, std::size_t nbytes)
      : allocator_(&allocator), data_(allocator.allocate(nbytes)), nbytes_(nbytes) {}
  ~ScratchBuffer() {
    if (data_) allocator_->deallocate(data_, nbytes_);
  }
  /// Takes over other's block.
  ScratchBuffer(ScratchBuffer&& other) noexcept
      : allocator_(other.allocator_), data_(other.data_), nbytes_(other.nbytes_) {
    other.data_ = nullptr;
  }
  ScratchBuffer(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(const ScratchBuffer&) = delete;
  ScratchBuffer& operator=(ScratchBuffer&&) = delete;

  /// The block.
  void* data() const { return data_; }
  /// Its size in bytes.
  std::size_t size() const { return nbytes_; }

 private:
  Allocator* allocator_;
  void* data_;
  std::size_t nbytes_;
};

/// What a device owns. One Context per device, created on first use and living for the process;
/// nothing device-specific is kept anywhere else.
class Context {
 public:
  virtual ~Context() = default;
  /// The device this context belongs to.
  virtual Device device() const = 0;
  /// The device's allocator (the caching allocator).
  virtual Allocator& allocator() = 0;
  /// Waits until all work queued on this device has finished (a no-op on the CPU).
  virtual void synchronize() {}
};

/// The context of `device`; throws Error when the device is not usable (e.g. CUDA without a GPU).
Context& context(Device device);

}  // namespace tapestry

namespace tapestry {
/// Copies nbytes between any two devices (host↔host, host↔GPU, GPU↔GPU); waits until done.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, std::size_t nbytes);
}  // namespace tapestry
