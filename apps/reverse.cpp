#include "apps/reverse.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "apps/options.h"
#include "ops/creation.h"
#include "metrics/accuracy.h"
#include "models/inspection.h"
#include "models/sequence_tagger.h"
#include "ops/index.h"
#include "ops/loss.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry::app {

namespace {

constexpr const char* kTask = "reverse";

OptionTable<ReverseOptions> make_table() {
  using O = ReverseOptions;
  OptionTable<O> t({{"default", ReverseOptions()}});
  t.add("--length", &O::length, "sequence length N", between(1, 1 << 16), Recorded::Training);
  t.add("--symbols", &O::symbols, "vocabulary size", between(2, 1 << 20), Recorded::Model);
  t.add("--layers", &O::layers, "encoder layers", between(1, 1024), Recorded::Model);
  t.add("--heads", &O::heads, "attention heads", between(1, 4096), Recorded::Model);
  t.add("--head-dim", &O::head_dim, "width of each head", between(1, 65536), Recorded::Model);
  t.add("--ff", &O::ff, "feed-forward width", between(1, 1 << 20), Recorded::Model);
  add_attention_options(t, &O::attention, &O::eval_attention);
  t.add("--batch", &O::batch, "sequences per step", between(1, 1 << 20), Recorded::Training);
  t.add("--eval-batches", &O::eval_batches, "held-out batches per evaluation", between(1, 1 << 20));
  add_train_options(t, &O::train);
  return t;
}

const OptionTable<ReverseOptions>& table() {
  static const OptionTable<ReverseOptions> t = make_table();
  return t;
}

class ReverseRun : public InspectableTask {
 public:
  // A neural-clustering model trains with the default µ, ν of eq. 17 (nn::ClusteringLossWeights).
  ReverseRun(const ReverseOptions& o, const Attentions& a, Generator& gen, Device device)
      : InspectableTask({nn::ClusteringLossWeights().mu, nn::ClusteringLossWeights().nu,
                         train::derived_seed(o.train.seed, 3)}),
        o_(o),
        a_(a),
        device_(device),
        model_(tagger(o, a), gen) {
    model_.to(device);
    std::vector<int64_t> backwards(size_t(o.length));
    for (int64_t i = 0; i < o.length; ++i) backwards[size_t(i)] = o.length - 1 - i;
    backwards_ = from_vector(backwards, {o.length}, device);
    Generator held_out(train::derived_seed(o.train.seed, 1));
    for (int64_t i = 0; i < o.eval_batches; ++i) held_out_.push_back(sample(held_out));
  }

  nn::Module& model() override { return model_; }

  train::Step step(Generator& gen) override {
    const Tensor input = sample(gen), target = index_select(input, 1, backwards_);
    const auto out = model_.forward(input, Tensor(), gen);
    const Tensor loss = cross_entropy(out.logits, target);
    return {out.objective(loss), loss.item<double>(), {}, double(input.numel())};
  }

  void use_attention(train::Phase p) override { model_.set_attention(p == train::Phase::Evaluation ? a_.eval : a_.train); }

  train::Evaluation evaluate() override {
    Generator gen(train::derived_seed(o_.train.seed, 2));
    metrics::Accuracy tokens;
    int64_t sequences = 0, whole = 0;  // sequences, and those right at every position
    double loss = 0;
    for (const Tensor& input : held_out_) {
      const Tensor target = index_select(input, 1, backwards_);
      const auto out = model_.forward(input, Tensor(), gen);
      loss += cross_entropy(out.logits, target).item<double>();
      const std::vector<int64_t> p = argmax(out.logits, -1).to_vector<int64_t>(), t = target.to_vector<int64_t>();
      tokens.add(p, t);
      for (size_t row = 0; row < p.size(); row += size_t(o_.length), ++sequences)
        whole += std::equal(p.begin() + row, p.begin() + row + o_.length, t.begin() + row);
    }
    return {{{"token_accuracy", tokens.value()}, {"sequence_accuracy", double(whole) / double(sequences)},
             {"loss", loss / double(held_out_.size())}},
            double(tokens.total())};
  }

