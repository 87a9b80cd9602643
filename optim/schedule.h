/// @file
/// Learning-rate schedules. A schedule drives one optimizer's learning rate:
///
///   optim::Adam adam(params, {/*lr=*/1e-3});
///   optim::InverseSqrtSchedule schedule(adam, /*warmup=*/4000);  // sets adam's lr for step 1
///   for (...) {
///     ...backward...;
///     adam.step();
///     schedule.step();  // sets the lr for the next optimizer step
///   }
///
/// Steps are counted from 1: step s is the s-th optimizer step, and rate(s) the learning rate it uses.
/// Construction sets the optimizer's lr to rate(1); the k-th call of step() sets it to rate(k + 1).
/// The peak rate `lr` in the formulas below is the optimizer's learning rate when the schedule is
/// built. ReduceOnPlateau is fed a metric instead (step(metric)). A schedule holds a reference to its
/// optimizer, which must outlive it.
///
/// A loop that drives any schedule without knowing its kind (train/trainer.h) calls the hooks instead:
/// on_step() after every optimizer step and on_evaluation(metric) after every evaluation; each schedule
/// acts on the one it is stepped by and ignores the other.
///
/// With parameter groups (optim/param_groups.h) a schedule sets every group's rate, as PyTorch's
/// torch.optim.lr_scheduler does: each group keeps the rate it had when the schedule was built (its
/// base rate, torch's `initial_lr`), and the formula is applied to it. For the step schedules that is
/// the group's base rate times the schedule's factor (inverse-sqrt: √(W/s) after warmup; cosine
/// without min_lr), so the groups' rates keep their proportions; cosine's min_lr and plateau's
/// min_lr are one floor for every group, as torch's eta_min and a scalar min_lr are. Build the
/// schedule after the optimizer's groups are set. lr() and base_lr() are the default group's.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace tapestry::optim {

/// Everything a schedule's step() changes, for checkpoints: restoring it into a schedule built with
/// the same options continues bit for bit (and sets the optimizer's lr to the restored rate).
struct ScheduleState {
  std::string schedule;    ///< name() of the schedule that saved it
  int64_t steps = 0;       ///< step() calls so far (ReduceOnPlateau: metrics seen)
  double base_lr = 0.0;    ///< the peak rate the formula scales (the default group's)
  double lr = 0.0;         ///< the rate in force (the default group's)
  /// Parameter groups 1, 2, ...: each one's base rate; empty without groups (and in states saved before
  /// groups existed).
  std::vector<double> group_base_lrs;
  std::vector<double> group_lrs;  ///< parameter groups 1, 2, ...: each one's rate in force
  double best = std::numeric_limits<double>::infinity();  ///< ReduceOnPlateau: lowest metric so far
  int64_t bad_steps = 0;   ///< ReduceOnPlateau: consecutive metrics that did not improve on best
};

/// The base of the learning-rate schedules: it sets the optimizer's learning rate as it steps
/// (see the top of this file).
class Schedule {
 public:
  virtual ~Schedule() = default;
  Schedule(const Schedule&) = delete;
  Schedule& operator=(const Schedule&) = delete;

  const char* name() const { return name_; }  ///< "constant", "inverse-sqrt", "cosine" or "plateau"
  /// The default group's rate in force (also the optimizer's, unless someone else changed it).
  double lr() const { return lrs_[0]; }
  /// The default group's learning rate when the schedule was made.
  double base_lr() const { return base_lrs_[0]; }
  /// Each parameter group's rate in force, the default group first (Optimizer::param_groups() order).
  const std::vector<double>& lrs() const { return lrs_; }
  /// Each parameter group's learning rate when the schedule was made, the default group first.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  int64_t steps() const { return steps_; }  ///< steps taken

  /// After each optimizer step: a StepSchedule steps (step()); the others do nothing.
  virtual void on_step() {}
  /// After each evaluation, with its metric oriented so that lower is better: ReduceOnPlateau steps
  /// (step(metric)); the others do nothing.
  virtual void on_evaluation(double /*metric*/) {}

  ScheduleState state_dict() const;  ///< the state a checkpoint saves
  /// Refuses another schedule's state, and one for another number of parameter groups; sets every
  /// group's learning rate in the optimizer to the restored rate. A refused state changes nothing.
  void load_state_dict(const ScheduleState& state);

 protected:
  /// Schedules `optimizer`, whose groups' current rates are base_lrs().
  Schedule(const char* name, Optimizer& optimizer);
  void set_lr(size_t group, double lr);  ///< group `group`'s rate, here and in the optimizer
  /// Writes a derived schedule's own state (ReduceOnPlateau's best metric) into `state`; the base's
  /// fields are written already, and the others keep ScheduleState's defaults.
  virtual void save_own_state(ScheduleState& /*state*/) const {}
  /// Checks, then restores, a derived schedule's own part of `state`; load_state_dict calls it after
  /// checking its own fields and before changing any, so a throw here leaves the schedule as it was.
  virtual void load_own_state(const ScheduleState& /*state*/) {}

