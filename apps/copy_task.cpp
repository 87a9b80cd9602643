#include "apps/copy_task.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "apps/options.h"
#include "data/copy_task.h"
#include "metrics/accuracy.h"
#include "models/inspection.h"
#include "models/sequence_tagger.h"
#include "ops/loss.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry::app {

using attention::AttentionConfig;
using data::CopyTask;
using data::CopyTaskBatch;

namespace {

constexpr const char* kTask = "copy-task";

OptionTable<CopyTaskOptions> make_table() {
  using O = CopyTaskOptions;
  OptionTable<O> t({{"paper", copy_task_preset(Preset::Paper)}, {"smoke", copy_task_preset(Preset::Smoke)}});
  t.add("--length", &O::length, "L: word length; sequences are 2L + 2 long", between(1, 1 << 20), Recorded::Training);
  t.add("--layers", &O::layers, "encoder layers", between(1, 1024), Recorded::Model);
  t.add("--heads", &O::heads, "attention heads", between(1, 4096), Recorded::Model);
  t.add("--head-dim", &O::head_dim, "width of each head (model width = heads x head-dim)", between(1, 65536),
        Recorded::Model);
  t.add("--ff", &O::ff, "feed-forward width", between(1, 1 << 20), Recorded::Model);
  t.add("--dropout", &O::dropout, "dropout probability", in_range(0, 1, Bounds::HighOpen), Recorded::Training);
  add_attention_options(t, &O::attention, &O::eval_attention);
  t.add("--batch", &O::batch, "sequences per step", between(1, 1 << 20), Recorded::Training);
  t.add("--eval-batches", &O::eval_batches, "held-out batches per evaluation", between(1, 1 << 20));
  add_clustering_weights(t, &O::mu, &O::nu);
  add_train_options(t, &O::train);
  return t;
}

const OptionTable<CopyTaskOptions>& table() {
  static const OptionTable<CopyTaskOptions> t = make_table();
  return t;
}

models::SequenceTaggerOptions tagger_options(const CopyTaskOptions& o, const AttentionConfig& attention) {
  models::SequenceTaggerOptions m;
  m.vocabulary = m.labels = CopyTask::kVocabulary;
  m.encoder = {o.layers, o.heads, o.head_dim, o.ff, o.dropout, attention, {o.mu, o.nu}};
  return m;
}

// The held-out batches of a run: `count` batches drawn once from a generator of their own.
std::vector<CopyTaskBatch> held_out_batches(const CopyTaskOptions& o, int64_t count) {
  CopyTask task;
  task.length = o.length;
  Generator held_out(train::derived_seed(o.train.seed, 1));
  std::vector<CopyTaskBatch> batches;
  for (int64_t i = 0; i < count; ++i) batches.push_back(task.sample(o.batch, held_out));
  return batches;
}

class CopyTaskRun : public InspectableTask {
 public:
  CopyTaskRun(const CopyTaskOptions& o, const Attentions& attentions, Generator& gen, Device device)
      : InspectableTask({o.mu, o.nu, train::derived_seed(o.train.seed, 3)}),
        model_(tagger_options(o, attentions.train), gen),
        attentions_(attentions),
        batch_(o.batch),
        eval_hash_seed_(train::derived_seed(o.train.seed, 2)),
        device_(device) {
    model_.to(device);
    task_.length = o.length;
    for (const CopyTaskBatch& b : held_out_batches(o, o.eval_batches))
      held_out_.push_back({to(b.input, device), to(b.target, device), b.masked});
  }

  nn::Module& model() override { return model_; }

  train::Step step(Generator& gen) override {
    const CopyTaskBatch batch = task_.sample(batch_, gen);
    const Tensor target = to(batch.target, device_);
    const auto out = model_.forward(to(batch.input, device_), Tensor(), gen);
    const Tensor loss = cross_entropy(out.logits, target);
    metrics::Accuracy masked;
    masked.add(argmax(out.logits.detach(), -1).to_vector<int64_t>(), batch.target.to_vector<int64_t>(),
               batch.masked.to_vector<bool>());
    return {out.objective(loss), loss.item<double>(), {{"masked acc", masked.value()}},
            double(batch.target.numel())};
  }

  std::string cannot_inspect() const override { return models::nothing_to_inspect(attentions_.train); }

  models::Inspection inspection(int64_t batches, uint64_t seed) override {
    TP_CHECK(batches >= 1 && batches <= int64_t(held_out_.size()), "--batches", "the run holds ", held_out_.size(),
             " held-out batches, asked for ", batches);
    std::vector<Tensor> inputs, targets;
    for (int64_t i = 0; i < batches; ++i) inputs.push_back(held_out_[size_t(i)].input), targets.push_back(held_out_[size_t(i)].target);
    const Tensor tokens = concat(inputs, 0), target = concat(targets, 0);
    return models::inspect(
        model_,
        [&](Generator& gen) {
          const auto out = model_.forward(tokens, Tensor(), gen);
          return models::InspectedPass{{{"encoder", model_.encoder, attentions_.train, out.layers, Tensor()}},
                                       cross_entropy(out.logits, target)};
        },
        inspection_options(seed));
  }

  void use_attention(train::Phase p) override {
    model_.set_attention(p == train::Phase::Evaluation ? attentions_.eval : attentions_.train);
  }

