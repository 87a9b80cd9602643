/// @file
/// The parts of one Trainer::run (train/trainer.h), so that Trainer::train reads as its recipe:
///
///   TrainingRun  the task with its optimizer, schedule and training generator, built fresh or
///                restored from --resume; it takes training steps, evaluates, logs, keeps the best
///                evaluation, saves checkpoints (train/run_state.h) and writes the report
///   StepMeter    the training steps between evaluations: their mean loss, the rate, and the progress
///                line of smoothed losses and task metrics
///   Best         the best evaluation so far and the evaluations since it, checkpointed as "trainer"
///
/// Apps use the Trainer; these are its pieces.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>

#include "core/cuda.h"
#include "core/device.h"
#include "core/profiler.h"
#include "core/random.h"
#include "dist/reducer.h"
#include "dist/world.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "train/progress.h"
#include "train/run_state.h"
#include "train/trainer.h"

namespace tapestry::train {

/// The best evaluation so far and how many evaluations since it (for --patience); checkpointed.
struct Best {
  BestMetric metric;  ///< the metric compared, and which way is better
  double value = std::numeric_limits<double>::quiet_NaN();  ///< the best value (NaN before the first)
  int64_t step = 0;  ///< the step it was reached at
  int64_t since = 0;  ///< evaluations since it

  /// Whether `v` at step `at` is a new best (a NaN never is); an evaluation that is not counts in `since`.
  bool update(double v, int64_t at);
  /// {"metric", "step", "since", "value"}, without "value" while there is no best: the checkpoint's "trainer".
  nlohmann::json state() const;
  /// Restores state(); the state of another metric is ignored, as its best means nothing here.
  void load(const nlohmann::json& state);
};

/// The training steps from the first of this process to --steps: the mean loss between evaluations,
/// the items per second, and (when shown) the progress line, whose losses and task metrics are
/// exponentially smoothed.
class StepMeter {
 public:
  /// A progress line labelled `label` over `total` steps counting `unit` when `show`, else none.
  StepMeter(bool show, const std::string& label, int64_t total, const std::string& unit);
  /// Counts `step`, this process's `run_step`-th (1-based).
  void add(int64_t run_step, const Step& step);
  /// The mean loss of the steps since the previous call (or the first step); starts a new interval.
  double take_train_loss();
  /// Shows an evaluation's metrics at `step` on a line of their own (when the progress line shows).
  void show_evaluation(int64_t step, const Metrics& metrics, double train_loss);
  /// Ends the progress line; returns the items per second since construction.
  double finish();

 private:
  std::optional<Progress> progress_;
  std::chrono::steady_clock::time_point start_;
  double interval_loss_ = 0;  // Σ loss since take_train_loss
  int64_t interval_steps_ = 0;
  double items_ = 0;
  double smooth_loss_ = std::numeric_limits<double>::quiet_NaN();
  Metrics smooth_;  // the task's progress metrics, smoothed
};

/// --tf32: the float32 matmul mode of the run's GPU set to TensorFloat-32 for the scope's lifetime,
/// then restored (core/cuda.h). Off, it does nothing; on the CPU it is refused.
class Float32MatmulScope {
 public:
  /// With `tf32`, sets `device`'s float32 matmuls to TensorFloat-32; throws Error naming --tf32 when
  /// `device` is the CPU.
  Float32MatmulScope(bool tf32, Device device);
  /// Restores the mode the device had before.
  ~Float32MatmulScope();
  Float32MatmulScope(const Float32MatmulScope&) = delete;
  Float32MatmulScope& operator=(const Float32MatmulScope&) = delete;

 private:
  std::optional<int> device_;  // the GPU whose mode was changed
  cuda::Float32Matmul previous_ = cuda::Float32Matmul::Full;
};

/// One Trainer::run in progress. See the top of this file and of train/trainer.h.
class TrainingRun {
 public:
  /// Builds the run: the device (one GPU per rank on a machine of several, unless --device names one),
  /// the log, the checkpoint to resume, the task (whose model draws its initial values from the
  /// training generator first), its optimizer and schedule, all restored from --resume (only the
  /// model with --eval-only); then each rank's own training stream and rank 0's weights and buffers on
  /// every rank. Throws Error for an unusable device or log, a checkpoint that is corrupt or of
  /// another run, parameter groups that fit no parameter, and --inspect-every with a task that cannot
  /// inspect.
  TrainingRun(const RunSpec& spec, const TrainOptions& options, const dist::World& world, const TaskFactory& make_task);
  TrainingRun(const TrainingRun&) = delete;
  TrainingRun& operator=(const TrainingRun&) = delete;

  int64_t step() const { return step_; }  ///< optimizer steps taken, the resumed run's included
  optim::Schedule& schedule() { return *schedule_; }  ///< the learning-rate schedule
  int64_t evaluations_since_best() const { return best_.since; }  ///< for --patience

  /// A meter of the steps from here to --steps, started now, with a progress line on rank 0 unless
  /// --progress is off.
  StepMeter start_meter() const;
  /// Says on rank 0's stderr that there is nothing to train: the checkpoint is at --steps already.
  void say_nothing_to_train() const;

  /// One optimizer step: the task's batch and backward; the gradients averaged over the ranks; a loss
  /// that is not finite refused; clipping, the optimizer's step and the schedule's on_step. Returns the
  /// task's Step with its loss averaged and its items summed over the ranks.
  Step train_step();
  /// Evaluates (rank 0, without grad, in eval mode; the metrics are broadcast), logs it with
  /// `train_loss` (NaN: none) and keeps both for the report.
  Evaluation evaluate(double train_loss);
  /// --eval-only: evaluates the restored checkpoint and refuses a loss or best metric of NaN; returns
  /// the items evaluated per second.
  double evaluate_checkpoint();
  /// Whether `value` of the best metric, at this step, is a new best (checkpointed with the run).
  bool keep_best(double value) { return best_.update(value, step_); }
  /// Marks the report as stopped by --patience and says so on rank 0's stderr.
  void stop_early();
  /// Logs the task's inspection (Task::inspect) at this step.
  void inspect();
  /// Writes the run checkpoint to `path` on rank 0 (the other ranks write nothing).
  void save(const std::string& path) const;
  /// The report, with `items_per_second`, also written to the log as its "final" record.
  Report finish(double items_per_second);

 private:
  nn::Module& model() const { return task_->model(); }
  void restore(const ResumedRun& resumed);
  void join_ranks();
  void start_report();
  nlohmann::json record(const char* event) const;

  const RunSpec& spec_;
  const TrainOptions& options_;
  const dist::World& world_;
  std::chrono::steady_clock::time_point start_;
  Device device_;
  Float32MatmulScope float32_matmul_;
  MetricsLog log_;
  Generator gen_;  // the model's initial values first, then every training step
  std::unique_ptr<Task> task_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::Schedule> schedule_;
  std::optional<dist::GradientReducer> reducer_;  // with several ranks, when training
  std::unique_ptr<Profiler> profiler_;  // --profile and its kin: a session around each train_step
  int64_t step_ = 0;
  Best best_;
  Report report_;
};

}  // namespace tapestry::train
