#include "apps/asr.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <vector>

#include "apps/options.h"
#include "data/batch.h"
#include "data/speech_corpus.h"
#include "models/inspection.h"
#include "models/speech_recognition.h"
#include "train/saved_model.h"

namespace tapestry::app {

namespace {

constexpr const char* kTask = "asr";

OptionTable<AsrOptions> make_table() {
  using O = AsrOptions;
  OptionTable<O> t({{"default", asr_preset(AsrPreset::Default)}, {"smoke", asr_preset(AsrPreset::Smoke)}});
  t.add("--data", &O::data, "speech (the espeak-ng corpus of `make data`) or a folder of the same layout", {},
        Recorded::Training);
  t.add("--eval-split", &O::eval_split, "what evaluations score", one_of({"train", "valid", "test", "asterisk"}));
  t.add("--max-train", &O::max_train, "train on the first N utterances, 0: all", between(0, 1 << 30),
        Recorded::Training);
  t.add("--max-eval", &O::max_eval, "evaluate the first N utterances of the split, 0: all", between(0, 1 << 30));
  t.add("--mel-bins", &O::mel_bins, "log-mel filterbank features per frame", between(1, 512), Recorded::Model);
  t.add("--high-hz", &O::high_hz, "top of the mel filters (at most 8000: half the 16 kHz rate)",
        in_range(0, 8000, Bounds::LowOpen), Recorded::Model);
  t.add("--stack", &O::stack, "frames stacked into one encoder position (time subsampling)", between(1, 64),
        Recorded::Model);
  t.add("--batch-frames", &O::batch_frames, "padded frames per training batch", between(1, 1 << 30),
        Recorded::Training);
  t.add("--layers", &O::layers, "encoder layers", between(1, 1024), Recorded::Model);
  t.add("--heads", &O::heads, "attention heads", between(1, 4096), Recorded::Model);
  t.add("--head-dim", &O::head_dim, "width of each head (model width = heads x head-dim)", between(1, 65536),
        Recorded::Model);
  t.add("--ff", &O::ff, "feed-forward width", between(1, 1 << 20), Recorded::Model);
  t.add("--dropout", &O::dropout, "dropout probability", in_range(0, 1, Bounds::HighOpen), Recorded::Training);
  add_attention_options(t, &O::attention, &O::eval_attention);
  add_clustering_weights(t, &O::mu, &O::nu);
  using S = data::SpecAugmentOptions;
  t.add("--freq-masks", &O::spec_augment, &S::frequency_masks, "SpecAugment: frequency masks per training utterance",
        between(0, 64), Recorded::Training);
  t.add("--freq-width", &O::spec_augment, &S::frequency_width, "SpecAugment: the widest frequency mask, in mel bins",
        between(0, 1 << 20), Recorded::Training);
  t.add("--time-masks", &O::spec_augment, &S::time_masks, "SpecAugment: time masks per training utterance",
        between(0, 64), Recorded::Training);
  t.add("--time-width", &O::spec_augment, &S::time_width, "SpecAugment: the widest time mask, in frames",
        between(0, 1 << 20), Recorded::Training);
  t.add("--beam", &O::beam, "0: greedy decoding; N: CTC prefix beam search keeping N prefixes",
        between(0, kAsrMaxBeam));
  add_train_options(t, &O::train);
  return t;
}

const OptionTable<AsrOptions>& table() {
  static const OptionTable<AsrOptions> t = make_table();
  return t;
}

// ---- data ----

data::FilterbankOptions filterbank(const AsrOptions& o) {
  data::FilterbankOptions f;
  f.sample_rate = kAsrSampleRate;
  f.mel_bins = o.mel_bins;
  f.high_hz = o.high_hz;
  return f;
}

void note(const std::string& line) { std::fprintf(stderr, "asr: %s\n", line.c_str()); }

data::SpeechCorpus prepare(const AsrOptions& o) {
  data::SpeechCorpusOptions c{o.data, o.eval_split, o.max_train, o.max_eval, !o.train.eval_only, filterbank(o), o.stack,
                              "--data", note, o.train.progress ? note : nullptr};
  return data::read_speech_corpus(c);
}

models::SpeechRecognizerOptions model_options(const AsrOptions& o, int64_t phonemes,
                                              const attention::AttentionConfig& attention) {
  return {o.mel_bins, o.stack, phonemes + 1, {o.layers, o.heads, o.head_dim, o.ff, o.dropout, attention, {o.mu, o.nu}}};
}

// ---- the model's run ----

class AsrRun : public InspectableTask {
 public:
  AsrRun(const data::SpeechCorpus& p, const AsrOptions& o, const Attentions& a, Generator& gen, Device device,
         const dist::World& world)
      : InspectableTask({o.mu, o.nu, train::derived_seed(o.train.seed, 4)}),
        p_(p),
        a_(a),
        device_(device),
        beam_(o.beam),
        spec_augment_(o.spec_augment),
        model_(model_options(o, int64_t(p.inventory.size()), a.train), gen),
        sampler_(p.train_sampler(o.batch_frames, train::derived_seed(o.train.seed, 3), world.rank(), world.size())),
        eval_batches_(p.eval_batches(o.batch_frames)),
        eval_seed_(train::derived_seed(o.train.seed, 2)) {
    model_.to(device);
  }

