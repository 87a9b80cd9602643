// The training harness (train/): the loop, evaluation and the log, the best checkpoint, early
// stopping, the plateau schedule, exact resume, --eval-only, and the errors of each, on a task small
// enough to reason about: a line y = 3x + 1 fitted by one linear unit.
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/testing.h"
#include "train/progress.h"
#include "train/run_state.h"
#include "train/trainer.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// x ~ U[0, 1), y = 3x + 1; the loss is the mean squared error. `frozen_metric` makes the evaluation
// report a constant, so the best never improves after the first evaluation.
class LineTask : public train::Task {
 public:
  LineTask(Generator& gen, bool frozen_metric = false) : model_(1, 1, gen), frozen_(frozen_metric) {
    Generator held_out(train::derived_seed(0, 1));
    x_eval_ = rand({64, 1}, held_out);
  }
  nn::Module& model() override { return model_; }
  train::Step step(Generator& gen) override {
    const Tensor x = rand({8, 1}, gen);
    const Tensor loss = mse(x);
    ++data_position_;
    return {loss, loss.item<double>(), {{"rmse", std::sqrt(loss.item<double>())}}, 8};
  }
  train::Evaluation evaluate() override {
    CHECK(!grad_mode_enabled());                    // the Trainer evaluates without recording
    CHECK(!model_.is_training());                   // and in eval mode
    const double loss = frozen_ ? 1.0 : mse(x_eval_).item<double>();
    return {{{"loss", loss}, {"double_loss", 2 * loss}}, 64};
  }
  nlohmann::json data_state() const override { return {{"position", data_position_}}; }
  void load_data_state(const nlohmann::json& state) override { data_position_ = state.value("position", -1); }

 private:
  Tensor mse(const Tensor& x) {
    const Tensor error = model_.forward(x) - (x * 3.0 + 1.0);
    return mean(error * error);
  }
  nn::Linear model_;
  bool frozen_;
  Tensor x_eval_;
  int64_t data_position_ = 0;  // training batches drawn: the task's "data state"
};

train::RunSpec spec() {
  train::RunSpec s;
  s.identity = {"line", {{"width", 1}}, {{"optimizer", "sgd"}}};
  s.best = {"loss", train::Goal::Min};
  s.unit = "points";
  s.log_fields = {{"note", "a line"}};
  return s;
}

train::TrainOptions options() {
  train::TrainOptions o;
  o.optimizer = optim::OptimizerConfig::parse("sgd:lr=0.3");
  o.steps = 60;
  o.eval_every = 20;
  o.device = "cpu";
  o.threads = 1;
  o.progress = false;
  return o;
}

std::vector<nlohmann::json> read_log(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) records.push_back(nlohmann::json::parse(line));
  return records;
}

train::TaskFactory line_task(bool frozen = false) {
  return [frozen](Generator& gen, Device) { return std::make_unique<LineTask>(gen, frozen); };
}

}  // namespace

TEST_CASE("trainer: trains, evaluates every N steps and at the end, logs and reports") {
  TempDir dir;
  train::TrainOptions o = options();
  o.steps = 50;  // evaluations at 20, 40 and the last step, 50
  o.log = dir.file("log.jsonl");
  const train::Report r = train::Trainer(spec(), o).run(line_task());
  CHECK(r.steps == 50);
  CHECK(r.metric("loss") < 0.1);  // a unit drawn near 0 against y = 3x + 1 starts far above
  CHECK(r.metric("double_loss") == 2 * r.metric("loss"));
  CHECK(r.best == r.metric("loss"));
  CHECK(r.best_step == 50);
  CHECK(!r.stopped_early);
  CHECK(r.parameters == 2);
  CHECK(r.device == "cpu");
  CHECK(std::isfinite(r.train_loss));
  CHECK(r.items_per_second > 0);

  const std::vector<nlohmann::json> log = read_log(o.log);
  REQUIRE(log.size() == 4);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(log[i]["event"] == "eval");
    CHECK(log[i]["step"] == std::vector<int>{20, 40, 50}[i]);
    CHECK(log[i]["note"] == "a line");
    CHECK(log[i].contains("train_loss"));
  }
  CHECK(log[0]["loss"].get<double>() > log[2]["loss"].get<double>());
  const nlohmann::json final_record = log[3];
  CHECK(final_record["event"] == "final");
  CHECK(final_record["task"] == "line");
  CHECK(final_record["steps"] == 50);
  CHECK(final_record["best_loss"] == r.best);
  CHECK(final_record.contains("points_per_second"));
  CHECK(final_record["note"] == "a line");
  CHECK(r.metrics_text().find("double loss") != std::string::npos);
  CHECK(final_record["peak_bytes"] == r.peak_bytes);
}