  // With the evaluation attention, on the held-out batches; hashing draws from a generator seeded
  // afresh, so an evaluation is a function of the weights alone.
  train::Evaluation evaluate() override {
    Generator gen(eval_hash_seed_);
    metrics::Accuracy masked, tokens;
    double loss = 0;
    for (const CopyTaskBatch& batch : held_out_) {
      const auto out = model_.forward(batch.input, Tensor(), gen);
      loss += cross_entropy(out.logits, batch.target).item<double>();
      const std::vector<int64_t> predicted = argmax(out.logits, -1).to_vector<int64_t>();
      const std::vector<int64_t> target = batch.target.to_vector<int64_t>();
      masked.add(predicted, target, batch.masked.to_vector<bool>());
      tokens.add(predicted, target);
    }
    // With no masked position (a mask fraction that hid nothing) every masked symbol was copied.
    const double masked_accuracy = masked.total() == 0 ? 1.0 : masked.value();
    return {{{"masked_accuracy", masked_accuracy}, {"token_accuracy", tokens.value()},
             {"loss", loss / double(held_out_.size())}},
            double(tokens.total())};
  }

 private:
  models::SequenceTagger model_;
  Attentions attentions_;
  CopyTask task_;
  int64_t batch_;
  std::vector<CopyTaskBatch> held_out_;  // input, target on the device; masked on the CPU
  uint64_t eval_hash_seed_;
  Device device_;
};

}  // namespace

CopyTaskOptions::CopyTaskOptions() {
  train.optimizer = optim::OptimizerConfig::parse("radam:lr=2e-4");
  train.steps = 5000;
  train.eval_every = 500;
}

CopyTaskOptions copy_task_preset(Preset preset) {
  CopyTaskOptions o;  // the defaults are the paper's
  if (preset == Preset::Smoke) {
    // Measured (seeds 0-2, improved-clustered:clusters=15,topk=32): masked accuracy ~0.8-0.9 at step
    // 300, >= 0.95 from step 400, ~0.99 at 500-600. L = 31 keeps N = 64 above top-k = 32, so
    // improved-clustered is an approximation here, not full attention in disguise.
    o.layers = 2;
    o.heads = 4;
    o.head_dim = 16;
    o.ff = 128;
    o.train.optimizer = optim::OptimizerConfig::parse("adam:lr=4e-3");
    o.train.clip = 1.0;
    o.train.steps = 600;
    o.train.eval_every = 100;
    o.eval_batches = 8;
    // This model's ops are too small for a second thread to pay off, and on a busy machine a
    // second thread made every step ~10x slower (parallel regions wait for a descheduled thread).
    o.train.threads = 1;
  }
  return o;
}

Attentions check_copy_task_options(const CopyTaskOptions& o) {
  table().check(o);
  train::check_options(o.train);
  check_model_width(o.heads, o.head_dim);
  const Attentions a = attentions(o.attention, o.eval_attention);
  check_attention_memory(a, o.batch, o.heads, 2 * o.length + 2);
  check_clustering_weights(o.mu, o.nu, {a.train});
  return a;
}

namespace {

PreparedRun prepare_copy_task(const CopyTaskOptions& o) {
  const Attentions a = attentions(o.attention, o.eval_attention);
  train::RunSpec spec;
  spec.identity = table().identity(kTask, o);
  spec.best = {"masked_accuracy", train::Goal::Max};
  spec.log_fields = {{"attention", a.train.to_string()}, {"eval_attention", a.eval.to_string()}, {"length", o.length}};
  return {spec, [o, a](Generator& gen, Device device, const dist::World&) {
            return std::make_unique<CopyTaskRun>(o, a, gen, device);
          }};
}

TrainingApp<CopyTaskOptions> copy_task_app() {
  TrainingApp<CopyTaskOptions> app;
  app.name = app.task = kTask;  // the task: --eval-only --resume reads the checkpoint's settings
  app.description =
      "Train a Transformer on the masked copy task (clustered-attention paper, supplementary C.2) and report how "
      "many masked symbols it restores. Flags override the preset's values.";
  app.table = std::make_shared<OptionTable<CopyTaskOptions>>(make_table());
  app.check = check_copy_task_options;
  app.prepare = prepare_copy_task;
  app.run = run_copy_task;
  app.inspected = [](CopyTaskOptions& o, const CheckpointRequest& request) {
    o.eval_batches = std::max(o.eval_batches, request.batches);
  };
  app.headline = [](const CopyTaskOptions& o, const train::Report& r) {
    const std::string trained = r.fields.at("attention"), evaluated = r.fields.at("eval_attention");
    return std::string(kTask) + ": L = " + std::to_string(o.length) + ", step " + std::to_string(r.steps) +
           ", trained with " + trained + (evaluated != trained ? ", evaluated with " + evaluated : "");
  };
  return app;
}

}  // namespace

train::Report run_copy_task(const CopyTaskOptions& o) {
  check_copy_task_options(o);
  return run_prepared(prepare_copy_task(o), o.train);
}

InspectedCheckpoint inspect_copy_task_checkpoint(const CheckpointRequest& request) {
  return inspect_app_checkpoint(copy_task_app(), request);
}

void add_copy_task(CommandLine& cli) { add_training_app(cli, copy_task_app()); }

}  // namespace tapestry::app
