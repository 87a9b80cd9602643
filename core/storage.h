/// @file
/// Storage: one allocation on one device, shared by every tensor that views it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace tapestry {

/// A device allocation that tensors view: bytes, the device, and a version counter for in-place
/// writes. Shared by the tensors that view it (Tensor holds a shared_ptr).
class Storage {
 public:
  /// Allocates `nbytes` (uninitialised) from the device's allocator.
  Storage(std::size_t nbytes, Device device);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  /// The start of the allocation (on the storage's device).
  void* data() const { return data_; }
  /// Its size in bytes.
  std::size_t nbytes() const { return nbytes_; }
  /// The device that holds it.
  Device device() const { return device_; }

  /// Bumped by every in-place write; the tape compares it with the version it saved to refuse
  /// gradients computed from data that has since changed.
  uint64_t version() const { return version_.load(); }
  /// Called by every in-place write (see version()).
  void bump_version() { ++version_; }

 private:
  void* data_ = nullptr;
  std::size_t nbytes_ = 0;
  Device device_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace tapestry
