#include "tests/testing.h"

#include "data/copy_task.h"

using namespace tapestry;
using namespace tapestry::testing;

TEST_CASE("copy task: 0 w 0 w targets, masks in both copies, every masked symbol visible in the other") {
  data::CopyTask task;
  task.length = 31;
  Generator gen(4);
  const data::CopyTaskBatch batch = task.sample(64, gen);
  const int64_t N = task.sequence_length(), L = task.length;
  CHECK(batch.input.shape() == Shape{64, N});
  const std::vector<int64_t> in = batch.input.to_vector<int64_t>(), out = batch.target.to_vector<int64_t>();
  const std::vector<bool> masked = batch.masked.to_vector<bool>();
  int64_t first = 0, second = 0;
  for (int64_t b = 0; b < 64; ++b) {
    const int64_t* t = out.data() + b * N;
    CHECK(t[0] == 0);
    CHECK(t[L + 1] == 0);
    for (int64_t i = 0; i < L; ++i) {
      CHECK(t[1 + i] == t[L + 2 + i]);
      CHECK(t[1 + i] >= 1);
      CHECK(t[1 + i] <= 10);
      const bool m1 = masked[b * N + 1 + i], m2 = masked[b * N + L + 2 + i];
      CHECK_FALSE((m1 && m2));  // never hidden in both copies
      first += m1, second += m2;
    }
    for (int64_t n = 0; n < N; ++n) CHECK(in[b * N + n] == (masked[b * N + n] ? data::CopyTask::kMask : t[n]));
    CHECK_FALSE(masked[b * N]);
    CHECK_FALSE(masked[b * N + L + 1]);
  }
  const double total = 64.0 * L;
  CHECK(first / total == doctest::Approx(0.2).epsilon(0.2));
  CHECK(second / total == doctest::Approx(0.2).epsilon(0.2));
}

TEST_CASE("copy task: reproducible and checked") {
  data::CopyTask task;
  task.length = 5;
  Generator a(1), b(1);
  CHECK(task.sample(3, a).input.to_vector<int64_t>() == task.sample(3, b).input.to_vector<int64_t>());
  task.length = 0;
  check_error([&] { task.sample(2, a); }, {"copy task", "at least 1"});
  task.length = 4;
  check_error([&] { task.sample(0, a); }, {"copy task", "batch"});
  task.mask_fraction = 0.6;
  check_error([&] { task.sample(2, a); }, {"copy task", "mask fraction"});
}
