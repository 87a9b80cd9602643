#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

namespace tapestry::optim {

// ---- Schedule ----

Schedule::Schedule(const char* name, Optimizer& optimizer)
    : name_(name), optimizer_(optimizer), base_lr_(optimizer.lr()), lr_(optimizer.lr()) {}

void Schedule::set_lr(double lr) {
  optimizer_.set_lr(lr);
  lr_ = lr;
}

ScheduleState Schedule::state_dict() const {
  ScheduleState state;
  state.schedule = name_;
  state.steps = steps_;
  state.base_lr = base_lr_;
  state.lr = lr_;
  state.best = best_;
  state.bad_steps = bad_steps_;
  return state;
}

void Schedule::load_state_dict(const ScheduleState& state) {
  TP_CHECK(state.schedule == name_, name_, "cannot load a state saved by ",
           state.schedule.empty() ? std::string("(unnamed)") : state.schedule);
  TP_CHECK(state.steps >= 0 && state.bad_steps >= 0, name_, "negative counts in the state: steps ",
           state.steps, ", bad_steps ", state.bad_steps);
  TP_CHECK(!std::isnan(state.best), name_, "the state's best metric is NaN");
  detail::check_lr(name_, state.base_lr);
  detail::check_lr(name_, state.lr);
  set_lr(state.lr);
  steps_ = state.steps;
  base_lr_ = state.base_lr;
  best_ = state.best;
  bad_steps_ = state.bad_steps;
}

// ---- StepSchedule ----

void StepSchedule::start() { set_lr(rate(1)); }

void StepSchedule::step() {
  ++steps_;
  set_lr(rate(steps_ + 1));
}

namespace {
void check_step(const char* op, int64_t s) { TP_CHECK(s >= 1, op, "steps count from 1, got ", s); }
}  // namespace

ConstantSchedule::ConstantSchedule(Optimizer& optimizer) : StepSchedule("ConstantSchedule", optimizer) {
  start();
}

double ConstantSchedule::rate(int64_t s) const {
  check_step(name_, s);
  return base_lr_;
}

InverseSqrtSchedule::InverseSqrtSchedule(Optimizer& optimizer, int64_t warmup)
    : StepSchedule("InverseSqrtSchedule", optimizer), warmup_(warmup) {
  TP_CHECK(warmup >= 0, name_, "warmup must be >= 0, got ", warmup);
  start();
}

double InverseSqrtSchedule::rate(int64_t s) const {
  check_step(name_, s);
  // lr · min(s/W, √(W/s)); W = 0 behaves as W = 1 (no warmup).
  const double w = static_cast<double>(std::max<int64_t>(warmup_, 1));
  const double step = static_cast<double>(s);
  return base_lr_ * std::min(step / w, std::sqrt(w / step));
}

CosineSchedule::CosineSchedule(Optimizer& optimizer, int64_t total_steps, double min_lr, int64_t warmup)
    : StepSchedule("CosineSchedule", optimizer), total_steps_(total_steps), min_lr_(min_lr), warmup_(warmup) {
  TP_CHECK(warmup >= 0, name_, "warmup must be >= 0, got ", warmup);
  TP_CHECK(total_steps > warmup, name_, "total_steps must exceed warmup, got total_steps ", total_steps,
           " and warmup ", warmup);
  TP_CHECK(std::isfinite(min_lr) && min_lr >= 0 && min_lr <= base_lr_, name_,
           "min_lr must be in [0, lr] = [0, ", base_lr_, "], got ", min_lr);
  start();
}

double CosineSchedule::rate(int64_t s) const {
  check_step(name_, s);
  // s ≤ W: lr·s/W.  s > W: min_lr + (lr − min_lr)(1 + cos(πp))/2, p = min(1, (s − W)/(T − W)).
  if (s <= warmup_) return base_lr_ * static_cast<double>(s) / static_cast<double>(warmup_);
  const double p = std::min(1.0, static_cast<double>(s - warmup_) / static_cast<double>(total_steps_ - warmup_));
  const double pi = std::acos(-1.0);
  return min_lr_ + (base_lr_ - min_lr_) * (1.0 + std::cos(pi * p)) / 2.0;
}

// ---- ReduceOnPlateau ----

ReduceOnPlateau::ReduceOnPlateau(Optimizer& optimizer, ReduceOnPlateauOptions options)
    : Schedule("ReduceOnPlateau", optimizer), options_(options) {
  TP_CHECK(options.factor > 0 && options.factor < 1, name_, "factor must be in (0, 1), got ", options.factor);
  TP_CHECK(options.patience >= 0, name_, "patience must be >= 0, got ", options.patience);
  detail::check_non_negative(name_, "min_lr", options.min_lr);
}

void ReduceOnPlateau::step(double metric) {
  ++steps_;
  if (metric < best_) {  // false for NaN
    best_ = metric;
    bad_steps_ = 0;
    return;
  }
  if (++bad_steps_ <= options_.patience) return;
  bad_steps_ = 0;
  const double reduced = std::max(lr_ * options_.factor, options_.min_lr);
  if (reduced < lr_) set_lr(reduced);
}

}  // namespace tapestry::optim
