// The caching allocator's policy (core/caching_allocator.h) over a fake memory source: binning,
// reuse, best fit, the cache's bound, statistics, empty_cache, the out-of-memory retry and its error,
// scratch buffers.
// The same class runs over cudaMalloc on a GPU (tests/cuda/test_cuda_context.cpp).
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include "core/caching_allocator.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

constexpr std::size_t kKiB = 1024, kMiB = 1024 * 1024;

// What the fake source did, readable after the allocator owns the source.
struct Ledger {
  std::size_t capacity = 0;
  std::size_t live = 0;  // bytes handed out and not released
  std::map<void*, std::size_t> blocks;
  int allocations = 0, failures = 0, releases = 0, synchronizations = 0;
};

class FakeMemory final : public MemorySource {
 public:
  explicit FakeMemory(Ledger& ledger) : ledger_(ledger) {}
  void* allocate(std::size_t nbytes) override {
    if (ledger_.live + nbytes > ledger_.capacity) {
      ++ledger_.failures;
      return nullptr;
    }
    void* ptr = std::malloc(nbytes);
    ledger_.blocks[ptr] = nbytes;
    ledger_.live += nbytes;
    ++ledger_.allocations;
    return ptr;
  }
  void release(void* ptr, std::size_t nbytes) override {
    CHECK(ledger_.blocks.at(ptr) == nbytes);
    ledger_.blocks.erase(ptr);
    ledger_.live -= nbytes;
    ++ledger_.releases;
    std::free(ptr);
  }
  void synchronize() override { ++ledger_.synchronizations; }
  std::string name() const override { return "fake:0"; }

 private:
  Ledger& ledger_;
};

std::unique_ptr<CachingAllocator> make_allocator(Ledger& ledger, std::size_t capacity = 1024 * kMiB) {
  ledger.capacity = capacity;
  return std::make_unique<CachingAllocator>(std::make_unique<FakeMemory>(ledger));
}

}  // namespace

TEST_CASE("caching allocator: sizes round to 512 B up to 1 MiB, to 2 MiB above") {
  CHECK(CachingAllocator::round_size(0) == 512);
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::round_size(1000 * kKiB) == 1000 * kKiB);
  CHECK(CachingAllocator::round_size(kMiB) == kMiB);
  CHECK(CachingAllocator::round_size(kMiB + 1) == 2 * kMiB);
  CHECK(CachingAllocator::round_size(2 * kMiB) == 2 * kMiB);
  CHECK(CachingAllocator::round_size(2 * kMiB + 1) == 4 * kMiB);
  CHECK(CachingAllocator::round_size(5 * kMiB) == 6 * kMiB);
}

TEST_CASE("caching allocator: a freed block is reused by the next request of its bin") {
  Ledger ledger;
  auto alloc = make_allocator(ledger);
  void* a = alloc->allocate(1000);
  CHECK(ledger.allocations == 1);
  alloc->deallocate(a, 1000);
  CHECK(ledger.releases == 0);  // cached, not returned
  void* b = alloc->allocate(900);  // the same 1024-byte bin
  CHECK(b == a);
  CHECK(ledger.allocations == 1);
  void* c = alloc->allocate(900);  // the cached block is taken: a new one
  CHECK(c != b);
  CHECK(ledger.allocations == 2);
  alloc->deallocate(b, 900);
  alloc->deallocate(c, 900);
  // Large blocks: 3 MiB and 3.5 MiB share the 4 MiB bin; 4.5 MiB needs a 6 MiB block.
  void* d = alloc->allocate(3 * kMiB);
  alloc->deallocate(d, 3 * kMiB);
  void* again = alloc->allocate(3 * kMiB + kMiB / 2);
  CHECK(again == d);
  void* e = alloc->allocate(4 * kMiB + kMiB / 2);
  CHECK(e != d);
  CHECK(ledger.blocks.at(e) == 6 * kMiB);
  alloc->deallocate(again, 3 * kMiB + kMiB / 2);
  alloc->deallocate(e, 4 * kMiB + kMiB / 2);
}

