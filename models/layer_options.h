/// @file
/// The encoder of the single-stack models (SequenceTagger, Classifier, SpeechRecognizer): its sizes
/// and settings in one struct, and the layer options built from them.
#pragma once

#include <cstdint>

#include "nn/attention/config.h"
#include "nn/encoder.h"
#include "nn/transformer.h"

namespace tapestry::models {

/// The widest model D = heads · head_dim that layer_options takes (2^20).
constexpr int64_t kMaxModelWidth = int64_t{1} << 20;

/// The sizes and settings of a model's encoder: `layers` layers of `heads` heads of width
/// `head_dim` (model width D = heads · head_dim), nn::make_encoder builds it.
struct EncoderOptions {
  int64_t layers = 2;      ///< encoder layers
  int64_t heads = 4;       ///< H
  int64_t head_dim = 16;   ///< E; the model width is D = H·E
  int64_t ff = 128;        ///< feed-forward width
  double dropout = 0.0;    ///< the layers' dropout (nn::TransformerLayerOptions::dropout)
  attention::AttentionConfig attention;  ///< self-attention of every layer
  nn::ClusteringLossWeights clustering;  ///< µ, ν for a neural-clustering encoder (eq. 17)
};

/// The options of every encoder layer of a model of `heads` heads of width `head_dim` (model width
/// D = heads · head_dim), feed-forward width `ff`, dropout and self-attention as given. Throws Error
/// naming `model` when heads or head_dim is below 1 or D exceeds kMaxModelWidth.
nn::TransformerLayerOptions layer_options(const char* model, int64_t heads, int64_t head_dim, int64_t ff,
                                          double dropout, const attention::AttentionConfig& attention);

/// The options of every layer of `encoder` (the function above, with its sizes).
nn::TransformerLayerOptions layer_options(const char* model, const EncoderOptions& encoder);

}  // namespace tapestry::models
