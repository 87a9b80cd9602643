// The device context on a real GPU: the caching allocator's statistics, reuse and empty_cache,
// scratch buffers, out of memory, copies that see every queued kernel, errors for devices that do
// not exist, device mismatches, and the ops that have no CUDA kernel yet refusing GPU tensors.
#include "core/cuda.h"
#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {
constexpr int64_t kMiB = int64_t{1} << 20;
}

TEST_CASE("the caching allocator: statistics, reuse across steps, empty_cache, peak") {
  if (!on_gpu()) {
    MESSAGE("skipped with --cpu-stand-in: the caching allocator is the GPU's");
    return;
  }
  cuda::empty_cache();
  const MemoryStats start = cuda::memory_stats();
  CHECK(start.reserved == start.in_use);  // nothing cached after empty_cache
  CHECK(start.peak >= start.in_use);
  {
    const Tensor a = empty({3 * kMiB / 4}, {DType::Float32, dut()});  // 3 MiB: a 4 MiB block (2 MiB bins)
    const MemoryStats s = cuda::memory_stats();
    CHECK(s.in_use == start.in_use + 4 * kMiB);
    CHECK(s.reserved == start.reserved + 4 * kMiB);
    CHECK(s.allocations == start.allocations + 1);
    CHECK(s.peak >= s.in_use);
  }
  const MemoryStats freed = cuda::memory_stats();
  CHECK(freed.in_use == start.in_use);
  CHECK(freed.reserved == start.reserved + 4 * kMiB);  // cached, not returned
  {
    // The next step asks for a little less: the cached block is reused, no cudaMalloc.
    const Tensor b = empty({7 * kMiB / 8}, {DType::Float32, dut()});  // 3.5 MiB, also a 4 MiB bin
    const MemoryStats s = cuda::memory_stats();
    CHECK(s.allocations == start.allocations + 1);
    CHECK(s.in_use == start.in_use + 4 * kMiB);
    CHECK(s.reserved == start.reserved + 4 * kMiB);
  }
  cuda::reset_peak_memory();
  CHECK(cuda::memory_stats().peak == cuda::memory_stats().in_use);
  {
    const Tensor big = empty({4 * kMiB}, {DType::Float32, dut()});  // 16 MiB
    CHECK(cuda::memory_stats().peak >= start.in_use + 16 * kMiB);
  }
  CHECK(cuda::memory_stats().peak >= start.in_use + 16 * kMiB);  // the peak stays after the free
  cuda::empty_cache();
  const MemoryStats end = cuda::memory_stats();
  CHECK(end.in_use == start.in_use);
  CHECK(end.reserved == start.reserved);
}

TEST_CASE("small blocks round to 512 bytes; the allocator is the context's") {
  if (!on_gpu()) {
    MESSAGE("skipped with --cpu-stand-in: the caching allocator is the GPU's");
    return;
  }
  const MemoryStats before = cuda::memory_stats();
  const Tensor t = empty({3}, {DType::Float32, dut()});  // 12 bytes: a 512-byte block
  CHECK(cuda::memory_stats().in_use == before.in_use + 512);
  CHECK(context(dut()).allocator().stats().in_use == cuda::memory_stats().in_use);
}

TEST_CASE("scratch buffers come from the caching allocator and go back to it") {
  if (!on_gpu()) {
    MESSAGE("skipped with --cpu-stand-in: the caching allocator is the GPU's");
    return;
  }
  const MemoryStats before = cuda::memory_stats();
  {
    ScratchBuffer scratch(context(dut()).allocator(), 5 * kMiB);
    CHECK(scratch.data() != nullptr);
    CHECK(cuda::memory_stats().in_use == before.in_use + 6 * kMiB);
    // A reduction that needs scratch space of its own (a long row, reduced in chunks).
    const Tensor x = ones({1 << 20}, {DType::Float32, dut()});
    CHECK(sum(x).item<double>() == static_cast<double>(1 << 20));
  }
  CHECK(cuda::memory_stats().in_use == before.in_use);
}

TEST_CASE("out of memory: an Error naming the request and the pool, nothing leaked") {
  if (!on_gpu()) {
    MESSAGE("skipped with --cpu-stand-in: out of memory is tested on the GPU");
    return;
  }
  const Tensor keep = empty({kMiB}, {DType::Float32, dut()});
  const MemoryStats before = cuda::memory_stats();
  const int64_t absurd = int64_t{1} << 42;  // 16 TiB of float32
  check_error([&] { empty({absurd}, {DType::Float32, dut()}); },
              {"out of memory", "cuda:0", std::to_string(absurd * 4), "in use", "reserved"});
  const MemoryStats after = cuda::memory_stats();
  CHECK(after.in_use == before.in_use);
  CHECK(after.reserved <= before.reserved);  // the cache was emptied before the retry
  // The device is still usable.
  CHECK(sum(full({1000}, 2.0, {DType::Float32, dut()})).item<double>() == 2000.0);
}

TEST_CASE("copies to the host see every kernel queued before them") {
  if (!on_gpu()) {
    MESSAGE("skipped with --cpu-stand-in: streams are the GPU's");
    return;
  }
  Tensor x = zeros({1 << 20}, {DType::Float32, dut()});
  for (int step = 0; step < 50; ++step) add_(x, ones({1}, {DType::Float32, dut()}));
  CHECK(x.to_vector<float>().back() == 50.0f);
  cuda::synchronize();
  context(dut()).synchronize();
}

TEST_CASE("devices that do not exist, and device mismatches") {
  if (!on_gpu()) {
    MESSAGE("skipped with --cpu-stand-in: needs a GPU");
    return;
  }
  const int count = cuda::device_count();
  check_error([&] { zeros({2}, {DType::Float32, Device::cuda(count)}); }, {"cuda", "does not exist"});
  check_error([&] { cuda::memory_stats(count); }, {"does not exist"});
  const Tensor cpu = ones({3}), gpu = ones({3}, {DType::Float32, dut()});
  check_error([&] { add(cpu, gpu); }, {"add", "one device", "cpu", "cuda:0"});
  check_error([&] { where(to(zeros({3}, {DType::Bool}), dut()), cpu, gpu); }, {"where", "one device"});
  check_error([&] { add_(gpu.detach(), cpu); }, {"add_", "one device"});
  check_error([&] { batched_gemm({}, ones({2, 2}), Transpose::No, to(ones({2, 2}), dut()), Transpose::No,
                                 to(ones({2, 2}), dut()), 0.0); },
              {"matmul", "one device"});
}
