// `tapestry bench attention`: the time and memory benchmark of the clustered-attention paper
// (supplementary §C.1). One self-attention layer — 6 heads of 64 (D = 384), feed-forward 1536 —
// runs forward and backward on random sequences of length N; each row reports the median time, the
// time per sequence element (ms·1000 / (N·B) = µs), the allocator's peak memory during one forward +
// backward and the bytes per element, and both as ratios against full attention at the same N; and
// the layer's matmul and attention FLOPs against this device's matmul rate (its bound, as bench train).
//
// Attentions, as in §C.1: clustered with C = 100 clusters, R = 63 hash bits, L = 10 Lloyd
// iterations; improved-clustered the same with k = 32 top keys; neural-clustering (ClusterFormer,
// a ClusterFormerEncoderLayer) and routing with ⌈√N⌉ clusters (the Routing Transformer's choice);
// reformer with 4 rounds of buckets of 32; oracle-top with 32 keys. A type given with options
// ("clustered:clusters=50") runs as given.
//
// Shape letters: B batch, N sequence length, D model width, C clusters.
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>

#include "apps/bench.h"
#include "tapestry.h"

namespace tapestry::app::bench {
namespace {

constexpr int64_t kHeads = 6;
constexpr int64_t kHeadDim = 64;
constexpr int64_t kModel = kHeads * kHeadDim;  // D
constexpr int64_t kFeedForward = 1536;

int64_t ceil_sqrt(int64_t n) {
  int64_t k = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(n))));
  while (k * k < n) ++k;
  while (k > 1 && (k - 1) * (k - 1) >= n) --k;
  return k;
}

// The attention `text` names at length n: AttentionConfig's defaults are §C.1's (C = 100, R = 63,
// L = 10, k = 32); the kinds whose clusters follow the length (neural-clustering, routing) take ⌈√N⌉
// clusters unless the text sets them.
attention::AttentionConfig config_at(const std::string& text, int64_t n) {
  const attention::AttentionConfig config = attention::AttentionConfig::parse(text);
  if (config.kind().clusters_follow_length() && text.find("clusters=") == std::string::npos)
    return config.with("clusters", ceil_sqrt(n));
  return config;
}

// One layer of §C.1 with its input x and a fixed random projection P, both (B, N, D).
//
// The loss is Σ output ⊙ P rather than Σ output: the layers end in a LayerNorm (post-norm), whose
// outputs sum to a constant per position, so Σ output would send an all-zero gradient back.
// The layer runs in eval mode with gradients on: no dropout (PyTorch's peer sets dropout = 0),
// the same forward and backward work otherwise (clustered attention hashes in both modes).
class AttentionLayer {
 public:
  AttentionLayer(const attention::AttentionConfig& config, int64_t batch, int64_t n, Device device, uint64_t seed)
      : gen_(seed) {
    nn::TransformerLayerOptions options;
    options.d_model = kModel;
    options.heads = kHeads;
    options.d_ff = kFeedForward;
    options.dropout = 0.0;
    options.attention = config;
    nn::Module* layer = nullptr;
    if (config.kind().form() == attention::Form::HiddenStates) {
      clusterformer_ = std::make_shared<nn::ClusterFormerEncoderLayer>(options, gen_);
      // The first layer's centroids (ClusterFormerEncoder's initialisation): a parameter.
      centroids_ = to(randn({config.get("clusters"), kModel}, gen_) / std::sqrt(double(kModel)), device);
      centroids_.set_requires_grad(true);
      layer = clusterformer_.get();
    } else {
      transformer_ = std::make_shared<nn::TransformerEncoderLayer>(options, gen_);
      layer = transformer_.get();
    }
    layer->to(device);
    layer->eval();
    parameters_ = layer->parameters();
    if (centroids_.defined()) parameters_.push_back(centroids_);
    x_ = randn({batch, n, kModel}, gen_, {DType::Float32, device});
    projection_ = randn({batch, n, kModel}, gen_, {DType::Float32, device});
  }

  void zero_grad() {
    for (const Tensor& p : parameters_) p.zero_grad();
  }