  const char* name_;  ///< see name()
  Optimizer& optimizer_;  ///< the optimizer whose rate it sets
  std::vector<double> base_lrs_;  ///< see base_lrs()
  std::vector<double> lrs_;  ///< see lrs()
  int64_t steps_ = 0;  ///< see steps()
};

/// A schedule that is a function of the step number.
class StepSchedule : public Schedule {
 public:
  /// Advances one step: each group's lr becomes its rate of step steps() + 1.
  void step();
  void on_step() override { step(); }  ///< step()
  /// The default group's learning rate of optimizer step s ≥ 1: group_rate(s, base_lr()).
  double rate(int64_t s) const { return group_rate(s, base_lr()); }
  /// The learning rate of optimizer step s ≥ 1 for a group whose base rate is `base_lr` (the formulas
  /// below with lr = base_lr).
  virtual double group_rate(int64_t s, double base_lr) const = 0;

 protected:
  using Schedule::Schedule;  ///< the base's constructor
  void start();  ///< sets each group's rate of step 1; called by the derived constructor once its options are set
};

/// rate(s) = lr.
class ConstantSchedule : public StepSchedule {
 public:
  /// Keeps the optimizer's rate.
  explicit ConstantSchedule(Optimizer& optimizer);
  double group_rate(int64_t s, double base_lr) const override;
};

/// Linear warmup, then decay with the inverse square root of the step (Vaswani et al. 2017, §5.3,
/// with the peak rate lr in place of d_model^−0.5·warmup^−0.5):
///   rate(s) = lr · min(s / W, √(W / s))
/// rising linearly to lr at s = W, then lr·√(W/s). W = 0 means no warmup and behaves as W = 1:
/// rate(s) = lr / √s. W ≥ 0.
class InverseSqrtSchedule : public StepSchedule {
 public:
  /// W = warmup; throws Error when negative.
  InverseSqrtSchedule(Optimizer& optimizer, int64_t warmup);
  double group_rate(int64_t s, double base_lr) const override;
  int64_t warmup() const { return warmup_; }  ///< W

 private:
  int64_t warmup_;
};

/// Optional linear warmup over W steps, then cosine decay from lr to min_lr, reached at step T:
///   rate(s) = lr · s / W                                           for s ≤ W
///   rate(s) = min_lr + (lr − min_lr) · (1 + cos(π·p)) / 2,  p = min(1, (s − W) / (T − W))   for s > W
/// and min_lr from step T on. 0 ≤ W < T, 0 ≤ min_lr ≤ lr (the lr of every parameter group).
class CosineSchedule : public StepSchedule {
 public:
  /// Throws Error for settings out of range (above).
  CosineSchedule(Optimizer& optimizer, int64_t total_steps, double min_lr = 0.0, int64_t warmup = 0);
  double group_rate(int64_t s, double base_lr) const override;

 private:
  int64_t total_steps_;
  double min_lr_;
  int64_t warmup_;
};

/// Settings of ReduceOnPlateau.
struct ReduceOnPlateauOptions {
  double factor = 0.1;   ///< in (0, 1): the rate is multiplied by it on a plateau
  int64_t patience = 10;  ///< ≥ 0: bad metrics tolerated before reducing
  double min_lr = 0.0;   ///< ≥ 0: the rate never goes below it
};

/// Mode "min": a metric improves when it is strictly lower than the best so far. Each step(metric):
///   metric < best:  best ← metric, bad ← 0
///   otherwise:      bad ← bad + 1; if bad > patience: lr ← max(lr·factor, min_lr), bad ← 0
/// (with parameter groups, each group's lr, all at once)
/// so the rate drops on the (patience + 1)-th consecutive metric without improvement (as in PyTorch's
/// ReduceLROnPlateau with threshold 0 and no cooldown). A NaN metric never improves. The starting
/// rate is the optimizer's; a group whose rate is already below min_lr is left alone.
class ReduceOnPlateau : public Schedule {
 public:
  /// Throws Error for options out of range.
  explicit ReduceOnPlateau(Optimizer& optimizer, ReduceOnPlateauOptions options = {});
  void step(double metric);  ///< one evaluation's metric (lower is better), as above
  void on_evaluation(double metric) override { step(metric); }  ///< step(metric)
  double best() const { return best_; }  ///< the best metric so far (+∞ before the first)
  int64_t bad_steps() const { return bad_steps_; }  ///< consecutive metrics without improvement

 protected:
  void save_own_state(ScheduleState& state) const override;  ///< best and bad_steps
  void load_own_state(const ScheduleState& state) override;  ///< refuses a NaN best and negative bad_steps

 private:
  ReduceOnPlateauOptions options_;
  double best_ = std::numeric_limits<double>::infinity();  ///< see best()
  int64_t bad_steps_ = 0;  ///< see bad_steps()
};

}  // namespace tapestry::optim
