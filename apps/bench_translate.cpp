// `tapestry bench translate`: the time of one training step — forward, label-smoothed cross-entropy,
// backward, optimizer step — of the translation model (models::Translator) at the sizes of a
// `tapestry translate` preset (apps/translate.h; --preset small: vocabulary 8000, 3 + 3 post-norm
// layers of 4 heads × 64 (D = 256), feed-forward 1024, dropout 0.1, one embedding table shared by
// source and target and tied with the output projection, label smoothing 0.1, Adam lr 5·10⁻⁴,
// β2 = 0.98), per encoder self-attention (the decoder's self- and cross-attention are full). The
// preset's learning-rate schedule is left out: it sets one scalar per step.
//
// Batches are synthetic, of fixed shape and without padding: B sentences of S source and T target
// tokens; source, target in and target out are drawn independently and uniformly from the pieces
// [4, V) (ids 0–3 are padding, unknown, bos and eos). The default B is the preset's --max-tokens
// over max(S, T) at the default S = T = 32. bench/peers/translate.py is the same step in PyTorch.
//
// Shape letters: B sentences, S source positions, T target positions, V vocabulary.
#include <iostream>
#include <map>
#include <memory>

#include "apps/bench.h"
#include "apps/translate.h"
#include "data/sentencepiece.h"
#include "models/translator.h"
#include "tapestry.h"

