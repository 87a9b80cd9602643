// Data parallelism (dist/) within one process: a World alone, the gradient reducer's buckets and
// bookkeeping, and the errors. Several ranks are tested under mpirun (tests/dist/*.sh).
#include <string>
#include <vector>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

Tensor parameter(const Shape& shape, uint64_t seed) {
  Generator gen(seed);
  Tensor p = rand(shape, gen);
  p.set_requires_grad(true);
  return p;
}

// sum(a²) + 3·sum(b) + sum(c·a₀): every gradient differs from the others.
Tensor loss_of(const Tensor& a, const Tensor& b, const Tensor& c) {
  return sum(a * a) + sum(b) * 3.0 + sum(c * select(a, 0, 0));
}

}  // namespace

TEST_CASE("dist: a process alone is rank 0 of 1, and its collectives are the identity") {
  const dist::World world;
  CHECK(world.rank() == 0);
  CHECK(world.size() == 1);
  CHECK(world.local_rank() == 0);
  CHECK(world.is_root());
  CHECK(!world.joined());
  const Tensor t = from_vector<float>({1, 2, 3}, {3});
  world.broadcast(t);
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3});
  CHECK(world.broadcast(std::string("rank 0's text")) == "rank 0's text");
  CHECK(world.sum(2.5) == 2.5);
  check_error([&] { world.abort("training: the loss is nan"); }, {"training: the loss is nan"});
}

TEST_CASE("dist: the reducer of a process alone leaves every gradient as backward made it") {
  const Tensor a = parameter({3}, 1), b = parameter({2, 2}, 2), c = parameter({5}, 3);
  loss_of(a, b, c).backward();
  const std::vector<float> ga = a.grad().to_vector<float>(), gb = b.grad().to_vector<float>(),
                           gc = c.grad().to_vector<float>();
  for (const int64_t bucket_bytes : {int64_t(16), dist::GradientReducer::kBucketBytes}) {
    CAPTURE(bucket_bytes);
    dist::GradientReducer reducer(dist::World(), {a, b, c}, bucket_bytes);
    // Reverse order, up to 16 bytes each: [c] (20 bytes, alone), [b] (16), [a] (12); or one bucket.
    CHECK(reducer.buckets() == (bucket_bytes == 16 ? 3 : 1));
    CHECK(reducer.bytes_per_step() == (12 + 3) * 4);  // 12 gradient elements and 3 slots
    for (int step = 0; step < 2; ++step) {  // the buckets are refilled every step
      for (const Tensor& p : {a, b, c}) p.zero_grad();
      loss_of(a, b, c).backward();
      reducer.finish();
      CHECK(a.grad().to_vector<float>() == ga);
      CHECK(b.grad().to_vector<float>() == gb);
      CHECK(c.grad().to_vector<float>() == gc);
    }
  }
}

TEST_CASE("dist: a parameter that no rank used keeps no gradient, as in one process") {
  const Tensor a = parameter({3}, 1), b = parameter({2, 2}, 2), c = parameter({5}, 3), unused = parameter({2}, 4);
  dist::GradientReducer reducer(dist::World(), {a, b, unused, c}, 16);
  loss_of(a, b, c).backward();
  reducer.finish();
  CHECK(a.grad().defined());
  CHECK(c.grad().defined());
  CHECK(!unused.grad().defined());
}

TEST_CASE("dist: the reducer's errors") {
  const Tensor a = parameter({3}, 1), b = parameter({2, 2}, 2), c = parameter({5}, 3);
  SUBCASE("one backward per finish()") {
    dist::GradientReducer reducer(dist::World(), {a, b, c});
    loss_of(a, b, c).backward();
    check_error([&] { loss_of(a, b, c).backward(); }, {"GradientReducer", "second gradient before finish()"});
  }
  SUBCASE("bad parameters") {
    Tensor wide = from_vector<double>({1, 2}, {2});
    wide.set_requires_grad(true);
    check_error([&] { dist::GradientReducer(dist::World(), {a, wide}); },
                {"GradientReducer", "parameter 1 ((2,), float64)", "float32 tensor that requires grad"});
    const Tensor constant = from_vector<float>({1, 2}, {2});
    check_error([&] { dist::GradientReducer(dist::World(), {constant}); }, {"parameter 0", "requires grad"});
    check_error([&] { dist::GradientReducer(dist::World(), {}); }, {"GradientReducer", "no parameters"});
    check_error([&] { dist::GradientReducer(dist::World(), {a}, 0); }, {"bucket_bytes must be positive, got 0"});
  }
}

TEST_CASE("dist: --distributed needs MPI in the build") {
  train::TrainOptions o;
  o.distributed = true;
  if (dist::has_mpi()) {
    CHECK_NOTHROW(train::check_options(o));
  } else {
    check_error([&] { train::check_options(o); }, {"--distributed", "this build has no MPI", "libopenmpi-dev"});
  }
}
