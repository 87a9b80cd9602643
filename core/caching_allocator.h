/// @file
/// A caching allocator: blocks freed by tensors are kept in size-binned free lists and handed out
/// again, so that a training loop, which asks for the same sizes every step, stops calling the
/// system allocator (cudaMalloc, which is slow and synchronises the device) after its first step.
///
/// The policy lives here, in plain C++, over a pluggable MemorySource; the CUDA context plugs in
/// cudaMalloc / cudaFree (core/cuda_context.cpp) and the CPU suite a fake, so that binning, reuse,
/// statistics and the out-of-memory retry are tested without a GPU (tests/test_caching_allocator.cpp).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/device.h"

namespace tapestry {

/// Where a caching allocator gets its blocks from and gives them back to.
class MemorySource {
 public:
  virtual ~MemorySource() = default;
  /// A block of exactly nbytes, or nullptr when the system has no memory left for it. Any other
  /// failure throws Error.
  virtual void* allocate(std::size_t nbytes) = 0;
  /// Returns a block obtained from allocate(). Never throws.
  virtual void release(void* ptr, std::size_t nbytes) = 0;
  /// Waits until work queued on the device can no longer touch any block (called before cached
  /// blocks go back to the system). Never throws.
  virtual void synchronize() = 0;
  /// The device, for messages: "cuda:0".
  virtual std::string name() const = 0;
};

/// Caching::Off makes a plain counting allocator of the same source: each block is exactly the size
/// asked for and goes back to the source when freed (for sanitizer builds, which must see both).
enum class Caching { On, Off };

/// Policy (DESIGN §2, "Memory"):
///
/// - Sizes are rounded up to a bin: requests up to 1 MiB to a multiple of 512 B, larger ones to a
///   multiple of 2 MiB. Small tensors (biases, per-row statistics, scalars) come in many sizes and
///   waste at most 511 B each; large activations change size with the batch, and 2 MiB bins let a
///   step whose batch is a little shorter than the last reuse the last step's blocks.
/// - A block freed by a tensor goes to the free list of its bin, never back to the system. A request
///   takes the smallest cached block of at least its rounded size and at most 1/8 larger (best fit
///   with bounded waste), so a small request never pins a much larger block; only when none fits is
///   a new block taken from the source. Blocks are never split or merged.
/// - The cache is bounded: reserved never exceeds twice the most bytes the program has had in use at
///   once (its high water), or twice the current request's need when that is more. On a miss that
///   would take reserved above it, cached blocks go back to the system first, largest first, until
///   the new block fits under it. A loop whose shapes keep changing (batches bucketed by length,
///   whose N × N attention scores take a new size at each N) would otherwise cache a block of every
///   size it ever met, many times its working set. The factor 2 is for a loop whose shapes repeat
///   but whose blocks are not all live at once (a 126 MiB block freed, then two of 60 MiB held): it
///   needs more reserved than it ever has in use, and under a bound of the high water itself gave
///   back and took again its largest blocks every step, faulting their pages in anew (the
///   translation model's step; docs/PERFORMANCE.md).
///   (On Linux the host's allocator hands out memory it may not have, so the out-of-memory retry
///   below cannot stand in for this on the CPU: the process would be killed first.)
/// - Out of memory: the cache is emptied (every cached block goes back to the system) and the
///   request tried once more; if the system still has no block, allocate() throws Error naming the
///   request and the pool's state, with nothing allocated.
/// - Statistics count blocks (rounded sizes): in_use is held by live allocations, reserved is what
///   the source has handed out (in use + cached), peak the largest in_use since the last
///   reset_peak(), allocations the number of blocks obtained from the source.
///
/// Safe to call from several threads. The CPU's context uses it over host memory, the CUDA contexts
/// over cudaMalloc. On CUDA, a block freed while kernels queued on the device's
/// stream may still read it is safe to hand out again at once: its next user queues its work on the
/// same stream, after theirs.
class CachingAllocator final : public Allocator {
 public:
  /// Takes its memory from `source`; Caching::Off hands every free straight back (sanitizer builds).
  explicit CachingAllocator(std::unique_ptr<MemorySource> source, Caching caching = Caching::On);
  /// Releases the cached blocks. Blocks still in use belong to tensors that outlive the allocator
  /// and are left to the system.
  ~CachingAllocator() override;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  void* allocate(std::size_t nbytes) override;
  void deallocate(void* ptr, std::size_t nbytes) override;
  MemoryStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;

  /// The bin of a request of nbytes (0 bytes takes the smallest bin).
  static std::size_t round_size(std::size_t nbytes);
  static constexpr std::size_t kSmallBin = 512;  ///< bin size of small requests (bytes)
  static constexpr std::size_t kSmallLimit = std::size_t{1} << 20;  ///< 1 MiB
  static constexpr std::size_t kLargeBin = std::size_t{2} << 20;    ///< 2 MiB

 private:
  void release_cached();  ///< with mutex_ held
  /// Releases cached blocks, largest first, until reserved + nbytes is within the bound (twice the
  /// high water, or twice in_use + nbytes; or nothing is cached). With mutex_ held.
  void trim_cache_for(std::size_t nbytes);

  std::unique_ptr<MemorySource> source_;
  Caching caching_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> cached_;         ///< block size -> free block
  std::unordered_map<void*, std::size_t> in_use_;     ///< live block -> its size
  MemoryStats stats_;
  int64_t high_water_ = 0;  ///< the most in_use since construction (reset_peak leaves it)
  static constexpr int64_t kCacheBound = 2;  ///< reserved stays within this many times the high water
};

/// "1.50 MiB": a byte count for messages.
std::string format_bytes(int64_t nbytes);

}  // namespace tapestry