  // The forward under autocast to bfloat16 with `in_bf16` (--precision bf16, ops/autocast.h).
  void forward_backward(bool in_bf16) {
    Tensor loss;
    const AutocastScope autocast(in_bf16);
    if (clusterformer_) {
      const nn::ClusterFormerOutput out = clusterformer_->forward(x_, centroids_, Tensor(), attention::Causal::No, gen_);
      // Appendix C, eq. 17: the clustering and sorting losses train W_C and the centroids.
      loss = nn::ClusterFormerLoss().forward(sum(out.output * projection_), out);
    } else {
      loss = sum(transformer_->forward(x_, Tensor(), gen_) * projection_);
    }
    const AutocastScope off(false);  // (the backward needs no scope: the casts are on the tape)
    loss.backward();
  }

 private:
  Generator gen_;
  std::shared_ptr<nn::TransformerEncoderLayer> transformer_;
  std::shared_ptr<nn::ClusterFormerEncoderLayer> clusterformer_;
  Tensor centroids_;  // (C, D), neural-clustering only
  std::vector<Tensor> parameters_;
  Tensor x_, projection_;  // (B, N, D)
};

struct AttentionOptions {
  CommonOptions common;
  std::vector<int64_t> lengths;  // empty: the device's defaults
  std::string types = "full,clustered,improved-clustered,neural-clustering";
  int64_t batch = 1;
};

std::vector<int64_t> default_lengths(Device device) {
  std::vector<int64_t> lengths;
  for (int64_t n = 512; n <= (device.is_cuda() ? 32768 : 8192); n *= 2) lengths.push_back(n);
  return lengths;
}

nlohmann::json measure(const std::string& type, int64_t n, const AttentionOptions& o, Device device, Profiler* profiler) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  nlohmann::json row = {{"type", type}, {"n", n}, {"batch", o.batch}};
  Allocator& allocator = context(device).allocator();
  allocator.empty_cache();  // the last row's cached blocks would crowd this one; its warm-up refills the cache
  try {
    const attention::AttentionConfig config = config_at(type, n);
    row["attention"] = config.to_string();
    AttentionLayer layer(config, o.batch, n, device, o.common.seed);
    int64_t peak = 0, baseline = 0;
    const Timing timing = time_runs(
        device, o.common.warmup, o.common.repeats,
        [&] {
          layer.forward_backward(bf16(o.common));
          peak = std::max(peak, allocator.stats().peak);
        },
        [&] {
          layer.zero_grad();
          synchronize(device);
          allocator.reset_peak();
          baseline = allocator.stats().in_use;
        },
        profiler);
    const double ms = timing.median(), elements = double(n) * double(o.batch);
    row["status"] = "ok";
    row["ms"] = ms;
    row["ms_runs"] = timing.ms;
    row["us_per_element"] = ms * 1000.0 / elements;
    row["peak_bytes"] = peak;
    row["baseline_bytes"] = baseline;
    row["bytes_per_element"] = double(peak) / elements;
    Profiler counter(device);  // the FLOPs of one more forward + backward, which the ops report
    {
      const ProfileSession on(counter);
      layer.forward_backward(bf16(o.common));
    }
    double flops = 0;
    for (const ProfileRow& op : counter.report().rows) flops += op.flops;
    row["flops"] = flops;
  } catch (const std::exception& e) {
    row["status"] = failure_status(e);
    row["ms"] = nan;  // written as null
  }
  allocator.empty_cache();
  return row;
}

// ms_vs_full and memory_vs_full of each row against the full-attention row of the same N and batch
// (null when full attention is not in the run or did not finish).
void add_ratios(nlohmann::json& rows) {
  for (auto& row : rows) {
    row["ms_vs_full"] = nullptr;
    row["memory_vs_full"] = nullptr;
    for (const auto& full : rows) {
      if (full["type"] != "full" || full["n"] != row["n"] || full["status"] != "ok" || row["status"] != "ok") continue;
      row["ms_vs_full"] = number(row, "ms") / number(full, "ms");
      row["memory_vs_full"] = number(row, "peak_bytes") / number(full, "peak_bytes");
    }
  }
}

