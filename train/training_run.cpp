#include "train/training_run.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/autograd.h"
#include "core/creation.h"
#include "core/device.h"
#include "core/error.h"
#include "ops/autocast.h"
#include "optim/clip.h"
#include "train/profiling.h"

namespace tapestry::train {

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double smoothed(double average, double value) { return std::isnan(average) ? value : 0.95 * average + 0.05 * value; }

// --device, where several ranks on one machine take one GPU each unless it names one.
Device run_device(const std::string& text, const dist::World& world) {
  Device device = resolve_device(text);
  if (device.is_cuda() && world.size() > 1 && text.find(':') == std::string::npos)
    device = Device::cuda(world.local_rank() % cuda::device_count());
  return device;
}

// --optimizer over the model's parameters, in the groups of --param-groups (each chosen by the
// parameters' names; a group that matches none, or two that match one, are --param-groups errors).
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& c, const nn::Module& model) {
  auto optimizer = optim::make_optimizer(c.optimizer, model.parameters());
  std::vector<std::string> names;
  for (const auto& [name, param] : model.named_parameters()) names.push_back(name);
  try {
    optimizer->set_param_groups(c.param_groups, names);
  } catch (const Error& e) {
    fail("--param-groups", e.what());
  }
  return optimizer;
}

// Rank 0's metrics on every rank (names and values; a value may be NaN, which JSON cannot carry).
Metrics broadcast(const dist::World& world, const Metrics& metrics) {
  if (world.size() == 1) return metrics;
  nlohmann::json names = nlohmann::json::array();
  std::vector<double> values;
  for (const auto& [name, value] : metrics) names.push_back(name), values.push_back(value);
  names = nlohmann::json::parse(world.broadcast(names.dump()));
  values.resize(names.size());
  const Tensor shared = from_vector(values, {int64_t(values.size())});
  world.broadcast(shared);
  values = shared.to_vector<double>();
  Metrics out;
  for (size_t i = 0; i < values.size(); ++i) out.emplace_back(names[i].get<std::string>(), values[i]);
  return out;
}

}  // namespace

// ---- Best ----

bool Best::update(double v, int64_t at) {
  const bool better = !std::isnan(v) && (std::isnan(value) || (metric.goal == Goal::Max ? v > value : v < value));
  if (better) value = v, step = at, since = 0;
  else ++since;
  return better;
}

nlohmann::json Best::state() const {
  nlohmann::json s = {{"metric", metric.name}, {"step", step}, {"since", since}};
  if (!std::isnan(value)) s["value"] = value;
  return s;
}

void Best::load(const nlohmann::json& s) {
  if (s.value("metric", "") != metric.name) return;
  value = s.contains("value") ? s["value"].get<double>() : std::numeric_limits<double>::quiet_NaN();
  step = s.value("step", int64_t(0));
  since = s.value("since", int64_t(0));
}

// ---- StepMeter ----

StepMeter::StepMeter(bool show, const std::string& label, int64_t total, const std::string& unit) {
  if (show) progress_.emplace(label, total, unit);
  start_ = std::chrono::steady_clock::now();
}

void StepMeter::add(int64_t run_step, const Step& step) {
  interval_loss_ += step.loss, ++interval_steps_, items_ += step.items;
  smooth_loss_ = smoothed(smooth_loss_, step.loss);
  if (smooth_.size() != step.progress.size()) smooth_.assign(step.progress.size(), {"", NAN});
  for (size_t i = 0; i < step.progress.size(); ++i)
    smooth_[i] = {step.progress[i].first, smoothed(smooth_[i].second, step.progress[i].second)};
  if (!progress_) return;
  Metrics shown{{"loss", smooth_loss_}};
  shown.insert(shown.end(), smooth_.begin(), smooth_.end());
  progress_->update(run_step, shown, step.items);
}

double StepMeter::take_train_loss() {
  const double mean = interval_loss_ / double(interval_steps_);
  interval_loss_ = 0, interval_steps_ = 0;
  return mean;
}

void StepMeter::show_evaluation(int64_t step, const Metrics& metrics, double train_loss) {
  if (!progress_) return;
  std::string text = "eval at step " + std::to_string(step) + ":";
  char value[32];
  for (const auto& [name, v] : metrics) {
    std::snprintf(value, sizeof value, "%.4g", v);
    text += " " + name + " " + value;
  }
  std::snprintf(value, sizeof value, "%.4g", train_loss);
  if (std::isfinite(train_loss)) text += std::string(" (train loss ") + value + ")";
  progress_->note(text);
}

