// Learning-rate schedules: values against their formulas, the optimizer's lr following them,
// reduce-on-plateau's counting, exact resume, bad input.
#include <cmath>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

Tensor weight() {
  Tensor w = zeros({2}, {DType::Float64});
  w.set_requires_grad(true);
  return w;
}

const double kPi = std::acos(-1.0);

}  // namespace

TEST_CASE("ConstantSchedule keeps the optimizer's rate") {
  optim::SGD sgd({weight()}, {0.3});
  optim::ConstantSchedule schedule(sgd);
  for (int64_t s = 1; s <= 5; ++s) {
    CHECK(sgd.lr() == 0.3);
    CHECK(schedule.rate(s) == 0.3);
    schedule.step();
  }
  CHECK(schedule.steps() == 5);
}

TEST_CASE("InverseSqrtSchedule: lr·min(s/W, √(W/s))") {
  optim::Adam adam({weight()}, {2.0});
  optim::InverseSqrtSchedule schedule(adam, 4);
  CHECK(schedule.rate(1) == 0.5);   // 2·1/4
  CHECK(schedule.rate(2) == 1.0);
  CHECK(schedule.rate(4) == 2.0);   // the peak at s = W
  CHECK(schedule.rate(16) == 1.0);  // 2·√(4/16)
  CHECK(schedule.rate(9) == doctest::Approx(2.0 * std::sqrt(4.0 / 9.0)).epsilon(1e-15));
  // The optimizer's lr follows: rate(1) at construction, rate(k + 1) after the k-th step().
  CHECK(adam.lr() == 0.5);
  for (int64_t k = 1; k <= 20; ++k) {
    schedule.step();
    CHECK(adam.lr() == schedule.rate(k + 1));
    CHECK(schedule.lr() == adam.lr());
  }
  // No warmup: W = 0 acts as W = 1, lr/√s from the first step.
  optim::Adam other({weight()}, {2.0});
  optim::InverseSqrtSchedule no_warmup(other, 0);
  CHECK(other.lr() == 2.0);
  CHECK(no_warmup.rate(4) == 1.0);
  CHECK(no_warmup.rate(25) == doctest::Approx(0.4).epsilon(1e-15));
}

TEST_CASE("CosineSchedule: warmup, then min + (lr − min)(1 + cos(π(s − W)/(T − W)))/2, then min") {
  optim::SGD sgd({weight()}, {1.0});
  optim::CosineSchedule schedule(sgd, /*total_steps=*/10, /*min_lr=*/0.1, /*warmup=*/2);
  CHECK(sgd.lr() == 0.5);  // s = 1: 1·1/2
  CHECK(schedule.rate(2) == 1.0);
  CHECK(schedule.rate(6) == doctest::Approx(0.55).epsilon(1e-15));  // p = 1/2
  CHECK(schedule.rate(4) == doctest::Approx(0.1 + 0.9 * (1 + std::cos(kPi * 0.25)) / 2).epsilon(1e-15));
  CHECK(schedule.rate(10) == doctest::Approx(0.1).epsilon(1e-15));
  CHECK(schedule.rate(11) == doctest::Approx(0.1).epsilon(1e-15));
  CHECK(schedule.rate(1000) == doctest::Approx(0.1).epsilon(1e-15));
  for (int64_t k = 1; k <= 12; ++k) {
    schedule.step();
    CHECK(sgd.lr() == schedule.rate(k + 1));
  }
  // Without warmup the decay starts at step 1.
  optim::SGD other({weight()}, {1.0});
  optim::CosineSchedule no_warmup(other, 4);
  CHECK(other.lr() == doctest::Approx((1 + std::cos(kPi / 4)) / 2).epsilon(1e-15));
  CHECK(no_warmup.rate(2) == doctest::Approx(0.5).epsilon(1e-15));
  CHECK(no_warmup.rate(4) == doctest::Approx(0.0).epsilon(1e-15));
}

