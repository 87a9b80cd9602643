// `tapestry copy-task`: train a Transformer on the masked copy task (clustered-attention paper,
// supplementary §C.2; data/copy_task.h) and measure how well it copies the masked symbols.
//
// The model: models::SequenceTagger over the 12 tokens (embedding + sinusoidal positions, an encoder
// of `layers` layers of width D = heads × head_dim — a ClusterFormer for neural-clustering, whose
// clustering losses join the loss as µ·L1 + ν·L2 — and a linear map to the vocabulary), trained with
// the cross-entropy against the target 0 w 0 w at every position.
//
// Metrics, on `eval_batches` held-out batches drawn once from a generator of their own (seeded from
// the seed), so every evaluation of a run, and of its checkpoints, sees the same data:
//   masked_accuracy  at the masked positions, the ones only attention to the other copy can solve
//                    (chance: 1/10); the best checkpoint and --patience follow it;
//   token_accuracy   at every position;
//   loss             the cross-entropy (the task loss, without the clustering losses).
// Evaluation hashes with a generator of its own too, so an evaluation is a function of the weights.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "apps/app.h"
#include "apps/inspect.h"
#include "apps/options.h"
#include "data/copy_task.h"
#include "models/sequence_tagger.h"
#include "train/trainer.h"

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
  attention::AttentionConfig attention = attention::AttentionConfig::parse("improved-clustered:clusters=15,topk=32");  // nn/attention/config.h
  std::optional<attention::AttentionConfig> eval_attention;  // empty: the training attention
  int64_t batch = 32;
  int64_t eval_batches = 10;  // held-out batches of `batch` sequences
  // neural-clustering only: the weights µ of L1 and ν of L2 in the loss (ClusterFormer eq. 17, λ = 1).
  // The losses are inner products, unbounded below, so large weights can pull training away from
  // the task.
  double mu = 1e-3;
  double nu = 1e-3;

  train::TrainOptions train;  // optimizer, steps, evaluation, checkpoints, device (train/trainer.h)

  CopyTaskOptions();  // the paper's values
};

// The options of a preset (every field not listed in the preset keeps the default above).
CopyTaskOptions copy_task_preset(Preset preset);

// Checks the options (ranges, attention configs, the combinations that cannot work) and returns the
// attentions they name; throws Error naming the flag.
Attentions check_copy_task_options(const CopyTaskOptions& options);

// Trains (or, with train.eval_only, evaluates) as the options say; progress goes to stderr. The
// report's fields hold "attention", "eval_attention" (full configs) and "length". Throws Error on
// options out of range, an unusable device, a corrupt checkpoint, or a checkpoint of another model
// (the message names the setting).
train::Report run_copy_task(const CopyTaskOptions& options);

// `tapestry inspect` of a copy-task checkpoint (apps/inspect.h), on the CPU: the run's first held-out
// batches, drawn as its evaluations draw them.
InspectedCheckpoint inspect_copy_task_checkpoint(const CheckpointRequest& request);

// Registers `tapestry copy-task`.
void add_copy_task(CommandLine& cli);

}  // namespace tapestry::app
