// `tapestry reverse`: train a Transformer to write a random sequence backwards, the smallest app on
// the training harness (train/trainer.h) — options, a model, data and metrics, nothing else.
//
// Data: sequences of `length` symbols drawn uniformly from 0..symbols-1 by the training generator; the
// target at position i is the symbol at position N-1-i, so a model must attend by position. Metrics
// on `eval_batches` held-out batches: token_accuracy (chance: 1/symbols; the best checkpoint follows
// it), sequence_accuracy (every position right) and loss.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "apps/app.h"
#include "apps/inspect.h"
#include "apps/options.h"
#include "train/trainer.h"

namespace tapestry::app {

struct ReverseOptions {
  int64_t length = 16;   // N
  int64_t symbols = 10;  // vocabulary
  int64_t layers = 2;
  int64_t heads = 4;
  int64_t head_dim = 16;
  int64_t ff = 128;
  attention::AttentionConfig attention = attention::AttentionConfig::parse("full");
  std::optional<attention::AttentionConfig> eval_attention;
  int64_t batch = 32;
  int64_t eval_batches = 4;
  train::TrainOptions train;

  ReverseOptions();
};

Attentions check_reverse_options(const ReverseOptions& options);
train::Report run_reverse(const ReverseOptions& options);
// `tapestry inspect` of a reverse checkpoint (apps/inspect.h), on the CPU: the run's first held-out
// batches, drawn as its evaluations draw them.
InspectedCheckpoint inspect_reverse_checkpoint(const CheckpointRequest& request);
void add_reverse(CommandLine& cli);

}  // namespace tapestry::app