double StepMeter::finish() {
  if (progress_) progress_->finish();
  return items_ / std::max(seconds_since(start_), 1e-9);
}

// ---- Float32MatmulScope ----

Float32MatmulScope::Float32MatmulScope(bool tf32, Device device) {
  if (!tf32) return;
  TP_CHECK(device.is_cuda(), "--tf32", "sets how float32 matmuls run on a GPU; this run is on the ", device,
           " (drop --tf32, or train with --device cuda)");
  previous_ = cuda::float32_matmul(device.index);
  cuda::set_float32_matmul(cuda::Float32Matmul::TF32, device.index);
  device_ = device.index;
}

Float32MatmulScope::~Float32MatmulScope() {
  if (device_) cuda::set_float32_matmul(previous_, *device_);
}

// ---- TrainingRun ----

TrainingRun::TrainingRun(const RunSpec& spec, const TrainOptions& options, const dist::World& world,
                         const TaskFactory& make_task)
    : spec_(spec),
      options_(options),
      world_(world),
      start_(std::chrono::steady_clock::now()),
      device_(run_device(options.device, world)),
      float32_matmul_(options.tf32, device_),
      log_(world.is_root() ? options.log : ""),
      gen_(options.seed),
      best_{spec.best} {
  context(device_).allocator().reset_peak();
  if (world_.is_root()) profiler_ = make_profiler(profile_outputs(options_), device_);  // before minutes of work
  std::optional<ResumedRun> resumed;
  if (!options_.resume.empty())
    resumed.emplace(options_.resume, spec_.identity,
                    options_.eval_only ? Compare::ModelOnly : Compare::ModelAndTraining);
  task_ = make_task(gen_, device_);
  optimizer_ = make_optimizer(options_, model());
  schedule_ = optim::make_schedule(options_.schedule, *optimizer_, options_.steps);
  if (resumed) restore(*resumed);
  resumed.reset();  // the checkpoint's tensors are not held while training
  join_ranks();
  start_report();
  if (options_.inspect_every > 0 && !options_.eval_only) {
    const std::string why = task_->cannot_inspect();
    TP_CHECK(why.empty(), "--inspect-every", "nothing to inspect: ", why);
  }
  if (world_.joined() && !options_.eval_only) reducer_.emplace(world_, model().parameters());
}

// The checkpoint's weights and step; to continue training, also its optimizer, schedule, generator,
// best evaluation and data position.
void TrainingRun::restore(const ResumedRun& resumed) {
  resumed.restore_model(model());
  step_ = resumed.step();
  if (options_.eval_only) return;
  resumed.restore_training(*optimizer_, *schedule_, gen_);
  best_.load(resumed.trainer_state());
  task_->load_data_state(resumed.data_state());
}

// Rank r ≥ 1 continues the training stream under a key of its own; every rank starts from rank 0's
// weights and buffers.
void TrainingRun::join_ranks() {
  if (world_.rank() > 0) gen_.set_state(rank_seed(options_.seed, world_.rank()), gen_.offset());
  for (const Tensor& p : model().parameters()) world_.broadcast(p);
  for (const auto& [name, buffer] : model().named_buffers()) world_.broadcast(buffer);
}

// What the report says of the run before it runs.
void TrainingRun::start_report() {
  report_.task = spec_.identity.task;
  report_.fields = spec_.log_fields;
  report_.best_metric = spec_.best.name;
  report_.unit = spec_.unit;
  report_.device = to_string(device_);
  report_.seed = options_.seed;
  report_.parameters = model().parameter_count();
  report_.eval_only = options_.eval_only;
  report_.rank = world_.rank();
  if (world_.joined()) report_.fields["ranks"] = world_.size();
}

// A log record of `event` at this step, with the app's fields.
nlohmann::json TrainingRun::record(const char* event) const {
  nlohmann::json r = spec_.log_fields;
  r["event"] = event;
  r["step"] = step_;
  return r;
}