TEST_CASE("trainer: the report's peak memory is the most the run held on the device at once") {
  // A step that also holds `scratch` floats while it computes its loss: the peak must cover them, and a
  // run without them must peak lower (the line model itself needs a few hundred bytes).
  constexpr int64_t scratch = 1 << 18;  // 1 MiB
  struct ScratchTask : LineTask {
    using LineTask::LineTask;
    train::Step step(Generator& gen) override {
      const Tensor held = zeros({scratch});
      return LineTask::step(gen);
    }
  };
  const train::TrainOptions o = options();
  const train::Report plain = train::Trainer(spec(), o).run(line_task());
  const train::Report held = train::Trainer(spec(), o).run(
      [](Generator& gen, Device) { return std::make_unique<ScratchTask>(gen); });
  CHECK(plain.peak_bytes > 0);
  CHECK(plain.peak_bytes < scratch * 4);
  CHECK(held.peak_bytes >= scratch * 4);
  CHECK(held.to_json()["peak_bytes"] == held.peak_bytes);
}

TEST_CASE("trainer: a resumed run continues exactly, with the trainer's and the task's state") {
  TempDir dir;
  train::TrainOptions straight = options();
  straight.save = dir.file("straight.ckpt");
  train::Trainer(spec(), straight).run(line_task());

  train::TrainOptions first = options();
  first.steps = 25;
  first.save = dir.file("first.ckpt");
  train::Trainer(spec(), first).run(line_task());

  train::TrainOptions second = options();
  second.resume = dir.file("first.ckpt");
  second.save = dir.file("resumed.ckpt");
  const train::Report r = train::Trainer(spec(), second).run(line_task());
  CHECK(r.steps == 60);
  const Checkpoint a = load_checkpoint(straight.save), b = load_checkpoint(second.save);
  for (const auto& [name, tensor] : a.tensors) {
    CAPTURE(name);
    REQUIRE(b.tensors.count(name) == 1);
    check_close(tensor, b.tensors.at(name), 0, 0);
  }
  CHECK(a.metadata["step"] == 60);
  CHECK(b.metadata["data"]["position"] == 60);  // 25 steps restored from the checkpoint, then 35 more
  CHECK(a.metadata["trainer"] == b.metadata["trainer"]);  // evaluations at the same steps in both

  // The resumed run must match the checkpoint's settings.
  train::RunSpec other = spec();
  other.identity.training["optimizer"] = "adam";
  check_error([&] { train::Trainer(other, second).run(line_task()); },
              {"--resume", "first.ckpt", "--optimizer sgd", "--optimizer adam"});
  other = spec();
  other.identity.task = "circle";
  check_error([&] { train::Trainer(other, second).run(line_task()); }, {"first.ckpt", "line checkpoint", "circle"});
}

TEST_CASE("trainer: a run with parameter groups, stopped and resumed, equals the uninterrupted run bit for bit") {
  // The bias in a group of its own (lr, weight decay, its own clip), under a schedule that scales both
  // groups' rates and a global clip that holds only the weight.
  TempDir dir;
  train::TrainOptions o = options();
  o.optimizer = optim::OptimizerConfig::parse("sgd:lr=0.3,momentum=0.5");
  o.schedule = optim::ScheduleConfig::parse("inverse-sqrt:warmup=5");
  o.clip = 0.5;
  o.param_groups = optim::ParamGroupsConfig::parse("bias:lr=0.1,weight_decay=0.01,clip=2");
  train::RunSpec grouped = spec();
  grouped.identity.training["param-groups"] = o.param_groups.to_string();

  train::TrainOptions straight = o, first = o, second = o, plain = o;
  straight.save = dir.file("straight.ckpt");
  train::Trainer(grouped, straight).run(line_task());
  first.steps = 25;
  first.save = dir.file("first.ckpt");
  train::Trainer(grouped, first).run(line_task());
  second.resume = first.save;
  second.save = dir.file("resumed.ckpt");
  train::Trainer(grouped, second).run(line_task());
  const Checkpoint a = load_checkpoint(straight.save), b = load_checkpoint(second.save);
  REQUIRE(a.tensors.size() == b.tensors.size());
  for (const auto& [name, tensor] : a.tensors) {
    CAPTURE(name);
    REQUIRE(b.tensors.count(name) == 1);
    check_close(tensor, b.tensors.at(name), 0, 0);
  }
  CHECK(a.metadata["optimizer"] == b.metadata["optimizer"]);  // the groups' rates among them
  CHECK(a.metadata["schedule"] == b.metadata["schedule"]);
  CHECK(a.metadata["optimizer"]["groups"] == std::vector<std::string>{"bias:lr=0.1,weight_decay=0.01,clip=2"});

  // The groups change training: the same run without them ends elsewhere.
  plain.param_groups = optim::ParamGroupsConfig::parse("");
  plain.save = dir.file("plain.ckpt");
  train::Trainer(spec(), plain).run(line_task());
  CHECK(load_checkpoint(plain.save).tensors.at("model.bias").item<double>() !=
        a.tensors.at("model.bias").item<double>());

  // A checkpoint from before --param-groups existed (its settings lack the flag) resumes a run without
  // groups; a run with groups is refused.
  train::RunSpec later = spec();
  later.identity.training["param-groups"] = "";
  train::TrainOptions resume_plain = options();
  resume_plain.resume = dir.file("old.ckpt");
  train::TrainOptions old = options();
  old.steps = 25;
  old.save = resume_plain.resume;
  train::Trainer(spec(), old).run(line_task());
  CHECK(train::Trainer(later, resume_plain).run(line_task()).steps == 60);
  later.identity.training["param-groups"] = o.param_groups.to_string();
  check_error([&] { train::Trainer(later, resume_plain).run(line_task()); },
              {"--resume", "does not record --param-groups"});
}