  std::string cannot_inspect() const override { return models::nothing_to_inspect(a_.train); }

  models::Inspection inspection(int64_t batches, uint64_t seed) override {
    TP_CHECK(batches >= 1 && batches <= int64_t(held_out_.size()), "--batches", "the run holds ", held_out_.size(),
             " held-out batches, asked for ", batches);
    const Tensor input = concat(std::vector<Tensor>(held_out_.begin(), held_out_.begin() + batches), 0);
    const Tensor target = index_select(input, 1, backwards_);
    return models::inspect(
        model_,
        [&](Generator& gen) {
          const auto out = model_.forward(input, Tensor(), gen);
          return models::InspectedPass{{{"encoder", model_.encoder, a_.train, out.layers, Tensor()}},
                                       cross_entropy(out.logits, target)};
        },
        inspection_options(seed));
  }

 private:
  static models::SequenceTaggerOptions tagger(const ReverseOptions& o, const Attentions& a) {
    models::SequenceTaggerOptions m;
    m.vocabulary = m.labels = o.symbols;
    m.encoder = {o.layers, o.heads, o.head_dim, o.ff, /*dropout=*/0.0, a.train, /*clustering=*/{}};
    return m;
  }
  Tensor sample(Generator& gen) const { return to(randint(0, o_.symbols, {o_.batch, o_.length}, gen), device_); }

  ReverseOptions o_;
  Attentions a_;
  Device device_;
  models::SequenceTagger model_;
  Tensor backwards_;              // (N): N-1, ..., 0
  std::vector<Tensor> held_out_;  // (B, N) each
};

}  // namespace

ReverseOptions::ReverseOptions() {
  train.optimizer = optim::OptimizerConfig::parse("adam:lr=0.003");
  train.clip = 1.0;
  train.steps = 300;
  train.eval_every = 100;
}

Attentions check_reverse_options(const ReverseOptions& o) {
  table().check(o);
  train::check_options(o.train);
  check_model_width(o.heads, o.head_dim);
  const Attentions a = attentions(o.attention, o.eval_attention);
  check_attention_memory(a, o.batch, o.heads, o.length);
  return a;
}

namespace {

PreparedRun prepare_reverse(const ReverseOptions& o) {
  const Attentions a = attentions(o.attention, o.eval_attention);
  train::RunSpec spec;
  spec.identity = table().identity(kTask, o);
  spec.best = {"token_accuracy", train::Goal::Max};
  spec.log_fields = {{"attention", a.train.to_string()}, {"eval_attention", a.eval.to_string()}};
  return {spec, [o, a](Generator& gen, Device device, const dist::World&) {
            return std::make_unique<ReverseRun>(o, a, gen, device);
          }};
}

TrainingApp<ReverseOptions> reverse_app() {
  TrainingApp<ReverseOptions> app;
  app.name = app.task = kTask;  // the task: --eval-only --resume reads the checkpoint's settings
  app.description = "Train a Transformer to reverse random sequences: the smallest app on the training harness.";
  app.table = std::make_shared<OptionTable<ReverseOptions>>(make_table());
  app.check = check_reverse_options;
  app.prepare = prepare_reverse;
  app.run = run_reverse;
  app.inspected = [](ReverseOptions& o, const CheckpointRequest& request) {
    o.eval_batches = std::max(o.eval_batches, request.batches);
  };
  app.headline = [](const ReverseOptions& o, const train::Report& r) {
    return std::string(kTask) + ": N = " + std::to_string(o.length) + ", step " + std::to_string(r.steps) + ", " +
           r.fields.at("attention").get<std::string>();
  };
  return app;
}

}  // namespace

train::Report run_reverse(const ReverseOptions& o) {
  check_reverse_options(o);
  return run_prepared(prepare_reverse(o), o.train);
}

InspectedCheckpoint inspect_reverse_checkpoint(const CheckpointRequest& request) {
  return inspect_app_checkpoint(reverse_app(), request);
}

void add_reverse(CommandLine& cli) { add_training_app(cli, reverse_app()); }

}  // namespace tapestry::app