// Raises the allocator's high water to `bytes` and gives the block back to the source, so that the
// cache's bound (reserved within twice the high water) stays out of a test about something else.
void raise_high_water(CachingAllocator& alloc, std::size_t bytes) {
  alloc.deallocate(alloc.allocate(bytes), bytes);
  alloc.empty_cache();
}

TEST_CASE("caching allocator: best fit among cached blocks, at most 1/8 larger") {
  Ledger ledger;
  auto alloc = make_allocator(ledger);
  raise_high_water(*alloc, kMiB);
  void* b4608 = alloc->allocate(4608);
  void* b4096 = alloc->allocate(4096);
  void* b8192 = alloc->allocate(8192);
  alloc->deallocate(b4608, 4608);
  alloc->deallocate(b8192, 8192);
  alloc->deallocate(b4096, 4096);
  void* first = alloc->allocate(4000);  // a 4096 bin
  CHECK(first == b4096);                 // the smallest that fits
  void* second = alloc->allocate(4000);
  CHECK(second == b4608);                // 4608 ≤ 4096 + 4096 / 8
  const int before = ledger.allocations;
  void* fresh = alloc->allocate(4000);   // 8192 would waste half: a new block
  CHECK(fresh != b8192);
  CHECK(ledger.allocations == before + 1);
  void* big = alloc->allocate(7500);     // a 7680 bin: 8192 fits
  CHECK(big == b8192);
  for (void* p : {first, second, fresh, big}) alloc->deallocate(p, 4000);
}

TEST_CASE("caching allocator: statistics count blocks; peak and reset_peak") {
  Ledger ledger;
  auto alloc = make_allocator(ledger);
  void* a = alloc->allocate(100);        // 512
  void* b = alloc->allocate(3 * kMiB);   // 4 MiB
  MemoryStats s = alloc->stats();
  CHECK(s.in_use == static_cast<int64_t>(512 + 4 * kMiB));
  CHECK(s.reserved == s.in_use);
  CHECK(s.peak == s.in_use);
  CHECK(s.allocations == 2);
  alloc->deallocate(b, 3 * kMiB);
  s = alloc->stats();
  CHECK(s.in_use == 512);
  CHECK(s.reserved == static_cast<int64_t>(512 + 4 * kMiB));
  CHECK(s.peak == static_cast<int64_t>(512 + 4 * kMiB));
  alloc->reset_peak();
  CHECK(alloc->stats().peak == 512);
  void* c = alloc->allocate(4 * kMiB);   // reuses the cached 4 MiB block
  CHECK(alloc->stats().allocations == 2);
  CHECK(alloc->stats().peak == static_cast<int64_t>(512 + 4 * kMiB));
  alloc->deallocate(c, 4 * kMiB);
  alloc->deallocate(a, 100);
  CHECK(alloc->stats().in_use == 0);
  CHECK(static_cast<std::size_t>(alloc->stats().reserved) == ledger.live);
}

TEST_CASE("caching allocator: empty_cache returns cached blocks only, after synchronising") {
  Ledger ledger;
  auto alloc = make_allocator(ledger);
  void* kept = alloc->allocate(kMiB);
  void* freed = alloc->allocate(5 * kMiB);
  alloc->deallocate(freed, 5 * kMiB);
  alloc->empty_cache();
  CHECK(ledger.synchronizations == 1);
  CHECK(ledger.releases == 1);
  CHECK(ledger.live == kMiB);
  CHECK(alloc->stats().reserved == static_cast<int64_t>(kMiB));
  CHECK(alloc->stats().in_use == static_cast<int64_t>(kMiB));
  alloc->empty_cache();  // nothing cached: no synchronisation needed
  CHECK(ledger.synchronizations == 1);
  alloc->deallocate(kept, kMiB);
  alloc.reset();  // the destructor returns what is cached
  CHECK(ledger.live == 0);
}

