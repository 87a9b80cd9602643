#include "core/caching_allocator.h"

#include <algorithm>
#include <cassert>
#include <cstdio>
#include <iterator>
#include <limits>

#include "core/error.h"
#include "core/profiler.h"

namespace tapestry {

std::string format_bytes(int64_t nbytes) {
  static const char* const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(nbytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) value /= 1024.0, ++unit;
  char text[32];
  if (unit == 0) std::snprintf(text, sizeof text, "%lld B", static_cast<long long>(nbytes));
  else std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  return text;
}

CachingAllocator::CachingAllocator(std::unique_ptr<MemorySource> source, Caching caching)
    : source_(std::move(source)), caching_(caching) {}

CachingAllocator::~CachingAllocator() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached();
}

std::size_t CachingAllocator::round_size(std::size_t nbytes) {
  if (nbytes <= kSmallLimit) return nbytes == 0 ? kSmallBin : (nbytes + kSmallBin - 1) / kSmallBin * kSmallBin;
  return (nbytes + kLargeBin - 1) / kLargeBin * kLargeBin;
}

void* CachingAllocator::allocate(std::size_t nbytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto out_of_memory = [&](const char* what) {
    fail("allocate", "out of memory on ", source_->name(), ": cannot allocate ", nbytes, " bytes (",
         format_bytes(static_cast<int64_t>(nbytes)), "); ", format_bytes(stats_.in_use), " in use, ",
         format_bytes(stats_.reserved), " reserved by Tapestry's caching allocator (", what, ")");
  };
  if (nbytes > std::numeric_limits<std::size_t>::max() / 2) out_of_memory("larger than any device");
  const std::size_t size = caching_ == Caching::On ? round_size(nbytes) : nbytes;

  void* ptr = nullptr;
  std::size_t block = size;
  // Best fit with bounded waste: the smallest cached block in [size, size + size / 8].
  const auto fit = cached_.lower_bound(size);
  if (fit != cached_.end() && fit->first <= size + size / 8) {
    block = fit->first;
    ptr = fit->second;
    cached_.erase(fit);
  } else {
    trim_cache_for(size);
    ptr = source_->allocate(size);
    if (!ptr && !cached_.empty()) {
      release_cached();
      ptr = source_->allocate(size);
    }
    if (!ptr) out_of_memory("no cached block is left to give back");
    stats_.reserved += static_cast<int64_t>(size);
    ++stats_.allocations;
  }
  in_use_.emplace(ptr, block);
  stats_.in_use += static_cast<int64_t>(block);
  stats_.peak = std::max(stats_.peak, stats_.in_use);
  high_water_ = std::max(high_water_, stats_.in_use);
  if (Profiler::State* profiler = profile_hooks::active()) profile_hooks::allocated(*profiler, nbytes, ptr);
  return ptr;
}

void CachingAllocator::deallocate(void* ptr, std::size_t) {
  if (Profiler::State* profiler = profile_hooks::active()) profile_hooks::released(*profiler, ptr);
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = in_use_.find(ptr);
  assert(it != in_use_.end() && "deallocate of a block this allocator did not hand out");
  if (it == in_use_.end()) return;
  stats_.in_use -= static_cast<int64_t>(it->second);
  if (caching_ == Caching::On) {
    cached_.emplace(it->second, ptr);
  } else {
    source_->release(ptr, it->second);
    stats_.reserved -= static_cast<int64_t>(it->second);
  }
  in_use_.erase(it);
}

MemoryStats CachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak = stats_.in_use;
}

void CachingAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mutex_);
  release_cached();
}

void CachingAllocator::trim_cache_for(std::size_t nbytes) {
  const int64_t need = stats_.in_use + static_cast<int64_t>(nbytes);
  const int64_t limit = kCacheBound * std::max(high_water_, need);
  if (cached_.empty() || stats_.reserved + static_cast<int64_t>(nbytes) <= limit) return;
  source_->synchronize();
  while (!cached_.empty() && stats_.reserved + static_cast<int64_t>(nbytes) > limit) {
    const auto largest = std::prev(cached_.end());
    source_->release(largest->second, largest->first);
    stats_.reserved -= static_cast<int64_t>(largest->first);
    cached_.erase(largest);
  }
}

void CachingAllocator::release_cached() {
  if (cached_.empty()) return;
  source_->synchronize();
  for (const auto& [size, ptr] : cached_) {
    source_->release(ptr, size);
    stats_.reserved -= static_cast<int64_t>(size);
  }
  cached_.clear();
}

}  // namespace tapestry