StepMeter TrainingRun::start_meter() const {
  const int64_t first = step_;
  const std::string label =
      first > 0 ? report_.task + " (resumed at step " + std::to_string(first) + ")" : report_.task;
  return StepMeter(options_.progress && world_.is_root(), label, std::max<int64_t>(options_.steps - first, 0),
                   spec_.unit);
}

void TrainingRun::say_nothing_to_train() const {
  if (world_.is_root())
    std::fprintf(stderr, "tapestry %s: the checkpoint is at step %lld, --steps is %lld: nothing to train\n",
                 report_.task.c_str(), (long long)step_, (long long)options_.steps);
}

Step TrainingRun::train_step() {
  std::optional<ProfileSession> profiled;
  if (profiler_) profiled.emplace(*profiler_);
  ++step_;
  optimizer_->zero_grad();
  Step s;
  {
    const ProfileScope scope("forward");
    const AutocastScope autocast(options_.precision == "bf16");
    s = task_->step(gen_);
  }
  {
    const ProfileScope scope("backward");
    s.objective.backward();
  }
  if (reducer_) {
    reducer_->finish();
    std::vector<double> sums{s.loss, s.items};  // the loss: the mean over the ranks; the items: their sum
    world_.sum(sums);
    s.loss = sums[0] / world_.size(), s.items = sums[1];
  }
  TP_CHECK(std::isfinite(s.loss), "training", "the loss is ", s.loss, " at step ", step_,
           "; try a lower learning rate (--optimizer) or gradient clipping (--clip 1)");
  const ProfileScope scope("optimizer");
  optim::clip_grad_norm_by_group(*optimizer_, options_.clip);
  optimizer_->step();
  schedule_->on_step();
  return s;
}

Evaluation TrainingRun::evaluate(double train_loss) {
  Evaluation e;
  if (world_.is_root()) {
    const EvaluationScope evaluating(*task_);
    const AutocastScope autocast(options_.precision == "bf16");
    e = task_->evaluate();
  }
  e.metrics = broadcast(world_, e.metrics);
  nlohmann::json r = record("eval");
  for (const auto& [name, value] : e.metrics) r[name] = value;
  if (std::isfinite(train_loss)) r["train_loss"] = train_loss;
  r["seconds"] = seconds_since(start_);
  log_.write(r);
  report_.metrics = e.metrics;
  report_.train_loss = train_loss;
  return e;
}

double TrainingRun::evaluate_checkpoint() {
  const auto before = std::chrono::steady_clock::now();
  const Evaluation e = evaluate(NAN);
  const double items_per_second = e.items / std::max(seconds_since(before), 1e-9);
  // Training stops at a non-finite loss; evaluating a checkpoint whose weights hold NaN must not
  // report success either.
  for (const auto& [name, value] : e.metrics)
    TP_CHECK(!std::isnan(value) || (name != "loss" && name != spec_.best.name), "--eval-only", "the checkpoint '",
             options_.resume, "' evaluates to a ", name, " of NaN: its weights are not finite numbers");
  return items_per_second;
}

void TrainingRun::stop_early() {
  report_.stopped_early = true;
  if (world_.is_root())
    std::fprintf(stderr, "\ntapestry %s: no better %s in %lld evaluations: stopping at step %lld\n",
                 report_.task.c_str(), spec_.best.name.c_str(), (long long)best_.since, (long long)step_);
}

void TrainingRun::inspect() {
  nlohmann::json r = record("inspect");
  r["inspect"] = task_->inspect();
  model().train();
  log_.write(r);
}

void TrainingRun::save(const std::string& path) const {
  if (!world_.is_root()) return;
  const RunState state{&model(), optimizer_.get(), schedule_.get(), &gen_, step_, best_.state(), task_->data_state()};
  save_run(path, spec_.identity, state);
}

Report TrainingRun::finish(double items_per_second) {
  report_.items_per_second = items_per_second;
  report_.steps = step_;
  report_.best = best_.value;
  report_.best_step = best_.step;
  report_.seconds = seconds_since(start_);
  report_.peak_bytes = context(device_).allocator().stats().peak;
  nlohmann::json final_record = report_.to_json();
  final_record["event"] = "final";
  log_.write(final_record);
  if (profiler_) write_profile(profile_outputs(options_), *profiler_);
  return report_;
}

}  // namespace tapestry::train
