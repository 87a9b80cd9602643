/// @file
/// The training loop every app shares. An app supplies a Task (its model, a training step and an
/// evaluation) and the Trainer does the rest:
///
///   for step = first+1 .. options.steps:
///     zero grads; s = task.step(gen); s.objective.backward(); refuse a non-finite loss;
///     clip the gradients (the global norm, and groups with a clip of their own); optimizer step;
///     schedule.on_step()
///     every eval_every steps and at the last: evaluate (EvaluationScope: no grad, eval mode, the
///       evaluation attention), log, keep the best,
///       schedule.on_evaluation(the best metric, lower is better),
///       stop early after `patience` evaluations without a new best
///     every save_every steps: checkpoint
///     every inspect_every steps (and before the first step of a fresh run): log task.inspect()
///   checkpoint at the end; report
///
/// with progress on stderr, a JSON-lines log, checkpoints that resume exactly (train/run_state.h),
/// and --eval-only. Trainer::train is this recipe; its pieces (the run, its steps, evaluations and
/// checkpoints, the meter of the steps) are in train/training_run.h. Usage:
///
///   train::RunSpec spec{"copy-task", identity, {"masked_accuracy", train::Goal::Max}};
///   train::Trainer trainer(spec, options.train);
///   const train::Report report = trainer.run([&](Generator& gen, Device device) {
///     return std::make_unique<CopyTask>(options, gen, device);   // the model draws from gen first
///   });
///
/// Random streams: one training generator seeded with options.seed; the task's constructor draws the
/// model's initial values from it first, then every training step draws (data, dropout, hashing).
/// It is checkpointed, so a resumed run continues exactly. Held-out data and evaluation should draw
/// from generators of their own (derived_seed), so that evaluating more or less often never changes
/// training.
///
/// Data parallelism (options.distributed, docs/DISTRIBUTED.md): every rank builds the task, rank 0's
/// parameters and buffers are broadcast, and each step's gradients are averaged over the ranks
/// (dist/reducer.h) before clipping and the optimizer step, so every rank holds the same weights.
/// Rank 0 keeps the single-process stream; rank r ≥ 1 continues from the same counter under the key
/// rank_seed(seed, r), so each rank draws its own batches and dropout. The task shards a data set by
/// world().rank() and world().size(). Only rank 0 evaluates (the metrics are broadcast: every rank
/// takes the same early-stopping and schedule decisions), prints progress, logs and checkpoints;
/// the checkpoint is a single-process one (rank 0's generator) and resumes on any number of ranks.
/// The logged training loss is the mean over the ranks. An error on one rank stops every rank.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/autograd.h"
#include "core/device.h"
#include "core/random.h"
#include "dist/world.h"
#include "nn/module.h"
#include "optim/config.h"
#include "optim/param_groups.h"
#include "train/run_state.h"