TEST_CASE("caching allocator: the cache keeps reserved within twice the most ever in use") {
  Ledger ledger;
  auto alloc = make_allocator(ledger);
  // A loop whose one large block changes size every step (N × N scores under length buckets): the
  // cache holds old blocks only while they fit under the bound, then each new block replaces them.
  for (std::size_t n = 1; n <= 20; ++n) {
    void* p = alloc->allocate(2 * n * kMiB);
    alloc->deallocate(p, 2 * n * kMiB);
    CHECK(alloc->stats().reserved <= static_cast<int64_t>(2 * 2 * n * kMiB));
  }
  CHECK(ledger.allocations == 20);
  CHECK(ledger.releases >= 16);         // from n = 4 on, each step gives back the last large block
  CHECK(ledger.live <= 2 * 40 * kMiB);  // not the 420 MiB of every size met
  // A smaller size reuses the largest cached block while it is within 1/8 of it.
  const int allocations = ledger.allocations;
  void* near = alloc->allocate(36 * kMiB);
  CHECK(ledger.allocations == allocations);
  CHECK(ledger.blocks.at(near) == 40 * kMiB);
  alloc->deallocate(near, 36 * kMiB);

  // A loop whose sizes repeat keeps every block: no allocation or release after its first step.
  const std::size_t sizes[] = {kMiB / 2, 3 * kMiB, 5 * kMiB, 12 * kMiB};
  void* held[4];
  for (int step = 0; step < 5; ++step) {
    for (int i = 0; i < 4; ++i) held[i] = alloc->allocate(sizes[i]);
    for (int i = 0; i < 4; ++i) alloc->deallocate(held[i], sizes[i]);
    if (step == 0) ledger.allocations = ledger.releases = 0;
  }
  CHECK(ledger.allocations == 0);
  CHECK(ledger.releases == 0);
  CHECK(alloc->stats().reserved <= static_cast<int64_t>(2 * 40 * kMiB));
}

TEST_CASE("caching allocator: a loop whose blocks are not all live at once keeps them all") {
  // Each step holds a 126 MiB block, frees it, then holds two of 60 MiB: 246 MiB of blocks for a
  // high water of 126 MiB. Under a bound of the high water itself the cache gave the 126 MiB block
  // back for the 60 MiB ones and took it again the next step, every step.
  Ledger ledger;
  auto alloc = make_allocator(ledger);
  for (int step = 0; step < 5; ++step) {
    alloc->deallocate(alloc->allocate(126 * kMiB), 126 * kMiB);
    void* a = alloc->allocate(60 * kMiB);
    void* b = alloc->allocate(60 * kMiB);
    alloc->deallocate(a, 60 * kMiB);
    alloc->deallocate(b, 60 * kMiB);
    if (step == 0) ledger.allocations = ledger.releases = 0;
  }
  CHECK(ledger.allocations == 0);
  CHECK(ledger.releases == 0);
  CHECK(alloc->stats().reserved == static_cast<int64_t>(246 * kMiB));
}

TEST_CASE("caching allocator: the bound gives back the largest cached blocks first, after synchronising") {
  Ledger ledger;
  auto alloc = make_allocator(ledger);
  alloc->deallocate(alloc->allocate(12 * kMiB), 12 * kMiB);
  void* a = alloc->allocate(6 * kMiB);
  void* b = alloc->allocate(6 * kMiB);
  void* small = alloc->allocate(1000);  // high water 12 MiB + 1 KiB
  alloc->deallocate(a, 6 * kMiB);
  alloc->deallocate(b, 6 * kMiB);
  alloc->deallocate(small, 1000);
  CHECK(alloc->stats().reserved == static_cast<int64_t>(24 * kMiB + 1024));  // 12 + 6 + 6 MiB + 1 KiB cached
  const int releases = ledger.releases, synchronizations = ledger.synchronizations;
  void* fresh = alloc->allocate(3 * kMiB);  // a 4 MiB block: none cached fits; 28 MiB > twice 12 MiB + 1 KiB
  CHECK(ledger.releases == releases + 1);   // the 12 MiB block only
  CHECK(ledger.synchronizations == synchronizations + 1);
  CHECK(alloc->stats().reserved == static_cast<int64_t>(16 * kMiB + 1024));
  CHECK(alloc->allocate(1000) == small);    // still cached
  void* six = alloc->allocate(6 * kMiB);
  CHECK((six == a || six == b));
  alloc->deallocate(small, 1000);
  alloc->deallocate(six, 6 * kMiB);
  alloc->deallocate(fresh, 3 * kMiB);
}

