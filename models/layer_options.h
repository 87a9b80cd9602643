/// @file
/// The encoder layer options the shared models build from their sizes.
#pragma once

#include <cstdint>

#include "nn/attention/config.h"
#include "nn/transformer.h"

namespace tapestry::models {

/// The options of every encoder layer of a model of `heads` heads of width `head_dim` (model width
/// D = heads · head_dim), feed-forward width `ff`, dropout and self-attention as given. Throws Error
/// naming `model` when heads or head_dim is below 1 or D exceeds 2^20.
nn::TransformerLayerOptions layer_options(const char* model, int64_t heads, int64_t head_dim, int64_t ff,
                                          double dropout, const attention::AttentionConfig& attention);

}  // namespace tapestry::models