namespace tapestry::train {

/// What every training app's command line sets (apps register these flags once).
struct TrainOptions {
  optim::OptimizerConfig optimizer = optim::OptimizerConfig::parse("adam:lr=0.001");  ///< optim/config.h
  /// the learning-rate schedule (optim/config.h)
  optim::ScheduleConfig schedule = optim::ScheduleConfig::parse("constant");
  double clip = 0.0;          ///< max global gradient norm; 0: none (a parameter group's own clip still applies)
  /// parameter groups with their own lr, weight decay and clipping (optim/param_groups.h); empty: none
  optim::ParamGroupsConfig param_groups;
  int64_t steps = 1000;       ///< the step to train up to (a resumed run continues to it)
  int64_t eval_every = 500;   ///< evaluate every N steps; 0: only at the end
  int64_t patience = 0;       ///< stop after this many evaluations without a new best; 0: never
  std::string device = "auto";  ///< auto | cpu | cuda[:i]
  int threads = 0;            ///< CPU threads; 0: OpenMP's default
  bool tf32 = false;          ///< float32 matmuls of a GPU run in TensorFloat-32 (core/cuda.h); refused on the CPU
  /// float32, or bf16: forward passes under autocast to bfloat16 (ops/autocast.h), weights and
  /// optimizer state in float32
  std::string precision = "float32";
  uint64_t seed = 0;  ///< the training generator's seed (see the top of this file)
  std::string log;            ///< append JSON lines: each evaluation and the result
  std::string save;           ///< checkpoint at the end (and every save_every steps)
  int64_t save_every = 0;     ///< 0: only at the end
  std::string save_best;      ///< checkpoint at each new best evaluation
  std::string resume;         ///< continue this checkpoint's run (or, with eval_only, evaluate it)
  bool eval_only = false;  ///< evaluate the resume checkpoint instead of training
  bool progress = true;       ///< the progress line on stderr
  bool distributed = false;   ///< one rank of an MPI job (mpirun -np N ...); see the top of this file
  int64_t inspect_every = 0;  ///< log the task's inspection (Task::inspect) every N steps and at step 0; 0: never
  ///@{
  /// Profile the training steps and write the table, the JSON, the Chrome trace there (train/profiling.h).
  std::string profile, profile_json, profile_trace;
  ///@}
};

/// Checks what can be checked without a device or a file (ranges, a schedule's min_lr against the
/// optimizer's lr, flags that need each other); throws Error naming the flag. The configs were
/// checked as they were parsed; whether the parameter groups' patterns fit the model's parameter
/// names is checked when the model is built (Trainer::run).
void check_options(const TrainOptions& options);

using Metrics = std::vector<std::pair<std::string, double>>;  ///< in the order to show them

/// value of `name` in `metrics`; Error when absent.
double metric(const Metrics& metrics, const std::string& name);

/// What Task::step returns for one training batch.
struct Step {
  Tensor objective;  ///< 0-d: what backward runs on
  double loss = 0;   ///< the batch's task loss: logged, and training stops when it is not finite
  Metrics progress;  ///< shown on the progress line (exponentially smoothed)
  double items = 0;  ///< what the step processed (tokens, images), for the rate
};

/// What Task::evaluate returns.
struct Evaluation {
  Metrics metrics;   ///< held-out metrics, e.g. {"loss", ...}, {"accuracy", ...}
  double items = 0;  ///< what was evaluated, for the rate of an --eval-only run
};

/// What a task's model runs for: training steps, or evaluation (Task::use_attention).
enum class Phase {
  Training,   ///< training steps, with the training attention
  Evaluation  ///< evaluations, with the evaluation attention (--eval-attention)
};

/// An app's part of training.
class Task {
 public:
  virtual ~Task() = default;
  /// The model being trained (the Trainer builds the optimizer over its parameters and checkpoints it).
  virtual nn::Module& model() = 0;
  /// One training batch, drawn with gen: the forward pass and its loss.
  virtual Step step(Generator& gen) = 0;
  /// The held-out evaluation; the Trainer calls it in an EvaluationScope (no gradient, eval mode, the
  /// evaluation attention).
  virtual Evaluation evaluate() = 0;
  /// Sets the model's attention for `phase`: a task evaluated with another attention than it trains
  /// with (--eval-attention) switches it here, and the Trainer's EvaluationScope switches back after
  /// each evaluation, also when it throws. Must not throw for Phase::Training. By default nothing.
  virtual void use_attention(Phase /*phase*/) {}
  ///@{
  /// The data position to checkpoint (epoch-based readers) and to restore on resume.
  virtual nlohmann::json data_state() const { return nlohmann::json::object(); }
  virtual void load_data_state(const nlohmann::json& /*state*/) {}
  ///@}
  ///@{
  /// --inspect-every: "" when the task can inspect its model, else why not (the Trainer refuses the
  /// flag with this reason before training); then inspect() returns what the log records under
  /// "inspect" (models/inspection.h: to_json). The inspection must not draw from the training
  /// generator, so that inspecting never changes training.
  virtual std::string cannot_inspect() const {
    return "this app's model has no clustering to inspect (the models of the apps whose checkpoints tapestry "
           "inspect reads have, with a clustering attention)";
  }
  virtual nlohmann::json inspect() { return nullptr; }
  ///@}
};

/// Which way a metric is better.
enum class Goal {
  Max,  ///< larger values are better
  Min  ///< smaller values are better
};

/// The evaluation metric that picks the best checkpoint, drives --patience and the plateau schedule.
struct BestMetric {
  std::string name;  ///< its name among Evaluation::metrics
  Goal goal = Goal::Max;  ///< which way it is better
};

/// What an app tells the trainer about itself.
struct RunSpec {
  RunIdentity identity;  ///< task name and settings, recorded in and checked against checkpoints
  BestMetric best;  ///< the metric that picks the best checkpoint
  std::string unit = "tokens";  ///< what Step::items counts; the report has `"<unit>_per_second"`
  nlohmann::json log_fields = nlohmann::json::object();  ///< added to every log record (e.g. the attention)
};

/// What Trainer::run did; the log's last record is its to_json() (with "event": "final").
struct Report {
  std::string task;  ///< the task's name (RunSpec::identity)
  nlohmann::json fields = nlohmann::json::object();  ///< RunSpec::log_fields: what the app says about the run
  int64_t steps = 0;        ///< the step the model has reached
  Metrics metrics;          ///< the last evaluation
  double train_loss = std::numeric_limits<double>::quiet_NaN();  ///< mean task loss since the previous evaluation
  std::string best_metric;  ///< the name of the metric in RunSpec::best
  double best = std::numeric_limits<double>::quiet_NaN();  ///< the best evaluation of the run so far
  int64_t best_step = 0;  ///< the step of the best evaluation
  bool stopped_early = false;  ///< whether --patience stopped the run
  double seconds = 0;           ///< wall time of this run
  std::string unit = "tokens";  ///< RunSpec::unit: what items_per_second counts
  double items_per_second = 0;  ///< training items (evaluated ones with eval_only) per second
  /// The device allocator's most bytes in use during the run: parameters, optimizer state, activations
  /// and gradients, and whatever the app already held on the device when the run began.
  int64_t peak_bytes = 0;
  std::string device;  ///< the device the run used ("cpu", "cuda:0")
  uint64_t seed = 0;  ///< TrainOptions::seed
  int64_t parameters = 0;  ///< the model's parameter count
  bool eval_only = false;  ///< TrainOptions::eval_only
  int rank = 0;  ///< this process's rank (data parallelism, not in the JSON): only rank 0 shows the report

