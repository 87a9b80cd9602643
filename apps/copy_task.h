// `tapestry copy-task`: train a Transformer on the masked copy task (clustered-attention paper,
// supplementary §C.2; data/copy_task.h) and measure how well it copies the masked symbols.
//
// The model: token embedding (data::CopyTask::kVocabulary rows) + sinusoidal positions, an encoder
// of `layers` layers of width D = heads × head_dim (nn::TransformerEncoder for full, clustered and
// improved-clustered attention; nn::ClusterFormerEncoder for neural-clustering, whose clustering
// losses join the loss as µ·L1 + ν·L2), and a linear map to the vocabulary. The loss is the
// cross-entropy against the target 0 w 0 w at every position.
//
// Metrics, on `eval_batches` held-out batches drawn once from a generator of their own (seeded from
// `seed`), so every evaluation of a run, and of its checkpoints, sees the same data:
//   masked_accuracy  at the masked positions, the ones only attention to the other copy can solve
//                    (chance: 1/10);
//   token_accuracy   at every position;
//   loss             the cross-entropy (the task loss, without the clustering losses).
//
// Random streams: the model's initial values, then the training data, dropout and hashing come from
// one generator seeded with `seed` (checkpointed: a resumed run continues exactly). Evaluation draws
// from generators of its own, so evaluating more or less often never changes the training run.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace tapestry::app {

enum class Preset {
  Paper,  // the paper's setup (supplementary §C.2): 4 layers, 6 heads × 32, ff 768, RAdam 2e-4, batch 32,
          // 5000 steps, R = 63, 10 Lloyd iterations, L = 31
  Smoke,  // a small model (2 layers, 4 heads × 16, ff 128; Adam 4e-3, 600 steps, L = 31, one thread) that
          // learns the task (masked accuracy ≥ 0.95) in about 100 s of one CPU core
};

struct CopyTaskOptions {
  // The task and the model (a checkpoint records these and refuses others).
  int64_t length = 31;  // L: the word; sequences are N = 2L + 2 long
  int64_t layers = 4;
  int64_t heads = 6;      // H
  int64_t head_dim = 32;  // E; the model width is D = H·E
  int64_t ff = 768;       // feed-forward width
  double dropout = 0.0;
  std::string attention = "improved-clustered:clusters=15,topk=32";  // nn/attention/config.h
  // For clustered and improved-clustered configs that do not set them: hash bits R and Lloyd
  // iterations (applied to eval_attention too).
  int64_t bits = 63;
  int64_t iterations = 10;

  // Training.
  std::string optimizer = "radam";  // radam | adam | adamw | sgd
  double lr = 2e-4;                 // constant
  int64_t batch = 32;
  int64_t steps = 5000;         // the step to train up to (a resumed run continues to it)
  double clip = 0.0;            // max global gradient norm; 0: no clipping
  // neural-clustering only: the weights µ of L1 and ν of L2 in the loss (ClusterFormer eq. 17, λ = 1).
  // The losses are inner products, unbounded below, so large weights can pull training away from
  // the task.
  double mu = 1e-3;
  double nu = 1e-3;
  std::string device = "auto";  // auto | cpu | cuda[:i]
  int threads = 0;              // CPU threads; 0: OpenMP's default (app.h: ScopedThreads)
  uint64_t seed = 0;

  // Evaluation: every eval_every steps (0: only at the end) on eval_batches batches of `batch`.
  std::string eval_attention;  // empty: the training attention
  int64_t eval_every = 500;
  int64_t eval_batches = 10;

  // Files.
  std::string log;   // JSON lines: one record per evaluation and a final one
  std::string save;  // checkpoint, written every save_every steps (0: never) and at the end
  int64_t save_every = 0;
  std::string resume;      // checkpoint to continue from (or, with eval_only, to evaluate)
  bool eval_only = false;  // evaluate `resume` and stop

  bool progress = true;  // the progress line on stderr
};

// The options of a preset (every field not listed in the preset keeps the default above).
CopyTaskOptions copy_task_preset(Preset preset);

struct CopyTaskResult {
  std::string attention, eval_attention;  // full configs (AttentionConfig::to_string)
  int64_t length = 0;
  int64_t steps = 0;  // the step the model has reached
  double masked_accuracy = 0, token_accuracy = 0, loss = 0;
  double train_loss = 0;         // the mean training loss of this run's last evaluation interval (NaN: none)
  double seconds = 0;            // wall time of this run
  double tokens_per_second = 0;  // training tokens (evaluated tokens with eval_only) per second
  std::string device;
  uint64_t seed = 0;
  int64_t parameters = 0;
  bool eval_only = false;

  // The summary as one JSON object ("task": "copy-task", and every field above).
  nlohmann::json to_json() const;
};

// Trains (or, with eval_only, evaluates) as the options say; progress goes to stderr. Throws
// tapestry::Error on options out of range, a malformed attention config, an unusable device, a
// corrupt checkpoint, or a checkpoint of another model (the message names the setting).
CopyTaskResult run_copy_task(const CopyTaskOptions& options);

// Registers the `copy-task` subcommand on `app`. The returned function runs it once the command
// line has parsed; it prints the result and returns the exit code (app.h).
std::function<int()> add_copy_task_command(CLI::App& app);

}  // namespace tapestry::app
