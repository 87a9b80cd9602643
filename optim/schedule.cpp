#include "optim/schedule.h"

#include <algorithm>
#include <cmath>

namespace tapestry::optim {

// ---- Schedule ----

Schedule::Schedule(const char* name, Optimizer& optimizer) : name_(name), optimizer_(optimizer) {
  for (const ParamGroup& group : optimizer.param_groups()) base_lrs_.push_back(group.lr);
  lrs_ = base_lrs_;
}

void Schedule::set_lr(size_t group, double lr) {
  optimizer_.set_group_lr(group, lr);
  lrs_[group] = lr;
}

ScheduleState Schedule::state_dict() const {
  ScheduleState state;
  state.schedule = name_;
  state.steps = steps_;
  state.base_lr = base_lrs_[0];
  state.lr = lrs_[0];
  state.group_base_lrs.assign(base_lrs_.begin() + 1, base_lrs_.end());
  state.group_lrs.assign(lrs_.begin() + 1, lrs_.end());
  save_own_state(state);
  return state;
}

void Schedule::load_state_dict(const ScheduleState& state) {
  TP_CHECK(state.schedule == name_, name_, "cannot load a state saved by ",
           state.schedule.empty() ? std::string("(unnamed)") : state.schedule);
  TP_CHECK(state.steps >= 0, name_, "negative counts in the state: steps ", state.steps);
  TP_CHECK(state.group_base_lrs.size() + 1 == lrs_.size() && state.group_lrs.size() + 1 == lrs_.size(), name_,
           "the state has rates for ", state.group_base_lrs.size() + 1, " and ", state.group_lrs.size() + 1,
           " parameter groups, the optimizer has ", lrs_.size());
  std::vector<double> base_lrs{state.base_lr}, lrs{state.lr};
  base_lrs.insert(base_lrs.end(), state.group_base_lrs.begin(), state.group_base_lrs.end());
  lrs.insert(lrs.end(), state.group_lrs.begin(), state.group_lrs.end());
  for (size_t g = 0; g < lrs.size(); ++g) {
    detail::check_lr(name_, base_lrs[g]);
    detail::check_lr(name_, lrs[g]);
  }
  load_own_state(state);
  for (size_t g = 0; g < lrs.size(); ++g) set_lr(g, lrs[g]);
  steps_ = state.steps;
  base_lrs_ = std::move(base_lrs);
}

// ---- StepSchedule ----

void StepSchedule::start() {
  for (size_t g = 0; g < base_lrs_.size(); ++g) set_lr(g, group_rate(1, base_lrs_[g]));
}

void StepSchedule::step() {
  ++steps_;
  for (size_t g = 0; g < base_lrs_.size(); ++g) set_lr(g, group_rate(steps_ + 1, base_lrs_[g]));
}

namespace {
void check_step(const char* op, int64_t s) { TP_CHECK(s >= 1, op, "steps count from 1, got ", s); }
}  // namespace

ConstantSchedule::ConstantSchedule(Optimizer& optimizer) : StepSchedule("ConstantSchedule", optimizer) {
  start();
}

double ConstantSchedule::group_rate(int64_t s, double base_lr) const {
  check_step(name_, s);
  return base_lr;
}

InverseSqrtSchedule::InverseSqrtSchedule(Optimizer& optimizer, int64_t warmup)
    : StepSchedule("InverseSqrtSchedule", optimizer), warmup_(warmup) {
  TP_CHECK(warmup >= 0, name_, "warmup must be >= 0, got ", warmup);
  start();
}

double InverseSqrtSchedule::group_rate(int64_t s, double base_lr) const {
  check_step(name_, s);
  // lr · min(s/W, √(W/s)); W = 0 behaves as W = 1 (no warmup).
  const double w = static_cast<double>(std::max<int64_t>(warmup_, 1));
  const double step = static_cast<double>(s);
  return base_lr * std::min(step / w, std::sqrt(w / step));
}

CosineSchedule::CosineSchedule(Optimizer& optimizer, int64_t total_steps, double min_lr, int64_t warmup)
    : StepSchedule("CosineSchedule", optimizer), total_steps_(total_steps), min_lr_(min_lr), warmup_(warmup) {
  TP_CHECK(warmup >= 0, name_, "warmup must be >= 0, got ", warmup);
  TP_CHECK(total_steps > warmup, name_, "total_steps must exceed warmup, got total_steps ", total_steps,
           " and warmup ", warmup);
  TP_CHECK(std::isfinite(min_lr) && min_lr >= 0, name_, "min_lr must be finite and >= 0, got ", min_lr);
  for (size_t g = 0; g < base_lrs_.size(); ++g)
    TP_CHECK(min_lr <= base_lrs_[g], name_, "min_lr must be in [0, lr] = [0, ", base_lrs_[g], "]",
             g ? " (the lr of parameter group " + std::to_string(g) + ")" : std::string(), ", got ", min_lr);
  start();
}

double CosineSchedule::group_rate(int64_t s, double base_lr) const {
  check_step(name_, s);
  // s ≤ W: lr·s/W.  s > W: min_lr + (lr − min_lr)(1 + cos(πp))/2, p = min(1, (s − W)/(T − W)).
  if (s <= warmup_) return base_lr * static_cast<double>(s) / static_cast<double>(warmup_);
  const double p = std::min(1.0, static_cast<double>(s - warmup_) / static_cast<double>(total_steps_ - warmup_));
  const double pi = std::acos(-1.0);
  return min_lr_ + (base_lr - min_lr_) * (1.0 + std::cos(pi * p)) / 2.0;
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
  for (size_t g = 0; g < lrs_.size(); ++g) {
    const double reduced = std::max(lrs_[g] * options_.factor, options_.min_lr);
    if (reduced < lrs_[g]) set_lr(g, reduced);
  }
}

void ReduceOnPlateau::save_own_state(ScheduleState& state) const {
  state.best = best_;
  state.bad_steps = bad_steps_;
}

void ReduceOnPlateau::load_own_state(const ScheduleState& state) {
  TP_CHECK(state.bad_steps >= 0, name_, "negative counts in the state: bad_steps ", state.bad_steps);
  TP_CHECK(!std::isnan(state.best), name_, "the state's best metric is NaN");
  best_ = state.best;
  bad_steps_ = state.bad_steps;
}

}  // namespace tapestry::optim