TEST_CASE("trainer: the best checkpoint, --patience and the plateau schedule follow the best metric") {
  TempDir dir;
  train::TrainOptions o = options();
  o.eval_every = 5;
  o.save_best = dir.file("best.ckpt");
  const train::Report r = train::Trainer(spec(), o).run(line_task());
  const Checkpoint best = load_checkpoint(o.save_best);
  CHECK(best.metadata["step"] == r.best_step);
  CHECK(best.metadata["trainer"]["value"] == r.best);

  // A metric that never improves after the first evaluation: stop after `patience` more.
  o = options();
  o.eval_every = 5;
  o.patience = 3;
  o.log = dir.file("patience.jsonl");
  const train::Report stopped = train::Trainer(spec(), o).run(line_task(/*frozen=*/true));
  CHECK(stopped.stopped_early);
  CHECK(stopped.steps == 20);  // evaluations at 5 (the best), 10, 15, 20
  CHECK(stopped.best_step == 5);
  CHECK(read_log(o.log).back()["stopped_early"] == true);

  // plateau:patience=0 halves the rate at every evaluation without a better loss.
  o = options();
  o.eval_every = 5;
  o.steps = 20;
  o.schedule = optim::ScheduleConfig::parse("plateau:factor=0.5,patience=0");
  o.save = dir.file("plateau.ckpt");
  train::Trainer(spec(), o).run(line_task(/*frozen=*/true));
  const Checkpoint plateau = load_checkpoint(o.save);
  CHECK(plateau.metadata["optimizer"]["lr"] == doctest::Approx(0.3 / 8));  // reduced at 10, 15, 20
}

TEST_CASE("trainer: --eval-only evaluates a checkpoint and trains nothing") {
  TempDir dir;
  train::TrainOptions o = options();
  o.save = dir.file("run.ckpt");
  const train::Report trained = train::Trainer(spec(), o).run(line_task());

  train::TrainOptions eval = options();
  eval.resume = o.save;
  eval.eval_only = true;
  const train::Report r = train::Trainer(spec(), eval).run(line_task());
  CHECK(r.eval_only);
  CHECK(r.steps == 60);
  CHECK(r.metric("loss") == trained.metric("loss"));
  CHECK(std::isnan(r.train_loss));
  // Evaluating needs only the model's settings: another optimizer is fine.
  train::RunSpec other = spec();
  other.identity.training["optimizer"] = "adam";
  CHECK(train::Trainer(other, eval).run(line_task()).metric("loss") == trained.metric("loss"));
}

TEST_CASE("trainer: --eval-only of a checkpoint with NaN weights is an error, not a NaN report") {
  TempDir dir;
  train::TrainOptions o = options();
  o.save = dir.file("run.ckpt");
  train::Trainer(spec(), o).run(line_task());
  // A checkpoint that is valid as a file (checksum and all) but whose weights are NaN.
  Checkpoint poisoned = load_checkpoint(o.save);
  for (auto& entry : poisoned.tensors)
    if (entry.second.dtype() == DType::Float32) entry.second = full_like(entry.second, std::nan(""));
  save_checkpoint(dir.file("nan.ckpt"), poisoned);

  train::TrainOptions eval = options();
  eval.resume = dir.file("nan.ckpt");
  eval.eval_only = true;
  check_error([&] { train::Trainer(spec(), eval).run(line_task()); },
              {"--eval-only", "nan.ckpt", "evaluates to a loss of NaN"});
}