namespace tapestry::app::bench {
namespace {

using data::SentencePiece;

constexpr int64_t kFirstPiece = SentencePiece::kEosId + 1;  // ids below are the special ones
constexpr int64_t kDefaultLength = 32;                      // S and T

const std::map<std::string, TranslatePreset> kPresets = {{"small", TranslatePreset::Small},
                                                         {"smoke", TranslatePreset::Smoke}};

struct TranslateBenchOptions {
  CommonOptions common;
  std::string preset = "small";
  int64_t source_length = kDefaultLength;  // S
  int64_t target_length = kDefaultLength;  // T
  int64_t batch = translate_preset(TranslatePreset::Small).max_tokens / kDefaultLength;  // B
  std::string types = "full,improved-clustered:clusters=15,topk=32,neural-clustering";
};

nlohmann::json measure(const std::string& type, const TranslateOptions& preset, const TranslateBenchOptions& o,
                       Device device, Profiler* profiler) {
  const int64_t B = o.batch, S = o.source_length, T = o.target_length, V = preset.vocab_size;
  nlohmann::json row = {{"type", type}, {"batch", B}, {"source_length", S}, {"target_length", T}};
  measure_step(row, device, o.common, [&]() -> TrainingStep {
    TranslateOptions options = preset;
    options.encoder_attention = attention::AttentionConfig::parse(type);
    auto gen = std::make_shared<Generator>(o.common.seed);
    auto model = std::make_shared<models::Translator>(translator_options(options), *gen);
    model->to(device);
    row["attention"] = model->options().encoder_attention.to_string();
    row["parameters"] = model->parameter_count();
    std::shared_ptr<optim::Optimizer> optimizer =
        optim::make_optimizer(preset.train.optimizer, model->parameters());
    const Tensor source = to(randint(kFirstPiece, V, {B, S}, *gen), device);
    const Tensor target_in = to(randint(kFirstPiece, V, {B, T}, *gen), device);
    const Tensor target_out = to(randint(kFirstPiece, V, {B, T}, *gen), device);
    const double smoothing = preset.label_smoothing;
    return {[=] {
              const auto out = model->forward(source, Tensor(), target_in, Tensor(), *gen);  // logits (B, T, V)
              const Tensor loss = cross_entropy(out.logits, target_out, SentencePiece::kPadId, smoothing);
              return std::pair{loss, out.objective(loss)};
            },
            optimizer};
  }, profiler);
  // target tokens, as `translate train` counts them
  if (row["status"] == "ok") row["tokens_per_s"] = double(B) * double(T) / (number(row, "ms") * 1e-3);
  return row;
}

int run(const TranslateBenchOptions& o) {
  const Device device = o.common.device.resolve();
  const train::Float32MatmulScope tf32(o.common.tf32, device);
  check_json_path(o.common.json);
  const std::unique_ptr<Profiler> profiler = train::make_profiler(o.common.profile, device);
  const TranslateOptions preset = translate_preset(kPresets.at(o.preset));
  const std::vector<std::string> types = split_types(o.types);
  std::cout << "bench translate on " << device << " (" << device_name(device) << "): translation model, preset "
            << o.preset << " (" << preset.encoder_layers << " + " << preset.decoder_layers << " layers, "
            << preset.heads << " heads × " << preset.head_dim << ", feed-forward " << preset.ff << ", vocabulary "
            << preset.vocab_size << "), " << preset.train.optimizer.to_string() << "; median of " << o.common.repeats
            << " steps after " << o.common.warmup << " warm-up\n";
  const double rate = matmul_rate(device, o.common);
  std::cout << "bound: a step's matmul and attention FLOPs at " << format("%.1f", rate * 1e-9)
            << " GFLOP/s, this device's 2048³ " << o.common.precision << " matmul measured now\n";
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& type : types) {
    nlohmann::json row = measure(type, preset, o, device, profiler.get());
    std::cerr << "bench translate: " << type << ": "
              << (row["status"] == "ok" ? format("%.2f ms", number(row, "ms")) : row["status"].get<std::string>())
              << "\n";
    rows.push_back(std::move(row));
  }
  // Each row's time against full attention's, and against its bound.
  for (auto& row : rows) {
    add_bound(row, rate);
    row["ms_vs_full"] = nullptr;
    for (const auto& full : rows)
      if (full["type"] == "full" && full["status"] == "ok" && row["status"] == "ok")
        row["ms_vs_full"] = number(row, "ms") / number(full, "ms");
  }
  Table table({"encoder attention", "B", "S", "T", "parameters", "ms/step", "tokens/s", "peak MiB", "act MiB", "loss",
               "time ×full", "GFLOP", "bound ms", "×bound"});
  for (const auto& row : rows) {
    table.add({row["type"].get<std::string>(), std::to_string(o.batch), std::to_string(o.source_length),
               std::to_string(o.target_length), format("%.0f", number(row, "parameters")),
               row["status"] == "ok" ? format("%.2f", number(row, "ms")) : row["status"].get<std::string>(),
               format("%.0f", number(row, "tokens_per_s")), format("%.1f", number(row, "peak_bytes") / (1 << 20)),
               format("%.1f", number(row, "activation_bytes") / (1 << 20)), format("%.3f", number(row, "loss")),
               format("%.3f", number(row, "ms_vs_full")),
               format("%.2f", number(row, "flops") * 1e-9), format("%.2f", number(row, "bound_ms")),
               format("%.2f", number(row, "x_bound"))});
  }
  table.print(std::cout);
  if (!o.common.json.empty()) {
    const models::TranslatorOptions model = translator_options(preset);
    const optim::OptimizerConfig& optimizer = preset.train.optimizer;
    nlohmann::json config = {{"preset", o.preset},
                                   {"vocabulary", model.vocabulary},
                                   {"d_model", model.heads * model.head_dim},
                                   {"heads", model.heads},
                                   {"head_dim", model.head_dim},
                                   {"d_ff", model.ff},
                                   {"encoder_layers", model.encoder_layers},
                                   {"decoder_layers", model.decoder_layers},
                                   {"dropout", model.dropout},
                                   {"tie_output", model.tie_output},
                                   {"label_smoothing", preset.label_smoothing},
                                   {"optimizer", optimizer.to_string()},
                                   {"lr", optimizer.get("lr")},
                                   {"beta1", optimizer.get("beta1")},
                                   {"beta2", optimizer.get("beta2")},
                                   {"eps", optimizer.get("eps")},
                                   {"weight_decay", optimizer.get("weight_decay")},
                                   {"batch", o.batch},
                                   {"source_length", o.source_length},
                                   {"target_length", o.target_length},
                                   {"types", types},
                                   {"matmul_gflops_per_second", rate * 1e-9}};
    config.update(common_config(o.common));
    write_json(o.common.json, document("translate", device, config, rows));
  }
  if (profiler) train::write_profile(o.common.profile, *profiler);
  return 0;
}

}  // namespace

void add_translate(CommandLine& cli, CLI::App* bench) {
  const auto setup = [](CLI::App& command) {
    auto options = std::make_shared<TranslateBenchOptions>();
    add_common_options(command, options->common);
    command.add_option("--preset", options->preset, "The `tapestry translate` preset whose model is timed")
        ->check(CLI::IsMember(kPresets))
        ->capture_default_str();
    command.add_option("--source-length", options->source_length, "Source tokens per sentence (S)")
        ->check(integer_check<decltype(options->source_length)>(1))->capture_default_str();
    command.add_option("--target-length", options->target_length, "Target tokens per sentence (T)")
        ->check(integer_check<decltype(options->target_length)>(1))->capture_default_str();
    command.add_option("--batch", options->batch, "Sentences per batch (B)")
        ->check(integer_check<decltype(options->batch)>(1))->capture_default_str();
    command.add_option("--types", options->types,
                       "Encoder self-attentions, comma-separated; options as in clustered:clusters=50")
        ->check(check_types)
        ->capture_default_str();
    return [options] { return run_reporting_errors("bench translate", [&] { return run(*options); }); };
  };
  cli.add("translate", "Time per training step (forward, label-smoothed loss, backward, Adam) of the translation model",
          setup, bench);
}

}  // namespace tapestry::app::bench
