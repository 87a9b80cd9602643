// `tapestry bench train`: the time of one training step — forward, backward, optimizer step — of the
// masked copy task's model (clustered-attention paper, supplementary §C.2): token embedding
// (vocabulary 12) + sinusoidal positions, 4 post-norm encoder layers of 6 heads × 32 (D = 192) with
// feed-forward 768 and dropout 0.1, a linear head, cross-entropy over every position, RAdam.
// Sequence length N = 2L + 2, batch 32, per attention (full and improved-clustered with 15 clusters
// and k = 32 by default; neural-clustering builds the ClusterFormer encoder and adds its losses,
// eq. 17). The model is models::SequenceTagger; bench/peers/train.py is the same in PyTorch.
//
// Shape letters: B batch, N sequence length, D model width, V vocabulary.
#include <iostream>
#include <memory>

#include "apps/bench.h"
#include "data/copy_task.h"
#include "models/sequence_tagger.h"
#include "tapestry.h"

namespace tapestry::app::bench {
namespace {

constexpr int64_t kHeads = 6;
constexpr int64_t kHeadDim = 32;
constexpr int64_t kFeedForward = 768;
constexpr int64_t kLayers = 4;
constexpr double kDropout = 0.1;
constexpr double kLearningRate = 1e-3;

// The copy task's model at the paper's size (models/sequence_tagger.h).
models::SequenceTaggerOptions copy_model(const attention::AttentionConfig& attention) {
  models::SequenceTaggerOptions m;
  m.vocabulary = m.labels = data::CopyTask::kVocabulary;
  m.encoder = {kLayers, kHeads, kHeadDim, kFeedForward, kDropout, attention, /*clustering=*/{}};
  return m;
}

struct TrainOptions {
  CommonOptions common;
  std::vector<int64_t> copy_lengths = {31, 127};  // L
  std::string types = "full,improved-clustered:clusters=15,topk=32";
  int64_t batch = 32;
};

nlohmann::json measure(const std::string& type, int64_t copy_length, const TrainOptions& o, Device device, Profiler* profiler) {
  const data::CopyTask task{copy_length};
  const int64_t n = task.sequence_length();
  nlohmann::json row = {{"type", type}, {"copy_length", copy_length}, {"n", n}, {"batch", o.batch}};
  measure_step(row, device, o.common, [&]() -> TrainingStep {
    const attention::AttentionConfig config = attention::AttentionConfig::parse(type);
    row["attention"] = config.to_string();
    auto gen = std::make_shared<Generator>(o.common.seed);
    auto model = std::make_shared<models::SequenceTagger>(copy_model(config), *gen);
    model->to(device);
    auto optimizer = std::make_shared<optim::RAdam>(model->parameters(), optim::RAdamOptions{kLearningRate});
    const data::CopyTaskBatch batch = task.sample(o.batch, *gen);
    const Tensor input = to(batch.input, device), target = to(batch.target, device);
    return [=] {
      optimizer->zero_grad();
      Tensor loss;
      {
        const AutocastScope autocast(bf16(o.common));
        const auto out = model->forward(input, Tensor(), *gen);  // logits (B, N, V)
        loss = out.objective(cross_entropy(out.logits, target));
      }
      loss.backward();
      optimizer->step();
      return loss;
    };
  }, profiler);
  if (row["status"] == "ok") row["tokens_per_s"] = double(o.batch) * double(n) / (number(row, "ms") * 1e-3);
  return row;
}

int run(const TrainOptions& o) {
  const Device device = o.common.device.resolve();
  const train::Float32MatmulScope tf32(o.common.tf32, device);
  check_json_path(o.common.json);
  const std::unique_ptr<Profiler> profiler = train::make_profiler(o.common.profile, device);
  const std::vector<std::string> types = split_types(o.types);
  std::cout << "bench train on " << device << " (" << device_name(device) << "): copy-task model, " << kLayers
            << " layers, " << kHeads << " heads × " << kHeadDim << ", feed-forward " << kFeedForward
            << ", RAdam; median of " << o.common.repeats << " steps after " << o.common.warmup << " warm-up\n";
  const double rate = matmul_rate(device, o.common);
  std::cout << "bound: a step's matmul and attention FLOPs at " << format("%.1f", rate * 1e-9)
            << " GFLOP/s, this device's 2048³ float32 matmul measured now\n";
  nlohmann::json rows = nlohmann::json::array();
  for (const int64_t copy_length : o.copy_lengths) {
    for (const std::string& type : types) {
      nlohmann::json row = measure(type, copy_length, o, device, profiler.get());
      std::cerr << "bench train: " << type << " L=" << copy_length << ": "
                << (row["status"] == "ok" ? format("%.2f ms", number(row, "ms")) : row["status"].get<std::string>())
                << "\n";
      rows.push_back(std::move(row));
    }
  }
  // Each row's time against full attention's at the same L, and against its bound.
  for (auto& row : rows) {
    add_bound(row, rate);
    row["ms_vs_full"] = nullptr;
    for (const auto& full : rows)
      if (full["type"] == "full" && full["n"] == row["n"] && full["status"] == "ok" && row["status"] == "ok")
        row["ms_vs_full"] = number(row, "ms") / number(full, "ms");
  }
  Table table({"type", "L", "N", "batch", "ms/step", "tokens/s", "peak MiB", "loss", "time ×full", "GFLOP",
               "bound ms", "×bound"});
  for (const auto& row : rows) {
    table.add({row["type"].get<std::string>(), std::to_string(row["copy_length"].get<int64_t>()),
               std::to_string(row["n"].get<int64_t>()), std::to_string(row["batch"].get<int64_t>()),
               row["status"] == "ok" ? format("%.2f", number(row, "ms")) : row["status"].get<std::string>(),
               format("%.0f", number(row, "tokens_per_s")), format("%.1f", number(row, "peak_bytes") / (1 << 20)),
               format("%.3f", number(row, "loss")), format("%.3f", number(row, "ms_vs_full")),
               format("%.2f", number(row, "flops") * 1e-9), format("%.2f", number(row, "bound_ms")),
               format("%.2f", number(row, "x_bound"))});
  }
  table.print(std::cout);
  if (!o.common.json.empty()) {
    const nlohmann::json config = {{"vocabulary", data::CopyTask::kVocabulary},
                                   {"d_model", kHeads * kHeadDim},
                                   {"heads", kHeads},
                                   {"head_dim", kHeadDim},
                                   {"d_ff", kFeedForward},
                                   {"layers", kLayers},
                                   {"dropout", kDropout},
                                   {"optimizer", "RAdam"},
                                   {"lr", kLearningRate},
                                   {"copy_lengths", o.copy_lengths},
                                   {"types", types},
                                   {"batch", o.batch},
                                   {"repeats", o.common.repeats},
                                   {"warmup", o.common.warmup},
                                   {"seed", o.common.seed},
                                   {"precision", o.common.precision},
                                   {"matmul_gflops_per_second", rate * 1e-9}};
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
    add_list(command, "--copy-lengths", options->copy_lengths, "Copy lengths L (sequences of N = 2L + 2)",
             integer_check<decltype(options->copy_lengths)::value_type>(1));
    command.add_option("--types", options->types, "Attentions, comma-separated; options as in clustered:clusters=50")
        ->check(check_types)
        ->capture_default_str();
    command.add_option("--batch", options->batch, "Sequences per batch")
        ->check(integer_check<decltype(options->batch)>(1))->capture_default_str();
    return [options] { return run_reporting_errors("bench train", [&] { return run(*options); }); };
  };
  cli.add("train", "Time per training step (forward, backward, RAdam) of the copy-task model", setup, bench);
}

}  // namespace tapestry::app::bench