TEST_CASE("trainer: a loss that is not finite stops training with the step") {
  train::TrainOptions o = options();
  o.optimizer = optim::OptimizerConfig::parse("sgd:lr=1e30");
  check_error([&] { train::Trainer(spec(), o).run(line_task()); }, {"training", "the loss is", "at step"});
}

TEST_CASE("trainer: bad options are refused naming the flag") {
  const auto refused = [](void (*change)(train::TrainOptions&), std::vector<std::string> parts) {
    train::TrainOptions o = options();
    change(o);
    check_error([&] { train::check_options(o); }, parts);
    check_error([&] { train::Trainer(spec(), o).run(line_task()); }, parts);
  };
  // (A config text its parser refuses never reaches the options: tests/test_app_options.cpp.)
  refused([](train::TrainOptions& o) { o.clip = -1; }, {"--clip"});
  refused([](train::TrainOptions& o) { o.clip = NAN; }, {"--clip"});
  refused([](train::TrainOptions& o) { o.steps = 0; }, {"--steps", "at least 1"});
  refused([](train::TrainOptions& o) { o.eval_every = -1; }, {"--eval-every"});
  refused([](train::TrainOptions& o) { o.patience = -2; }, {"--patience"});
  refused([](train::TrainOptions& o) { o.threads = 100000; }, {"--threads", "100000"});
  refused([](train::TrainOptions& o) { o.save_every = 5; }, {"--save-every", "--save"});
  refused([](train::TrainOptions& o) { o.eval_only = true; }, {"--eval-only", "--resume"});
  refused([](train::TrainOptions& o) { o.device = "tpu"; }, {"--device"});
  if (!cuda::is_available()) {
    train::TrainOptions o = options();
    o.device = "cuda";
    check_error([&] { train::Trainer(spec(), o).run(line_task()); }, {"--device", "GPU"});
  }
  train::TrainOptions o = options();
  o.resume = "/nonexistent/run.ckpt";
  check_error([&] { train::Trainer(spec(), o).run(line_task()); }, {"/nonexistent/run.ckpt"});
}

TEST_CASE("trainer: a metrics log that cannot be opened, and a best metric the task does not report") {
  train::TrainOptions o = options();
  o.log = "/nonexistent/dir/log.jsonl";
  check_error([&] { train::Trainer(spec(), o).run(line_task()); }, {"--log", "/nonexistent/dir/log.jsonl"});
  train::RunSpec s = spec();
  s.best = {"accuracy", train::Goal::Max};
  check_error([&] { train::Trainer(s, options()).run(line_task()); }, {"metric", "accuracy"});
}

namespace {

// A LineTask that records the phase its attention is set for, and whose evaluation can throw.
class PhasedTask : public LineTask {
 public:
  PhasedTask(Generator& gen, std::vector<train::Phase>& phases, bool throws)
      : LineTask(gen), phases_(phases), throws_(throws) {}
  void use_attention(train::Phase phase) override { phases_.push_back(phase); }
  train::Evaluation evaluate() override {
    CHECK(phases_.back() == train::Phase::Evaluation);  // evaluated with the evaluation attention
    TP_CHECK(!throws_, "PhasedTask", "evaluation failed");
    return LineTask::evaluate();
  }

 private:
  std::vector<train::Phase>& phases_;
  bool throws_;
};

}  // namespace

TEST_CASE("trainer: evaluation runs with the evaluation attention and restores the training one, also on a throw") {
  using train::Phase;
  for (const bool throws : {false, true}) {
    CAPTURE(throws);
    std::vector<Phase> phases;
    train::TrainOptions o = options();
    o.steps = 4, o.eval_every = 2;
    const train::TaskFactory make = [&](Generator& gen, Device) {
      return std::make_unique<PhasedTask>(gen, phases, throws);
    };
    if (throws) {
      check_error([&] { train::Trainer(spec(), o).run(make); }, {"evaluation failed"});
      CHECK(phases == std::vector<Phase>{Phase::Evaluation, Phase::Training});
    } else {
      train::Trainer(spec(), o).run(make);
      CHECK(phases == std::vector<Phase>{Phase::Evaluation, Phase::Training, Phase::Evaluation, Phase::Training});
    }
  }
  // The scope alone: a model left in eval mode and with the evaluation attention by a throw is not.
  Generator gen(0);
  std::vector<Phase> phases;
  PhasedTask task(gen, phases, true);
  try {
    const train::EvaluationScope scope(task);
    CHECK(!task.model().is_training());
    CHECK(!grad_mode_enabled());
    task.evaluate();
  } catch (const Error&) {
  }
  CHECK(task.model().is_training());
  CHECK(grad_mode_enabled());
  CHECK(phases == std::vector<Phase>{Phase::Evaluation, Phase::Training});
}
