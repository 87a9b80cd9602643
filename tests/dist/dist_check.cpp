// The program the data-parallel tests start under mpirun (tests/dist/*.sh): a small regression
// trained by the Trainer, whose examples are a function of the step alone, so that W ranks with a
// batch of b each see exactly the examples of one process with a batch of W·b; and a comparison of
// two checkpoints' weights.
//
//   tapestry_dist_check train --batch B --steps N --save FILE [--distributed] [--resume FILE]
//                             [--fail-rank R --fail-step S --fail-how error|kill]
//   tapestry_dist_check compare A.ckpt B.ckpt --atol A --rtol R
//
// Shape letters: B rows of one rank's batch, W ranks, F = 8 inputs, K = 4 outputs, U = 16 hidden.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <memory>
#include <string>

#include "tapestry.h"

using namespace tapestry;

namespace {

constexpr int64_t kInputs = 8, kHidden = 16, kOutputs = 4;
constexpr uint64_t kDataSeed = 12345;

// Step t's examples: rows of Generator(kDataSeed) at counter t · 2^24, the same on every rank.
struct Examples {
  Tensor x, y;  // (W·B, F), (W·B, K)
};

Examples examples(int64_t step, int64_t rows, const Tensor& teacher) {
  Generator data(kDataSeed);
  data.set_state(kDataSeed, uint64_t(step) << 24);
  const Tensor x = rand({rows, kInputs}, data) * 2.0 - 1.0;
  return {x, tanh(matmul(x, teacher))};
}

class Mlp : public nn::Module {
 public:
  explicit Mlp(Generator& gen)
      : Module("Mlp"),
        hidden_(register_module("hidden", std::make_shared<nn::Linear>(kInputs, kHidden, gen))),
        out_(register_module("out", std::make_shared<nn::Linear>(kHidden, kOutputs, gen))) {}
  Tensor forward(const Tensor& x) { return out_->forward(tanh(hidden_->forward(x))); }

 private:
  std::shared_ptr<nn::Linear> hidden_, out_;
};

struct Failure {
  int rank = -1;
  int64_t step = 0;
  std::string how = "error";
};

class RegressionTask : public train::Task {
 public:
  RegressionTask(int64_t batch, const dist::World& world, Failure failure, Generator& gen)
      : model_(gen), batch_(batch), world_(world), failure_(std::move(failure)) {
    Generator fixed(kDataSeed + 1);
    teacher_ = rand({kInputs, kOutputs}, fixed) * 2.0 - 1.0;
    held_out_ = examples(-1, 256, teacher_);
  }
  nn::Module& model() override { return model_; }

  train::Step step(Generator& /*gen*/) override {
    ++position_;
    if (world_.rank() == failure_.rank && position_ == failure_.step) {
      std::fprintf(stderr, "tapestry_dist_check: rank %d fails at step %lld (%s)\n", world_.rank(),
                   (long long)position_, failure_.how.c_str());
      std::fflush(stderr);
      if (failure_.how == "kill") std::raise(SIGKILL);
      fail("tapestry_dist_check", "an injected failure at step ", position_);
    }
    // This rank's rows of the global batch.
    const Examples all = examples(position_, world_.size() * batch_, teacher_);
    const int64_t first = world_.rank() * batch_;
    const Tensor loss = mse(slice(all.x, 0, first, first + batch_), slice(all.y, 0, first, first + batch_));
    return {loss, loss.item<double>(), {}, double(batch_)};
  }

  train::Evaluation evaluate() override { return {{{"loss", mse(held_out_.x, held_out_.y).item<double>()}}, 256}; }
  nlohmann::json data_state() const override { return {{"position", position_}}; }
  void load_data_state(const nlohmann::json& state) override { position_ = state.value("position", int64_t(0)); }

