// `tapestry bench train`: the time of one training step — forward, backward, optimizer step — of a
// training app's model at its default preset, per attention (full and improved-clustered with 15
// clusters and k = 32 by default; neural-clustering builds the ClusterFormer encoder and adds its
// losses, eq. 17), with the step's matmul FLOPs against this device's matmul rate (its bound):
//
//   copy        the masked copy task's model (clustered-attention paper, supplementary §C.2): token
//               embedding (vocabulary 12) + sinusoidal positions, 4 post-norm encoder layers of 6 heads
//               × 32 (D = 192), feed-forward 768, dropout 0.1, a linear head, cross-entropy over every
//               position, RAdam; sequences of N = 2L + 2, batch 32 (--copy-lengths, --batch)
//   classifier  classify's (apps/classify.h, default preset): vocabulary 8000, 2 layers of 4 × 32,
//               feed-forward 256, dropout 0.1, mean pooling, 15 classes (Brown's genres), documents
//               of --max-length 2048 tokens, 16384 / 2048 = 8 a batch, cross-entropy, Adam 1e-3
//   speech      asr's (apps/asr.h, default preset): 40 mel bins stacked by 4, 4 layers of 4 × 16,
//               feed-forward 256, dropout 0.1, 50 phonemes + the blank (the speech set's inventory),
//               utterances of 260 frames (the speech set's mean: 65 encoder positions), 8000 / 260 =
//               30 a batch, targets of 32 phonemes, CTC, Adam 2e-3
//
// The inputs are random (tokens, labels, features): a step's time does not depend on their values.
// models::SequenceTagger, models::Classifier and models::SpeechRecognizer are the models the apps
// train; bench/peers/train.py is the same in PyTorch.
//
// Shape letters: B batch, N sequence length, D model width, V vocabulary.
#include <iostream>
#include <memory>
#include <utility>

#include "apps/asr.h"
#include "apps/bench.h"
#include "apps/classify.h"
#include "data/copy_task.h"
#include "models/classifier.h"
#include "models/sequence_tagger.h"
#include "models/speech_recognizer.h"
#include "tapestry.h"