  nn::Module& model() override { return model_; }

  train::Step step(Generator& gen) override {
    const models::RecognizedBatch b =
        models::recognition_batch(model_, p_.train, sampler_.next(), device_, gen, nullptr, &spec_augment_);
    return {b.out.objective(b.loss), b.loss.item<double>(), {}, double(b.frames)};
  }

  void use_attention(train::Phase p) override { model_.set_attention(p == train::Phase::Evaluation ? a_.eval : a_.train); }

  train::Evaluation evaluate() override {
    Generator gen(eval_seed_);
    const models::RecognitionScores s =
        models::evaluate_recognition(model_, p_.eval, eval_batches_, beam_, device_, gen);
    return {s.metrics, double(s.frames)};
  }

  nlohmann::json data_state() const override { return sampler_state(sampler_); }
  void load_data_state(const nlohmann::json& state) override { restore_sampler(sampler_, state); }

  std::string cannot_inspect() const override { return models::nothing_to_inspect(a_.train); }

  models::Inspection inspection(int64_t batches, uint64_t seed) override {
    const std::vector<int64_t> rows = first_batches(eval_batches_, batches);
    return models::inspect(
        model_,
        [&](Generator& gen) {
          const models::RecognizedBatch b = models::recognition_batch(model_, p_.eval, rows, device_, gen);
          return models::InspectedPass{{{"encoder", model_.encoder, a_.train, b.out.layers, b.out.lengths}}, b.loss};
        },
        inspection_options(seed));
  }