TEST_CASE("ReduceOnPlateau reduces on the (patience + 1)-th bad metric and stops at min_lr") {
  optim::Adam adam({weight()}, {1.0});
  optim::ReduceOnPlateau schedule(adam, {/*factor=*/0.5, /*patience=*/2, /*min_lr=*/0.3});
  const auto feed = [&](double metric, double lr_after, int64_t bad_after) {
    schedule.step(metric);
    INFO("metric " << metric);
    CHECK(adam.lr() == lr_after);
    CHECK(schedule.bad_steps() == bad_after);
  };
  feed(1.0, 1.0, 0);  // the first metric is the best so far
  feed(1.0, 1.0, 1);  // equal is not better
  feed(1.1, 1.0, 2);  // patience = 2 bad metrics tolerated
  feed(1.2, 0.5, 0);  // the third: reduce, reset the count
  feed(0.9, 0.5, 0);  // improves
  CHECK(schedule.best() == 0.9);
  feed(0.95, 0.5, 1);
  feed(std::nan(""), 0.5, 2);  // NaN never improves
  feed(0.9, 0.3, 0);  // max(0.5·0.5, 0.3)
  feed(1.0, 0.3, 1);
  feed(1.0, 0.3, 2);
  feed(1.0, 0.3, 0);  // at min_lr: stays
  CHECK(schedule.steps() == 11);
  CHECK(schedule.best() == 0.9);

  // patience = 0: every bad metric reduces.
  optim::SGD sgd({weight()}, {1.0});
  optim::ReduceOnPlateau eager(sgd, {0.1, 0, 0.0});
  eager.step(2.0);
  eager.step(3.0);
  CHECK(sgd.lr() == doctest::Approx(0.1).epsilon(1e-15));
  eager.step(3.0);
  CHECK(sgd.lr() == doctest::Approx(0.01).epsilon(1e-15));
}

TEST_CASE("schedule hooks: a step schedule steps on on_step, a plateau on on_evaluation, each ignores the other") {
  // Driven through the base class, as the Trainer drives them, each equals its own step().
  optim::SGD sgd({weight()}, {1.0}), sgd_direct({weight()}, {1.0});
  optim::InverseSqrtSchedule hooked(sgd, 2), direct(sgd_direct, 2);
  optim::Schedule& step_schedule = hooked;
  for (int k = 0; k < 4; ++k) {
    step_schedule.on_evaluation(1.0 + k);  // ignored
    step_schedule.on_step();
    direct.step();
    CHECK(sgd.lr() == sgd_direct.lr());
  }
  CHECK(hooked.steps() == 4);

  optim::SGD plateau_sgd({weight()}, {1.0}), direct_plateau_sgd({weight()}, {1.0});
  optim::ReduceOnPlateau plateau(plateau_sgd, {/*factor=*/0.5, /*patience=*/0, /*min_lr=*/0.0});
  optim::ReduceOnPlateau plateau_direct(direct_plateau_sgd, {0.5, 0, 0.0});
  optim::Schedule& metric_schedule = plateau;
  for (double metric : {1.0, 2.0, 0.5, 0.7}) {
    metric_schedule.on_step();  // ignored
    metric_schedule.on_evaluation(metric);
    plateau_direct.step(metric);
    CHECK(plateau_sgd.lr() == direct_plateau_sgd.lr());
  }
  CHECK(plateau.steps() == 4);
  CHECK(plateau.best() == 0.5);
  CHECK(plateau_sgd.lr() == 0.25);
}

TEST_CASE("schedule state: only ReduceOnPlateau keeps a best metric; a refused state changes nothing") {
  optim::SGD sgd({weight()}, {1.0});
  optim::CosineSchedule cosine(sgd, 10);
  cosine.step();
  const optim::ScheduleState saved = cosine.state_dict();
  CHECK(std::isinf(saved.best));  // the defaults: what checkpoints have always recorded for step schedules
  CHECK(saved.bad_steps == 0);

  optim::SGD sgd2({weight()}, {1.0});
  optim::ReduceOnPlateau plateau(sgd2, {0.5, 0, 0.0});
  plateau.step(1.0);
  plateau.step(2.0);  // reduces to 0.5
  optim::ScheduleState bad = plateau.state_dict();
  bad.lr = 0.125;
  bad.best = std::nan("");
  check_error([&] { plateau.load_state_dict(bad); }, {"ReduceOnPlateau", "NaN"});
  CHECK(plateau.lr() == 0.5);
  CHECK(sgd2.lr() == 0.5);
  CHECK(plateau.best() == 1.0);
}

