#include "train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>

#include "core/autograd.h"
#include "core/creation.h"
#include "core/device.h"
#include "core/error.h"
#include "dist/reducer.h"
#include "optim/clip.h"
#include "optim/config.h"
#include "optim/param_groups.h"
#include "train/progress.h"

namespace tapestry::train {

namespace {

constexpr int kMaxThreads = 1024;

// What `f` returns, with an Error's message under the flag's name.
template <class F>
auto flagged(const char* flag, const F& f) {
  try {
    return f();
  } catch (const Error& e) {
    fail(flag, e.what());
  }
}

// A config flag's text parsed, with the parser's message under the flag's name.
template <class Config>
Config parse_flag(const char* flag, const std::string& text) {
  return flagged(flag, [&] { return Config::parse(text); });
}

// --optimizer over the model's parameters, in the groups of --param-groups (each chosen by the
// parameters' names; a group that matches none, or two that match one, are --param-groups errors).
std::unique_ptr<optim::Optimizer> make_optimizer(const TrainOptions& o, const nn::Module& model) {
  const auto groups = parse_flag<optim::ParamGroupsConfig>("--param-groups", o.param_groups);
  auto optimizer = optim::make_optimizer(optim::OptimizerConfig::parse(o.optimizer), model.parameters());
  std::vector<std::string> names;
  for (const auto& [name, param] : model.named_parameters()) names.push_back(name);
  flagged("--param-groups", [&] { optimizer->set_param_groups(groups, names); });
  return optimizer;
}

double smoothed(double average, double value) { return std::isnan(average) ? value : 0.95 * average + 0.05 * value; }

// The best evaluation so far and how many evaluations since it (for --patience); checkpointed.
struct Best {
  BestMetric metric;
  double value = std::numeric_limits<double>::quiet_NaN();
  int64_t step = 0;
  int64_t since = 0;

