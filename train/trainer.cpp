#include "train/trainer.h"

#include <omp.h>

#include <cmath>
#include <cstdio>

#include "core/device.h"
#include "core/error.h"
#include "train/profiling.h"
#include "train/training_run.h"

namespace tapestry::train {

namespace {

// Whether step `step` is one of every `n`-th (n = 0: none).
bool due(int64_t step, int64_t n) { return n > 0 && step % n == 0; }

}  // namespace

void check_options(const TrainOptions& o) {
  // A schedule that decays to min_lr needs a learning rate at least that large; the schedule itself
  // would find out only once training starts.
  const double lr = o.optimizer.get("lr");
  for (const auto& [key, value] : o.schedule.values)
    TP_CHECK(key != "min_lr" || value <= lr, "--schedule", "'", o.schedule.to_string(), "' decays to min_lr = ", value,
             ", above --optimizer's lr = ", lr, ": give a lower min_lr or a higher lr");
  TP_CHECK(std::isfinite(o.clip) && o.clip >= 0, "--clip", "must be >= 0 (0: no clipping), got ", o.clip);
  TP_CHECK(o.steps >= 1, "--steps", "must be at least 1, got ", o.steps);
  TP_CHECK(o.eval_every >= 0, "--eval-every", "must be >= 0 (0: only at the end), got ", o.eval_every);
  TP_CHECK(o.patience >= 0, "--patience", "must be >= 0 (0: never stop early), got ", o.patience);
  TP_CHECK(o.threads >= 0 && o.threads <= kMaxThreads, "--threads", "must lie in [0, ", kMaxThreads,
           "] (0: OpenMP's default), got ", o.threads);
  TP_CHECK(o.save_every >= 0, "--save-every", "must be >= 0 (0: only at the end), got ", o.save_every);
  TP_CHECK(o.save_every == 0 || !o.save.empty(), "--save-every", "needs --save FILE");
  TP_CHECK(o.inspect_every >= 0, "--inspect-every", "must be >= 0 (0: never), got ", o.inspect_every);
  TP_CHECK(o.inspect_every == 0 || !o.log.empty(), "--inspect-every", "needs --log FILE: the inspections go there");
  TP_CHECK(!o.eval_only || !o.resume.empty(), "--eval-only", "needs --resume FILE: the checkpoint to evaluate");
  TP_CHECK(!o.eval_only || (o.save.empty() && o.save_best.empty()), "--eval-only",
           "trains nothing, so there is nothing to --save");
  TP_CHECK(!o.eval_only || !profile_outputs(o).any(), "--eval-only",
           "trains nothing, and --profile profiles the training steps");
  if (o.distributed) dist::require_mpi("--distributed");
  try {
    Device::parse(o.device);
  } catch (const Error& e) {
    fail("--device", e.what());
  }
}

double metric(const Metrics& metrics, const std::string& name) {
  for (const auto& [key, value] : metrics)
    if (key == name) return value;
  fail("metric", "the evaluation has no metric '", name, "'");
}

nlohmann::json Report::to_json() const {
  nlohmann::json j = fields;
  j["task"] = task;
  j["steps"] = steps;
  for (const auto& [name, value] : metrics) j[name] = value;
  j["train_loss"] = train_loss;  // NaN (no training in this run) is written as null
  if (!best_metric.empty()) {
    j["best_" + best_metric] = best;
    j["best_step"] = best_step;
  }
  j["stopped_early"] = stopped_early;
  j["seconds"] = seconds;
  j[unit + "_per_second"] = items_per_second;
  // null where nothing was held through the device allocator: the naive-Bayes floor keeps its
  // counts in host vectors, and 0 would read as a measurement.
  j["peak_bytes"] = peak_bytes > 0 ? nlohmann::json(peak_bytes) : nlohmann::json(nullptr);
  j["device"] = device;
  j["seed"] = seed;
  j["parameters"] = parameters;
  j["eval_only"] = eval_only;
  return j;
}

std::string Report::metrics_text() const {
  std::string out;
  char value[32];
  for (const auto& [name, v] : metrics) {
    std::snprintf(value, sizeof value, "%.4g", v);
    std::string label = name;
    for (char& c : label)
      if (c == '_') c = ' ';
    out += (out.empty() ? "" : ", ") + label + " " + value;
  }
  return out;
}

uint64_t derived_seed(uint64_t seed, uint64_t stream) { return seed ^ (0x9E3779B97F4A7C15ull * stream); }

uint64_t rank_seed(uint64_t seed, int rank) { return derived_seed(seed, (uint64_t(1) << 32) + uint64_t(rank)); }

Device resolve_device(const std::string& text) {
  Device device;
  try {
    device = Device::parse(text);
  } catch (const Error& e) {
    fail("--device", e.what());
  }
  if (device.is_cuda()) {
    TP_CHECK(cuda::is_available(), "--device", "'", text, "' asks for a GPU: ", cuda::unavailable_reason());
    TP_CHECK(device.index < cuda::device_count(), "--device", "'", text, "': only ", cuda::device_count(),
             " CUDA device(s) present");
  }
  return device;
}

ScopedThreads::ScopedThreads(int threads) : previous_(omp_get_max_threads()) {
  TP_CHECK(threads >= 0 && threads <= kMaxThreads, "--threads", "must lie in [0, ", kMaxThreads,
           "] (0: OpenMP's default), got ", threads);
  if (threads > 0) omp_set_num_threads(threads);
}

ScopedThreads::~ScopedThreads() { omp_set_num_threads(previous_); }

EvaluationScope::EvaluationScope(Task& task) : task_(task) {
  task_.model().eval();
  task_.use_attention(Phase::Evaluation);
}

EvaluationScope::~EvaluationScope() {
  task_.use_attention(Phase::Training);
  task_.model().train();
}

Trainer::Trainer(RunSpec spec, TrainOptions options) : spec_(std::move(spec)), options_(std::move(options)) {}

Report Trainer::run(const TaskFactory& make_task) {
  check_options(options_);
  world_ = options_.distributed ? dist::World::join() : dist::World();
  try {
    Report report = train(make_task);
    world_ = dist::World();
    return report;
  } catch (const std::exception& e) {
    // The other ranks would wait for this one in their next collective: stop them all.
    if (world_.size() > 1) world_.abort(e.what());
    world_ = dist::World();
    throw;
  }
}

// The recipe of a run; the run's pieces are in train/training_run.h.
Report Trainer::train(const TaskFactory& make_task) {
  const TrainOptions& o = options_;
  const ScopedThreads threads(o.threads);
  TrainingRun run(spec_, o, world_, make_task);  // built, or restored from --resume
  if (o.eval_only) return run.finish(run.evaluate_checkpoint());

  const int64_t first = run.step();
  if (first >= o.steps) run.say_nothing_to_train();
  StepMeter meter = run.start_meter();
  if (o.inspect_every > 0 && first == 0) run.inspect();
  while (run.step() < o.steps) {
    const Step s = run.train_step();
    const int64_t step = run.step();
    if (due(step, o.inspect_every)) run.inspect();
    meter.add(step - first, s);
    if (due(step, o.eval_every) || step == o.steps) {
      const double train_loss = meter.take_train_loss();
      const Evaluation e = run.evaluate(train_loss);
      meter.show_evaluation(step, e.metrics, train_loss);
      const double value = metric(e.metrics, spec_.best.name);
      if (run.keep_best(value) && !o.save_best.empty()) run.save(o.save_best);
      run.schedule().on_evaluation(spec_.best.goal == Goal::Max ? -value : value);  // lower is better
      if (o.patience > 0 && run.evaluations_since_best() >= o.patience && step < o.steps) {
        run.stop_early();
        break;
      }
    }
    if (due(step, o.save_every) && step != o.steps) run.save(o.save);
  }
  const double items_per_second = meter.finish();
  if (run.step() == first) run.evaluate(NAN);  // nothing was trained in this run
  if (!o.save.empty()) run.save(o.save);
  return run.finish(items_per_second);
}

}  // namespace tapestry::train