TEST_CASE("schedules resume exactly from a saved state") {
  // A cosine schedule and an optimizer saved together mid-warmup...
  Tensor w = weight();
  optim::Adam adam({w}, {0.1});
  optim::CosineSchedule cosine(adam, 20, 0.01, 5);
  for (int k = 0; k < 3; ++k) cosine.step();
  const optim::ScheduleState saved = cosine.state_dict();
  const optim::OptimizerState saved_adam = adam.state_dict();
  std::vector<double> expected;
  for (int k = 0; k < 10; ++k) {
    cosine.step();
    expected.push_back(adam.lr());
  }
  // ... restored into fresh objects (in either order) give the same rates.
  Tensor w2 = weight();
  optim::Adam adam2({w2}, {0.1});
  optim::CosineSchedule cosine2(adam2, 20, 0.01, 5);
  cosine2.load_state_dict(saved);
  adam2.load_state_dict(saved_adam);
  CHECK(adam2.lr() == saved.lr);
  CHECK(cosine2.steps() == 3);
  for (int k = 0; k < 10; ++k) {
    cosine2.step();
    CHECK(adam2.lr() == expected[static_cast<size_t>(k)]);
  }

  // Reduce-on-plateau keeps its best metric and bad count.
  const std::vector<double> metrics = {5, 4, 4.5, 4.2, 4.1, 4.3, 3.9, 4, 4, 4, 4, 4};
  optim::SGD sgd({weight()}, {1.0});
  optim::ReduceOnPlateau plateau(sgd, {0.5, 1, 0.0});
  for (size_t i = 0; i < 4; ++i) plateau.step(metrics[i]);
  const optim::ScheduleState mid = plateau.state_dict();
  CHECK(mid.best == 4.0);
  CHECK(mid.bad_steps == 0);  // 4.5 and 4.2 were bad: reduced at 4.2, count reset
  CHECK(mid.lr == 0.5);
  std::vector<double> lrs;
  for (size_t i = 4; i < metrics.size(); ++i) {
    plateau.step(metrics[i]);
    lrs.push_back(sgd.lr());
  }
  optim::SGD sgd2({weight()}, {1.0});
  optim::ReduceOnPlateau plateau2(sgd2, {0.5, 1, 0.0});
  plateau2.load_state_dict(mid);
  CHECK(sgd2.lr() == 0.5);
  for (size_t i = 4; i < metrics.size(); ++i) {
    plateau2.step(metrics[i]);
    CHECK(sgd2.lr() == lrs[i - 4]);
  }
  CHECK(plateau2.state_dict().bad_steps == plateau.state_dict().bad_steps);
  CHECK(plateau2.best() == plateau.best());

  check_error([&] { cosine2.load_state_dict(mid); }, {"CosineSchedule", "saved by ReduceOnPlateau"});
  optim::ScheduleState negative = mid;
  negative.bad_steps = -1;
  check_error([&] { plateau2.load_state_dict(negative); }, {"ReduceOnPlateau", "negative"});
}

TEST_CASE("schedules refuse bad options, naming themselves") {
  optim::SGD sgd({weight()}, {1.0});
  check_error([&] { optim::InverseSqrtSchedule(sgd, -1); }, {"InverseSqrtSchedule", "warmup", ">= 0", "-1"});
  check_error([&] { optim::CosineSchedule(sgd, 10, 0.0, -2); }, {"CosineSchedule", "warmup", ">= 0"});
  check_error([&] { optim::CosineSchedule(sgd, 5, 0.0, 5); },
              {"CosineSchedule", "total_steps", "exceed warmup"});
  check_error([&] { optim::CosineSchedule(sgd, 10, 2.0); }, {"CosineSchedule", "min_lr", "[0, 1]"});
  check_error([&] { optim::CosineSchedule(sgd, 10, -0.5); }, {"CosineSchedule", "min_lr"});
  check_error([&] { optim::ReduceOnPlateau(sgd, {1.0}); }, {"ReduceOnPlateau", "factor", "(0, 1)"});
  check_error([&] { optim::ReduceOnPlateau(sgd, {0.0}); }, {"ReduceOnPlateau", "factor"});
  check_error([&] { optim::ReduceOnPlateau(sgd, {0.5, -1}); }, {"ReduceOnPlateau", "patience", ">= 0"});
  check_error([&] { optim::ReduceOnPlateau(sgd, {0.5, 1, -1e-3}); }, {"ReduceOnPlateau", "min_lr"});
  optim::ConstantSchedule constant(sgd);
  check_error([&] { constant.rate(0); }, {"ConstantSchedule", "from 1"});
  // A refused schedule left the optimizer's rate alone.
  CHECK(sgd.lr() == 1.0);
}