void print_table(const nlohmann::json& rows) {
  Table table({"type", "N", "batch", "ms", "µs/elem", "peak MiB", "KiB/elem", "time ×full", "memory ×full", "GFLOP",
               "×bound"});
  for (const auto& row : rows) {
    const bool ok = row["status"] == "ok";
    table.add({row["type"].get<std::string>(), std::to_string(row["n"].get<int64_t>()),
               std::to_string(row["batch"].get<int64_t>()),
               ok ? format("%.2f", number(row, "ms")) : row["status"].get<std::string>(),
               format("%.3f", number(row, "us_per_element")), format("%.1f", number(row, "peak_bytes") / (1 << 20)),
               format("%.2f", number(row, "bytes_per_element") / 1024), format("%.3f", number(row, "ms_vs_full")),
               format("%.3f", number(row, "memory_vs_full")), format("%.2f", number(row, "flops") * 1e-9),
               format("%.2f", number(row, "x_bound"))});
  }
  table.print(std::cout);
}

int run(const AttentionOptions& options) {
  const Device device = options.common.device.resolve();
  const train::Float32MatmulScope tf32(options.common.tf32, device);
  check_json_path(options.common.json);
  const std::unique_ptr<Profiler> profiler = train::make_profiler(options.common.profile, device);
  const std::vector<int64_t> lengths = options.lengths.empty() ? default_lengths(device) : options.lengths;
  const std::vector<std::string> types = split_types(options.types);
  std::cout << "bench attention on " << device << " (" << device_name(device) << "): one layer, " << kHeads << " heads × "
            << kHeadDim << ", feed-forward " << kFeedForward << ", forward + backward; median of "
            << options.common.repeats << " after " << options.common.warmup << " warm-up\n";
  const double rate = matmul_rate(device, options.common);
  std::cout << "bound: a layer's matmul and attention FLOPs at " << format("%.1f", rate * 1e-9)
            << " GFLOP/s, this device's 2048³ " << options.common.precision << " matmul measured now\n";
  nlohmann::json rows = nlohmann::json::array();
  for (const int64_t n : lengths) {
    for (const std::string& type : types) {
      nlohmann::json row = measure(type, n, options, device, profiler.get());
      add_bound(row, rate);
      std::cerr << "bench attention: " << type << " N=" << n << ": "
                << (row["status"] == "ok" ? format("%.2f ms", number(row, "ms")) : row["status"].get<std::string>())
                << "\n";
      rows.push_back(std::move(row));
    }
  }
  add_ratios(rows);
  print_table(rows);
  if (!options.common.json.empty()) {
    nlohmann::json config = {{"d_model", kModel},
                                   {"heads", kHeads},
                                   {"head_dim", kHeadDim},
                                   {"d_ff", kFeedForward},
                                   {"dropout", 0.0},
                                   {"lengths", lengths},
                                   {"types", types},
                                   {"batch", options.batch},
                                   {"loss", "sum(output * P), P fixed N(0, 1); eval mode (no dropout), gradients on"},
                                   {"memory", "allocator peak during one forward + backward, parameters and input included"},
                                   {"matmul_gflops_per_second", rate * 1e-9}};
    config.update(common_config(options.common));
    write_json(options.common.json, document("attention", device, config, rows));
  }
  if (profiler) train::write_profile(options.common.profile, *profiler);
  return 0;
}

}  // namespace

void add_attention(CommandLine& cli, CLI::App* bench) {
  const auto setup = [](CLI::App& command) {
    auto options = std::make_shared<AttentionOptions>();
    add_common_options(command, options->common);
    add_list(command, "--lengths", options->lengths, "Sequence lengths N (default 512..8192 on CPU, 512..32768 on GPU)",
             integer_check<decltype(options->lengths)::value_type>(1));
    command.add_option("--types", options->types, "Attentions, comma-separated; options as in clustered:clusters=50")
        ->check(check_types)
        ->capture_default_str();
    command.add_option("--batch", options->batch, "Sequences per batch")
        ->check(integer_check<decltype(options->batch)>(1))->capture_default_str();
    return [options] { return run_reporting_errors("bench attention", [&] { return run(*options); }); };
  };
  cli.add("attention", "One self-attention layer, forward + backward, per attention and length (clustered-attention paper §C.1)", setup, bench);
}

}  // namespace tapestry::app::bench
