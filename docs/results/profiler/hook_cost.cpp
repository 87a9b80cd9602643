// The cost of one profiler hook when no session is active: profile_flops() is exactly the test that
// record(), record_cut() and the allocator make (a call, a thread-local load, a branch).
#include <chrono>
#include <cstdio>
#include "core/profiler.h"
int main() {
  const long n = 200000000;
  double best = 1e9;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) tapestry::profile_flops(1.0);
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / n;
    if (ns < best) best = ns;
  }
  std::printf("profile_flops with no session: %.2f ns per call (best of 5 x %ld calls)\n", best, n);
}