  /// {`<fields>`, "task", "steps", `<metrics>`, "train_loss", `"best_<metric>"`, "best_step",
  ///  "stopped_early", "seconds", `"<unit>_per_second"`, "peak_bytes", "device", "seed", "parameters",
  ///  "eval_only"}
  nlohmann::json to_json() const;
  /// The last evaluation's value of `name`; Error when absent.
  double metric(const std::string& name) const { return train::metric(metrics, name); }
  /// `"<metric> <value>, ..."` as in a summary line (names with spaces for underscores).
  std::string metrics_text() const;
};

/// Seeds for a run's other streams (held-out data, evaluation hashing): a function of the seed and
/// the stream number that differs from the seed itself for stream ≥ 1.
uint64_t derived_seed(uint64_t seed, uint64_t stream);

/// The key of rank `rank`'s training stream (rank ≥ 1; rank 0's is the seed itself):
/// derived_seed(seed, 2^32 + rank), apart from the streams apps derive (small stream numbers).
uint64_t rank_seed(uint64_t seed, int rank);

/// The device `text` names (auto | cpu | cuda[:i]); throws Error naming --device when it is not usable
/// here (cuda without a GPU).
Device resolve_device(const std::string& text);

/// The most CPU threads --threads takes.
inline constexpr int kMaxThreads = 1024;

/// The number of CPU threads (OpenMP) for a scope, restored at its end; 0 keeps OpenMP's default
/// (OMP_NUM_THREADS, else one per core). On a machine that other work keeps busy, fewer threads than
/// cores can be much faster: every parallel region waits for its slowest thread.
class ScopedThreads {
 public:
  /// Sets the number of threads to `threads` (0: leaves it); throws Error naming --threads when it is
  /// negative or more than 1024.
  explicit ScopedThreads(int threads);
  /// Restores the number of threads from before.
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int previous_;
};

/// One evaluation of a task, as a scope: no gradient, the model in eval mode with the task's
/// evaluation attention (Task::use_attention); at its end, also when the evaluation throws, the
/// model is back in training mode with its training attention, so that training goes on as before.
class EvaluationScope {
 public:
  /// Puts `task` in evaluation.
  explicit EvaluationScope(Task& task);
  /// Puts it back in training.
  ~EvaluationScope();
  EvaluationScope(const EvaluationScope&) = delete;
  EvaluationScope& operator=(const EvaluationScope&) = delete;

 private:
  Task& task_;
  NoGradGuard no_grad_;
};

/// Builds an app's Task on `device`; the model draws its initial values from `gen` (the training
/// generator) first.
using TaskFactory = std::function<std::unique_ptr<Task>(Generator& gen, Device device)>;

/// The training loop (see the top of this file).
class Trainer {
 public:
  /// A trainer of the app `spec` describes with `options`; run() checks the options.
  Trainer(RunSpec spec, TrainOptions options);
  /// Trains (or, with eval_only, evaluates) the task make_task builds; see the top of this file.
  /// Throws Error on bad options, an unusable device, a checkpoint that is corrupt or of another run,
  /// and a loss that is not finite.
  Report run(const TaskFactory& make_task);

  /// The ranks of the run in progress (a process alone outside run()), for a task that shards its
  /// data set: make_task may read it.
  const dist::World& world() const { return world_; }

 private:
  Report train(const TaskFactory& make_task);

  RunSpec spec_;
  TrainOptions options_;
  dist::World world_;
};

}  // namespace tapestry::train