TEST_CASE("caching allocator: out of memory empties the cache and retries once") {
  Ledger ledger;
  auto alloc = make_allocator(ledger, 10 * kMiB);
  raise_high_water(*alloc, 10 * kMiB);
  void* a = alloc->allocate(2 * kMiB);
  void* b = alloc->allocate(2 * kMiB);
  alloc->deallocate(b, 2 * kMiB);  // 2 MiB cached; 4 MiB reserved, within the high water
  ledger.capacity = 6 * kMiB;      // another program took memory from the device
  void* c = alloc->allocate(4 * kMiB);  // 4 + 4 > 6: release the cache, retry
  CHECK(c != nullptr);
  CHECK(ledger.failures == 1);
  CHECK(ledger.synchronizations == 2);  // raise_high_water's empty_cache, then the retry's
  CHECK(ledger.live == 6 * kMiB);
  CHECK(alloc->stats().reserved == static_cast<int64_t>(6 * kMiB));
  alloc->deallocate(a, 2 * kMiB);
  alloc->deallocate(c, 4 * kMiB);
}

TEST_CASE("caching allocator: out of memory after the retry throws, naming the request and the pool") {
  Ledger ledger;
  auto alloc = make_allocator(ledger, 12 * kMiB);
  raise_high_water(*alloc, 12 * kMiB);
  void* a = alloc->allocate(8 * kMiB);
  void* b = alloc->allocate(kMiB);
  alloc->deallocate(b, kMiB);  // 1 MiB cached; 9 + 2 MiB is within the high water
  ledger.capacity = 9 * kMiB;  // another program took memory from the device
  check_error([&] { alloc->allocate(2 * kMiB); },
              {"allocate", "out of memory on fake:0", "2097152 bytes", "2.00 MiB", "8.00 MiB in use",
               "8.00 MiB reserved", "no cached block is left"});
  CHECK(ledger.failures == 2);  // the first try and the retry
  const MemoryStats s = alloc->stats();
  CHECK(s.in_use == static_cast<int64_t>(8 * kMiB));
  CHECK(static_cast<std::size_t>(s.reserved) == ledger.live);  // nothing leaked
  // With nothing cached there is nothing to retry with.
  check_error([&] { alloc->allocate(2 * kMiB); }, {"out of memory"});
  CHECK(ledger.failures == 3);
  // A request no device could hold never reaches the source.
  check_error([&] { alloc->allocate(std::numeric_limits<std::size_t>::max()); }, {"out of memory", "larger than any device"});
  CHECK(ledger.failures == 3);
  alloc->deallocate(a, 8 * kMiB);
}

TEST_CASE("scratch buffers take a block for their scope and give it back") {
  Ledger ledger;
  auto alloc = make_allocator(ledger);
  void* where = nullptr;
  {
    ScratchBuffer scratch(*alloc, 3000);
    where = scratch.data();
    CHECK(scratch.size() == 3000);
    CHECK(alloc->stats().in_use == 3072);
    ScratchBuffer moved(std::move(scratch));
    CHECK(moved.data() == where);
    CHECK(scratch.data() == nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state is the point
    CHECK(alloc->stats().in_use == 3072);
  }
  CHECK(alloc->stats().in_use == 0);
  ScratchBuffer again(*alloc, 2900);
  CHECK(again.data() == where);  // the same block, from the cache
}

TEST_CASE("caching allocator: threads allocating and freeing together") {
  Ledger ledger;
  auto alloc = make_allocator(ledger);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&alloc, t] {
      for (int i = 0; i < 2000; ++i) {
        const std::size_t size = 512 * static_cast<std::size_t>(1 + (i * 7 + t) % 16);
        void* p = alloc->allocate(size);
        alloc->deallocate(p, size);
      }
    });
  for (auto& th : threads) th.join();
  CHECK(alloc->stats().in_use == 0);
  CHECK(static_cast<std::size_t>(alloc->stats().reserved) == ledger.live);
}

TEST_CASE("format_bytes") {
  CHECK(format_bytes(0) == "0 B");
  CHECK(format_bytes(1023) == "1023 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(int64_t{3} << 30) == "3.00 GiB");
}