 private:
  Tensor mse(const Tensor& x, const Tensor& y) {
    const Tensor error = model_.forward(x) - y;
    return mean(error * error);
  }
  Mlp model_;
  int64_t batch_;
  dist::World world_;
  Failure failure_;
  Tensor teacher_;
  Examples held_out_;
  int64_t position_ = 0;
};

int train_command(int64_t batch, train::TrainOptions o, const Failure& failure) {
  train::RunSpec spec;
  // The batch is not recorded: a run may resume with another number of ranks and batch per rank.
  spec.identity = {"dist-check", {{"hidden", kHidden}}, {{"optimizer", o.optimizer.to_string()}}};
  spec.best = {"loss", train::Goal::Min};
  spec.unit = "examples";
  train::Trainer trainer(spec, o);
  const train::Report r = trainer.run([&](Generator& gen, Device) {
    return std::make_unique<RegressionTask>(batch, trainer.world(), failure, gen);
  });
  std::printf("%s\n", r.to_json().dump().c_str());
  return 0;
}

// Whether every model tensor of a and b agrees to |a - b| ≤ atol + rtol·|b|; prints the largest
// difference.
int compare_command(const std::string& a_path, const std::string& b_path, double atol, double rtol) {
  const Checkpoint a = load_checkpoint(a_path), b = load_checkpoint(b_path);
  double largest = 0, worst = 0;  // largest |a - b|; largest |a - b| / (atol + rtol·|b|)
  int64_t tensors = 0;
  for (const auto& [name, tb] : b.tensors) {
    if (name.rfind("model.", 0) != 0) continue;
    const auto found = a.tensors.find(name);
    TP_CHECK(found != a.tensors.end(), "compare", "'", a_path, "' has no tensor ", name);
    const std::vector<float> va = found->second.to_vector<float>(), vb = tb.to_vector<float>();
    TP_CHECK(va.size() == vb.size(), "compare", name, " has ", va.size(), " and ", vb.size(), " elements");
    for (size_t i = 0; i < va.size(); ++i) {
      const double d = std::fabs(double(va[i]) - double(vb[i]));
      largest = std::max(largest, d);
      worst = std::max(worst, d / (atol + rtol * std::fabs(double(vb[i]))));
    }
    ++tensors;
  }
  TP_CHECK(tensors > 0, "compare", "'", b_path, "' holds no model tensors");
  std::printf("compare: %lld model tensors, largest |a - b| = %.3g, %.3g of the tolerance (atol %g, rtol %g)\n",
              (long long)tensors, largest, worst, atol, rtol);
  return worst <= 1.0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App cli("the data-parallel tests' program");
  cli.require_subcommand(1);
  int64_t batch = 4;
  train::TrainOptions o;
  o.optimizer = optim::OptimizerConfig::parse("adam:lr=0.01");
  o.steps = 50;
  o.eval_every = 0;
  o.device = "cpu";
  o.threads = 1;
  o.progress = false;
  Failure failure;
  CLI::App* train_cmd = cli.add_subcommand("train", "train the regression");
  train_cmd->add_option("--batch", batch, "rows per rank and step");
  train_cmd->add_option("--steps", o.steps, "steps");
  train_cmd->add_option("--save", o.save, "checkpoint at the end");
  train_cmd->add_option("--resume", o.resume, "continue this checkpoint");
  train_cmd->add_option("--log", o.log, "JSON lines");
  train_cmd->add_flag("--distributed", o.distributed, "one rank of an MPI job");
  train_cmd->add_option("--fail-rank", failure.rank, "the rank that fails");
  train_cmd->add_option("--fail-step", failure.step, "the step at which it fails");
  train_cmd->add_option("--fail-how", failure.how, "error (throws) or kill (SIGKILL)")
      ->check(CLI::IsMember({"error", "kill"}));
  std::string a, b;
  double atol = 0, rtol = 0;
  CLI::App* compare_cmd = cli.add_subcommand("compare", "compare two checkpoints' weights");
  compare_cmd->add_option("a", a)->required();
  compare_cmd->add_option("b", b)->required();
  compare_cmd->add_option("--atol", atol);
  compare_cmd->add_option("--rtol", rtol);
  CLI11_PARSE(cli, argc, argv);
  try {
    if (train_cmd->parsed()) return train_command(batch, o, failure);
    return compare_command(a, b, atol, rtol);
  } catch (const Error& e) {
    std::fprintf(stderr, "tapestry_dist_check: %s\n", e.what());
    return 1;
  }
}