namespace tapestry::app::bench {
namespace {

constexpr int64_t kHeads = 6;
constexpr int64_t kHeadDim = 32;
constexpr int64_t kFeedForward = 768;
constexpr int64_t kLayers = 4;
constexpr double kDropout = 0.1;
constexpr double kLearningRate = 1e-3;
constexpr int64_t kClasses = 15;          // Brown's genres
constexpr int64_t kPhonemes = 50;         // the speech set's inventory (docs/DATA.md), the blank apart
constexpr int64_t kUtteranceFrames = 260;  // the speech set's mean utterance: 2.6 s, 65 encoder positions
constexpr int64_t kTargetPhonemes = 32;

// The copy task's model at the paper's size (models/sequence_tagger.h).
models::SequenceTaggerOptions copy_model(const attention::AttentionConfig& attention) {
  models::SequenceTaggerOptions m;
  m.vocabulary = m.labels = data::CopyTask::kVocabulary;
  m.encoder = {kLayers, kHeads, kHeadDim, kFeedForward, kDropout, attention, /*clustering=*/{}};
  return m;
}

struct TrainOptions {
  CommonOptions common;
  std::string model = "copy";  // copy | classifier | speech
  std::vector<int64_t> copy_lengths = {31, 127};  // L
  std::string types = "full,improved-clustered:clusters=15,topk=32";
  int64_t batch = 32;  // the copy model's sequences per batch
};

// One step's parts: the model, its loss on a fixed batch (forward, the task loss and the model's own
// losses), and its optimizer.
struct StepParts {
  std::shared_ptr<nn::Module> model;
  std::function<Tensor()> loss;
  std::shared_ptr<optim::Optimizer> optimizer;
};

StepParts copy_step(const attention::AttentionConfig& attention, const data::CopyTask& task, int64_t batch,
                    Device device, const std::shared_ptr<Generator>& gen) {
  auto model = std::make_shared<models::SequenceTagger>(copy_model(attention), *gen);
  model->to(device);
  auto optimizer = std::make_shared<optim::RAdam>(model->parameters(), optim::RAdamOptions{kLearningRate});
  const data::CopyTaskBatch b = task.sample(batch, *gen);
  const Tensor input = to(b.input, device), target = to(b.target, device);
  return {model, [=] {
            const auto out = model->forward(input, Tensor(), *gen);  // logits (B, N, V)
            return out.objective(cross_entropy(out.logits, target));
          },
          optimizer};
}

StepParts classifier_step(const attention::AttentionConfig& attention, int64_t N, int64_t B, Device device,
                          const std::shared_ptr<Generator>& gen) {
  const ClassifyOptions o = classify_preset(ClassifyPreset::Default);
  const models::ClassifierOptions options{o.vocab_size, kClasses, models::parse_pooling(o.pooling),
                                          {o.layers, o.heads, o.head_dim, o.ff, o.dropout, attention, {o.mu, o.nu}}};
  auto model = std::make_shared<models::Classifier>(options, *gen);
  model->to(device);
  std::shared_ptr<optim::Optimizer> optimizer = optim::make_optimizer(o.train.optimizer, model->parameters());
  const Tensor tokens = to(randint(0, o.vocab_size, {B, N}, *gen), device);
  const Tensor labels = to(randint(0, kClasses, {B}, *gen), device);
  return {model, [=] {
            const auto out = model->forward(tokens, Tensor(), *gen);  // logits (B, K)
            return out.objective(cross_entropy(out.logits, labels));
          },
          optimizer};
}

StepParts speech_step(const attention::AttentionConfig& attention, int64_t frames, int64_t B, Device device,
                      const std::shared_ptr<Generator>& gen) {
  const AsrOptions o = asr_preset(AsrPreset::Default);
  const models::SpeechRecognizerOptions options{
      o.mel_bins, o.stack, kPhonemes + 1, {o.layers, o.heads, o.head_dim, o.ff, o.dropout, attention, {o.mu, o.nu}}};
  auto model = std::make_shared<models::SpeechRecognizer>(options, *gen);
  model->to(device);
  std::shared_ptr<optim::Optimizer> optimizer = optim::make_optimizer(o.train.optimizer, model->parameters());
  const int64_t U = kTargetPhonemes;
  const Tensor features = to(randn({B, frames, o.mel_bins}, *gen), device);
  const Tensor lengths = full({B}, double(frames), {DType::Int64, device});
  const Tensor targets = to(randint(1, kPhonemes + 1, {B, U}, *gen), device);  // 0 is the blank
  const Tensor target_lengths = full({B}, double(U), {DType::Int64, device});
  return {model, [=] {
            const auto out = model->forward(features, lengths, *gen);  // log_probs (B, N', K)
            return out.objective(ctc_loss(out.log_probs, targets, out.lengths, target_lengths));
          },
          optimizer};
}

// The row's rate of what a step processes: tokens (copy, classifier) or frames (speech) per second.
const char* rate_key(const std::string& model) { return model == "speech" ? "frames_per_s" : "tokens_per_s"; }

// A step's sequence length N (tokens, or speech frames) and batch B for `o.model`.
std::pair<int64_t, int64_t> step_size(const TrainOptions& o, const data::CopyTask& task) {
  if (o.model == "classifier") {
    const ClassifyOptions c = classify_preset(ClassifyPreset::Default);
    return {c.max_length, c.batch_tokens / c.max_length};
  }
  if (o.model == "speech") return {kUtteranceFrames, asr_preset(AsrPreset::Default).batch_frames / kUtteranceFrames};
  return {task.sequence_length(), o.batch};
}

nlohmann::json measure(const std::string& type, int64_t copy_length, const TrainOptions& o, Device device,
                       Profiler* profiler) {
  const data::CopyTask task{copy_length};
  const std::pair<int64_t, int64_t> size = step_size(o, task);  // N, B
  nlohmann::json row = {{"model", o.model}, {"type", type}, {"n", size.first}, {"batch", size.second}};
  if (o.model == "copy") row["copy_length"] = copy_length;
  measure_step(row, device, o.common, [&]() -> TrainingStep {
    const attention::AttentionConfig config = attention::AttentionConfig::parse(type);
    row["attention"] = config.to_string();
    auto gen = std::make_shared<Generator>(o.common.seed);
    const StepParts parts = o.model == "copy"         ? copy_step(config, task, o.batch, device, gen)
                            : o.model == "classifier" ? classifier_step(config, size.first, size.second, device, gen)
                                                      : speech_step(config, size.first, size.second, device, gen);
    row["parameters"] = parts.model->parameter_count();
    return {[=] {
              const Tensor loss = parts.loss();
              return std::pair{loss, loss};
            },
            parts.optimizer};
  }, profiler);
  if (row["status"] == "ok") row[rate_key(o.model)] = double(size.first * size.second) / (number(row, "ms") * 1e-3);
  return row;
}

int run(const TrainOptions& o) {
  const Device device = o.common.device.resolve();
  const train::Float32MatmulScope tf32(o.common.tf32, device);
  check_json_path(o.common.json);
  const std::unique_ptr<Profiler> profiler = train::make_profiler(o.common.profile, device);
  const std::vector<std::string> types = split_types(o.types);
  std::cout << "bench train on " << device << " (" << device_name(device) << "): " << o.model
            << " model (the app's default preset); median of " << o.common.repeats << " steps after "
            << o.common.warmup << " warm-up\n";
  const double rate = matmul_rate(device, o.common);
  std::cout << "bound: a step's matmul and attention FLOPs at " << format("%.1f", rate * 1e-9)
            << " GFLOP/s, this device's 2048³ " << o.common.precision << " matmul measured now\n";
  nlohmann::json rows = nlohmann::json::array();
  const std::vector<int64_t> lengths = o.model == "copy" ? o.copy_lengths : std::vector<int64_t>{0};
  for (const int64_t copy_length : lengths) {
    for (const std::string& type : types) {
      nlohmann::json row = measure(type, copy_length, o, device, profiler.get());
      std::cerr << "bench train: " << o.model << " " << type << " N=" << row.value("n", int64_t(0)) << ": "
                << (row["status"] == "ok" ? format("%.2f ms", number(row, "ms")) : row["status"].get<std::string>())
                << "\n";
      rows.push_back(std::move(row));
    }
  }
  // Each row's time against full attention's at the same N, and against its bound.
  for (auto& row : rows) {
    add_bound(row, rate);
    row["ms_vs_full"] = nullptr;
    for (const auto& full : rows)
      if (full["type"] == "full" && full["n"] == row["n"] && full["status"] == "ok" && row["status"] == "ok")
        row["ms_vs_full"] = number(row, "ms") / number(full, "ms");
  }
  const std::string unit = o.model == "speech" ? "frames/s" : "tokens/s";
  Table table({"type", "N", "batch", "ms/step", unit, "peak MiB", "act MiB", "loss", "time ×full", "GFLOP", "bound ms",
               "×bound"});
  for (const auto& row : rows) {
    table.add({row["type"].get<std::string>(), format("%.0f", number(row, "n")), format("%.0f", number(row, "batch")),
               row["status"] == "ok" ? format("%.2f", number(row, "ms")) : row["status"].get<std::string>(),
               format("%.0f", number(row, rate_key(o.model))), format("%.1f", number(row, "peak_bytes") / (1 << 20)),
               format("%.1f", number(row, "activation_bytes") / (1 << 20)), format("%.3f", number(row, "loss")),
               format("%.3f", number(row, "ms_vs_full")),
               format("%.2f", number(row, "flops") * 1e-9), format("%.2f", number(row, "bound_ms")),
               format("%.2f", number(row, "x_bound"))});
  }
  table.print(std::cout);
  if (!o.common.json.empty()) {
    nlohmann::json config = common_config(o.common);
    config.update({{"model", o.model}, {"types", types}, {"matmul_gflops_per_second", rate * 1e-9}});
    if (o.model == "copy")
      config.update({{"vocabulary", data::CopyTask::kVocabulary}, {"d_model", kHeads * kHeadDim}, {"heads", kHeads},
                     {"head_dim", kHeadDim}, {"d_ff", kFeedForward}, {"layers", kLayers}, {"dropout", kDropout},
                     {"optimizer", "RAdam"}, {"lr", kLearningRate}, {"copy_lengths", o.copy_lengths},
                     {"batch", o.batch}});
    if (o.model == "classifier") {
      const ClassifyOptions c = classify_preset(ClassifyPreset::Default);
      config.update({{"vocabulary", c.vocab_size}, {"classes", kClasses}, {"d_model", c.heads * c.head_dim},
                     {"heads", c.heads}, {"head_dim", c.head_dim}, {"d_ff", c.ff}, {"layers", c.layers},
                     {"dropout", c.dropout}, {"pooling", c.pooling}, {"optimizer", c.train.optimizer.to_string()}});
    }
    if (o.model == "speech") {
      const AsrOptions a = asr_preset(AsrPreset::Default);
      config.update({{"mel_bins", a.mel_bins}, {"stack", a.stack}, {"labels", kPhonemes + 1},
                     {"d_model", a.heads * a.head_dim}, {"heads", a.heads}, {"head_dim", a.head_dim}, {"d_ff", a.ff},
                     {"layers", a.layers}, {"dropout", a.dropout}, {"target_phonemes", kTargetPhonemes},
                     {"optimizer", a.train.optimizer.to_string()}});
    }
    write_json(o.common.json, document("train", device, config, rows));
  }
  if (profiler) train::write_profile(o.common.profile, *profiler);
  return 0;
}

}  // namespace

void add_train(CommandLine& cli, CLI::App* bench) {
  const auto setup = [](CLI::App& command) {
    auto options = std::make_shared<TrainOptions>();
    add_common_options(command, options->common);
    command.add_option("--model", options->model, "The app whose model a step trains, at its default preset")
        ->check(CLI::IsMember({"copy", "classifier", "speech"}))
        ->capture_default_str();
    add_list(command, "--copy-lengths", options->copy_lengths, "copy: lengths L (sequences of N = 2L + 2)",
             integer_check<decltype(options->copy_lengths)::value_type>(1));
    command.add_option("--types", options->types, "Attentions, comma-separated; options as in clustered:clusters=50")
        ->check(check_types)
        ->capture_default_str();
    command.add_option("--batch", options->batch, "copy: sequences per batch")
        ->check(integer_check<decltype(options->batch)>(1))->capture_default_str();
    return [options] { return run_reporting_errors("bench train", [&] { return run(*options); }); };
  };
  cli.add("train", "Time per training step (forward, backward, optimizer) of an app's model: copy-task's, classify's or "
          "asr's, against the step's matmul bound", setup, bench);
}

}  // namespace tapestry::app::bench