  // Whether `value` at `step` is a new best (a NaN never is).
  bool update(double v, int64_t at) {
    const bool better = !std::isnan(v) && (std::isnan(value) || (metric.goal == Goal::Max ? v > value : v < value));
    if (better) value = v, step = at, since = 0;
    else ++since;
    return better;
  }
  nlohmann::json state() const {
    nlohmann::json s = {{"metric", metric.name}, {"step", step}, {"since", since}};
    if (!std::isnan(value)) s["value"] = value;
    return s;
  }
  void load(const nlohmann::json& s) {
    if (s.value("metric", "") != metric.name) return;  // another metric's best means nothing here
    value = s.contains("value") ? s["value"].get<double>() : std::numeric_limits<double>::quiet_NaN();
    step = s.value("step", int64_t(0));
    since = s.value("since", int64_t(0));
  }
};

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

void check_options(const TrainOptions& o) {
  parse_flag<optim::OptimizerConfig>("--optimizer", o.optimizer);
  parse_flag<optim::ScheduleConfig>("--schedule", o.schedule);
  parse_flag<optim::ParamGroupsConfig>("--param-groups", o.param_groups);
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

Report Trainer::train(const TaskFactory& make_task) {
  const TrainOptions& o = options_;
  const dist::World& world = world_;
  const auto start = std::chrono::steady_clock::now();
  const auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  const auto schedule_config = optim::ScheduleConfig::parse(o.schedule);
  const ScopedThreads threads(o.threads);
  Device device = resolve_device(o.device);
  // Several ranks on one machine take one GPU each, unless --device names one.
  if (device.is_cuda() && world.size() > 1 && o.device.find(':') == std::string::npos)
    device = Device::cuda(world.local_rank() % cuda::device_count());
  Allocator& allocator = context(device).allocator();
  allocator.reset_peak();
  MetricsLog log(world.is_root() ? o.log : "");
  std::optional<ResumedRun> resumed;
  if (!o.resume.empty())
    resumed.emplace(o.resume, spec_.identity, o.eval_only ? Compare::ModelOnly : Compare::ModelAndTraining);

  Generator gen(o.seed);  // the model's initial values first, then every training step
  const std::unique_ptr<Task> task = make_task(gen, device);
  nn::Module& model = task->model();
  const auto optimizer = make_optimizer(o, model);
  const auto schedule = optim::make_schedule(schedule_config, *optimizer, o.steps);
  auto* step_schedule = dynamic_cast<optim::StepSchedule*>(schedule.get());
  auto* plateau = dynamic_cast<optim::ReduceOnPlateau*>(schedule.get());
  Best best{spec_.best};
  int64_t step = 0;
  if (resumed) {
    resumed->restore_model(model);
    step = resumed->step();
    if (!o.eval_only) {
      resumed->restore_training(*optimizer, *schedule, gen);
      best.load(resumed->trainer_state());
      task->load_data_state(resumed->data_state());
    }
    resumed.reset();
  }
  if (world.rank() > 0) gen.set_state(rank_seed(o.seed, world.rank()), gen.offset());
  for (const Tensor& p : model.parameters()) world.broadcast(p);
  for (const auto& [name, buffer] : model.named_buffers()) world.broadcast(buffer);

  Report report;
  report.task = spec_.identity.task;
  report.fields = spec_.log_fields;
  report.best_metric = spec_.best.name;
  report.unit = spec_.unit;
  report.device = to_string(device);
  report.seed = o.seed;
  report.parameters = model.parameter_count();
  report.eval_only = o.eval_only;
  report.rank = world.rank();
  if (world.joined()) report.fields["ranks"] = world.size();

  const auto evaluate = [&](double train_loss) {
    Evaluation e;
    if (world.is_root()) {
      NoGradGuard no_grad;
      model.eval();
      e = task->evaluate();
      model.train();
    }
    e.metrics = broadcast(world, e.metrics);
    nlohmann::json record = spec_.log_fields;
    record["event"] = "eval";
    record["step"] = step;
    for (const auto& [name, value] : e.metrics) record[name] = value;
    if (std::isfinite(train_loss)) record["train_loss"] = train_loss;
    record["seconds"] = since(start);
    log.write(record);
    report.metrics = e.metrics;
    return e;
  };
  if (o.inspect_every > 0 && !o.eval_only) {
    const std::string why = task->cannot_inspect();
    TP_CHECK(why.empty(), "--inspect-every", "nothing to inspect: ", why);
  }
  const auto inspect = [&] {
    nlohmann::json record = spec_.log_fields;
    record["event"] = "inspect";
    record["step"] = step;
    record["inspect"] = task->inspect();
    model.train();
    log.write(record);
  };
  const auto save = [&](const std::string& path) {
    if (!world.is_root()) return;
    RunState state{&model, optimizer.get(), schedule.get(), &gen, step, best.state(), task->data_state()};
    save_run(path, spec_.identity, state);
  };

  if (o.eval_only) {
    const auto before = std::chrono::steady_clock::now();
    const Evaluation e = evaluate(NAN);
    report.items_per_second = e.items / std::max(since(before), 1e-9);
    // Training stops at a non-finite loss; evaluating a checkpoint whose weights hold NaN must not
    // report success either.
    for (const auto& [name, value] : e.metrics)
      TP_CHECK(!std::isnan(value) || (name != "loss" && name != spec_.best.name), "--eval-only", "the checkpoint '",
               o.resume, "' evaluates to a ", name, " of NaN: its weights are not finite numbers");
  } else {
    const int64_t first = step;
    if (first >= o.steps && world.is_root())
      std::fprintf(stderr, "tapestry %s: the checkpoint is at step %lld, --steps is %lld: nothing to train\n",
                   report.task.c_str(), (long long)first, (long long)o.steps);
    const std::vector<Tensor> params = model.parameters();
    std::optional<Progress> progress;
    std::optional<dist::GradientReducer> reducer;
    if (world.joined()) reducer.emplace(world, params);
    if (o.progress && world.is_root())
      progress.emplace(first > 0 ? report.task + " (resumed at step " + std::to_string(first) + ")" : report.task,
                       std::max<int64_t>(o.steps - first, 0), spec_.unit);
    const auto train_start = std::chrono::steady_clock::now();
    double interval_loss = 0, items = 0, smooth_loss = NAN;
    int64_t interval_steps = 0;
    Metrics smooth;
    if (o.inspect_every > 0 && first == 0 && o.steps > 0) inspect();
    while (step < o.steps) {
      ++step;
      optimizer->zero_grad();
      Step s = task->step(gen);
      s.objective.backward();
      if (reducer) {
        reducer->finish();
        std::vector<double> sums{s.loss, s.items};  // the loss: the mean over the ranks; the items: their sum
        world.sum(sums);
        s.loss = sums[0] / world.size(), s.items = sums[1];
      }
      TP_CHECK(std::isfinite(s.loss), "training", "the loss is ", s.loss, " at step ", step,
               "; try a lower learning rate (--optimizer) or gradient clipping (--clip 1)");
      optim::clip_grad_norm_by_group(*optimizer, o.clip);
      optimizer->step();
      if (step_schedule) step_schedule->step();
      if (o.inspect_every > 0 && step % o.inspect_every == 0) inspect();

      interval_loss += s.loss, ++interval_steps, items += s.items;
      smooth_loss = smoothed(smooth_loss, s.loss);
      if (smooth.size() != s.progress.size()) smooth.assign(s.progress.size(), {"", NAN});
      for (size_t i = 0; i < s.progress.size(); ++i)
        smooth[i] = {s.progress[i].first, smoothed(smooth[i].second, s.progress[i].second)};
      if (progress) {
        Metrics shown{{"loss", smooth_loss}};
        shown.insert(shown.end(), smooth.begin(), smooth.end());
        progress->update(step - first, shown, s.items);
      }

      if ((o.eval_every > 0 && step % o.eval_every == 0) || step == o.steps) {
        report.train_loss = interval_loss / double(interval_steps);
        const Evaluation e = evaluate(report.train_loss);
        interval_loss = 0, interval_steps = 0;
        const double value = metric(e.metrics, spec_.best.name);
        if (best.update(value, step) && !o.save_best.empty()) save(o.save_best);
        if (plateau) plateau->step(spec_.best.goal == Goal::Max ? -value : value);
        if (o.patience > 0 && best.since >= o.patience && step < o.steps) {
          report.stopped_early = true;
          if (world.is_root())
            std::fprintf(stderr, "\ntapestry %s: no better %s in %lld evaluations: stopping at step %lld\n",
                         report.task.c_str(), spec_.best.name.c_str(), (long long)best.since, (long long)step);
          break;
        }
      }
      if (o.save_every > 0 && step % o.save_every == 0 && step != o.steps) save(o.save);
    }
    if (progress) progress->finish();
    report.items_per_second = items / std::max(since(train_start), 1e-9);
    if (step == first) evaluate(NAN);  // nothing was trained in this run
    if (!o.save.empty()) save(o.save);
  }

  report.steps = step;
  report.best = best.value;
  report.best_step = best.step;
  report.seconds = since(start);
  report.peak_bytes = allocator.stats().peak;
  nlohmann::json final_record = report.to_json();
  final_record["event"] = "final";
  log.write(final_record);
  return report;
}

}  // namespace tapestry::train