 private:
  const data::SpeechCorpus& p_;
  Attentions a_;
  Device device_;
  int64_t beam_;
  data::SpecAugmentOptions spec_augment_;
  models::SpeechRecognizer model_;
  data::BatchSampler sampler_;  // over the training utterances
  data::BatchList eval_batches_;
  uint64_t eval_seed_;
};

train::RunIdentity identity(const AsrOptions& o, const std::vector<std::string>& inventory) {
  train::RunIdentity id = table().identity(kTask, o);
  id.model["phonemes"] = inventory;
  return id;
}

}  // namespace

AsrOptions::AsrOptions() {
  train.optimizer = optim::OptimizerConfig::parse("adam:lr=2e-3");
  train.schedule = optim::ScheduleConfig::parse("inverse-sqrt:warmup=200");
  train.clip = 1.0;
  train.steps = 1500;
  train.eval_every = 250;
}

AsrOptions asr_preset(AsrPreset preset) {
  AsrOptions o;
  if (preset == AsrPreset::Smoke) {
    o.layers = 2;
    o.heads = 2;
    o.head_dim = 16;
    o.ff = 128;
    o.dropout = 0.0;
    o.train.optimizer = optim::OptimizerConfig::parse("adam:lr=3e-3");
    o.train.schedule = optim::ScheduleConfig::parse("constant");
    o.train.steps = 300;
    o.train.eval_every = 100;
    o.train.threads = 1;
  }
  return o;
}

Attentions check_asr_options(const AsrOptions& o) {
  table().check(o);
  train::check_options(o.train);
  check_model_width(o.heads, o.head_dim);
  TP_CHECK(o.spec_augment.frequency_width <= o.mel_bins, "--freq-width", "a frequency mask of up to ",
           o.spec_augment.frequency_width, " bins does not fit --mel-bins ", o.mel_bins);
  const Attentions a = attentions(o.attention, o.eval_attention);
  // A rough guard: the batch's frames as utterances of 1000 frames, as positions. The speech set's are
  // shorter; speech-long's run to about 2,550 frames, where a batch's scores are up to 2.6 times this.
  check_attention_memory(a, std::max<int64_t>(1, o.batch_frames / 1000), o.heads, 1000 / o.stack + 1);
  check_clustering_weights(o.mu, o.nu, {a.train});
  return a;
}

namespace {

PreparedRun prepare_asr(const AsrOptions& o) {
  const Attentions a = attentions(o.attention, o.eval_attention);
  const auto p = std::make_shared<const data::SpeechCorpus>(prepare(o));
  train::RunSpec spec;
  spec.identity = identity(o, p->inventory);
  spec.best = {"per", train::Goal::Min};
  spec.unit = "frames";
  spec.log_fields = {{"data", o.data},
                     {"eval_split", o.eval_split},
                     {"decoding", o.beam > 0 ? "beam " + std::to_string(o.beam) : std::string("greedy")},
                     {"attention", a.train.to_string()},
                     {"eval_attention", a.eval.to_string()},
                     {"utterances", {{"train", p->train.size()}, {"eval", p->eval.size()}}},
                     {"infeasible", {{"train", p->train.infeasible}, {"eval", p->eval.infeasible}}},
                     {"phonemes", p->inventory.size()}};
  return {spec, [p, o, a](Generator& gen, Device device, const dist::World& world) {
            return std::make_unique<AsrRun>(*p, o, a, gen, device, world);
          }};
}

TrainingApp<AsrOptions> asr_train_app() {
  TrainingApp<AsrOptions> app;
  app.name = "train";
  app.task = kTask;  // --eval-only --resume reads the checkpoint's settings
  app.description =
      "Train a CTC phoneme recogniser on --data and report its phone error rate (PER) on --eval-split. Flags override "
      "the preset's values.";
  app.table = std::make_shared<OptionTable<AsrOptions>>(make_table());
  app.check = check_asr_options;
  app.prepare = prepare_asr;
  app.run = run_asr;
  app.inspected = [](AsrOptions& o, const CheckpointRequest& request) {
    o.train.resume = request.path;
    o.train.eval_only = true;  // reads the evaluation split alone
    o.train.progress = false;
  };
  app.headline = [](const AsrOptions& o, const train::Report& r) {
    const std::string trained = r.fields.at("attention"), evaluated = r.fields.at("eval_attention");
    return std::string(kTask) + ": " + o.eval_split + " split, step " + std::to_string(r.steps) + ", " +
           r.fields.at("decoding").get<std::string>() + " decoding, trained with " + trained +
           (evaluated != trained ? ", evaluated with " + evaluated : "");
  };
  return app;
}

}  // namespace

train::Report run_asr(const AsrOptions& o) {
  check_asr_options(o);
  return run_prepared(prepare_asr(o), o.train);
}

InspectedCheckpoint inspect_asr_checkpoint(const CheckpointRequest& request) {
  return inspect_app_checkpoint(asr_train_app(), request);
}

AsrCheckpoint read_asr_checkpoint(const std::string& path, const AsrOptions& options, const char* flag) {
  const nlohmann::json model = train::read_model_settings(path, kTask, flag);
  AsrCheckpoint c{options, {}};
  table().apply(c.options, model);  // the settings recorded as Recorded::Model
  try {
    c.phonemes = model.at("phonemes").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    fail(flag, "'", path, "': the model settings list no phonemes (", e.what(), ")");
  }
  TP_CHECK(!c.phonemes.empty(), flag, "'", path, "': the model settings list no phonemes");
  return c;
}

std::vector<std::vector<std::string>> transcribe(const std::string& model_path, const std::vector<std::string>& files,
                                                 const AsrOptions& options) {
  const AsrCheckpoint c = read_asr_checkpoint(model_path, options, "--model");
  const AsrOptions& o = c.options;
  const Attentions a = check_asr_options(o);
  Generator gen(0);
  models::SpeechRecognizer model(model_options(o, int64_t(c.phonemes.size()), a.train), gen);
  train::ResumedRun(model_path, identity(o, c.phonemes), train::Compare::ModelOnly).restore_model(model);
  model.set_attention(a.eval);
  return models::transcribe_files(model, files, filterbank(o), o.beam, c.phonemes, gen);
}

void add_asr(CommandLine& cli) {
  CLI::App* group = cli.add_group(
      kTask, "CTC phoneme recognition with a Transformer encoder (clustered-attention paper §4.1): train, eval, "
             "transcribe");
  const TrainingApp<AsrOptions> train_app = asr_train_app();
  add_training_app(cli, train_app, group);

  // eval: the settings come from the checkpoint, so it takes only the data, decoding and eval
  // attention flags.
  add_eval_app(cli, train_app, std::make_shared<OptionTable<AsrOptions>>(make_table()),
               {"--resume", "--data", "--eval-split", "--max-eval", "--eval-attention", "--beam", "--seed", "--device",
                "--threads", "--log"},
               kTask,
               "Evaluate the asr checkpoint --resume on --eval-split (PER, loss, forward time), with its own model "
               "settings, greedy or --beam decoding, and --eval-attention.",
               group);

  add_asr_transcribe(cli, group);
}

}  // namespace tapestry::app
