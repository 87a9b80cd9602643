#include "nn/clusterformer.h"

#include "core/tape_graph.h"

#include <cmath>
#include <initializer_list>

#include "ops/creation.h"
#include "nn/attention/neural_clustering.h"
#include "ops/elementwise.h"

namespace tapestry::nn {

using attention::Causal;

namespace {

// A (rows, cols) weight uniform in ±1/√rows, the scale of nn::Linear's initialisation.
Tensor uniform_weight(int64_t rows, int64_t cols, Generator& gen) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(rows));
  return rand({rows, cols}, gen) * (2 * bound) - bound;
}

void check_neural(const char* layer, const TransformerLayerOptions& options) {
  TP_CHECK(options.attention.kind().form() == attention::Form::HiddenStates, layer,
           "needs neural-clustering attention, got '", options.attention.to_string(), "'");
}

// W_C, W_Q, W_K, W_V, W_O (D, D) of a layer's neural clustering attention, registered on it in that
// order ("w_c", ...), each uniform in ±1/√D.
void register_clustering_weights(Module& layer, int64_t D, Generator& gen, std::initializer_list<Tensor*> weights) {
  const char* names[] = {"w_c", "w_q", "w_k", "w_v", "w_o"};
  size_t i = 0;
  for (Tensor* w : weights) *w = layer.register_parameter(names[i++], uniform_weight(D, D, gen));
}

// §3.1–3.2 as a sublayer: the neural clustering attention of y (the layer input x, normalised in
// pre-norm) with a layer's weights, in the form of the losses and blocks its config names (its
// settings "losses" and "fused"); its Ĉ, losses and trace recorded in `out`.
Tensor clustering_attention(const Tensor& x, const Tensor& y, const Tensor& centroids,
                            const attention::NeuralClusteringWeights& weights, int64_t heads, const Tensor& lengths,
                            Causal causal, const attention::AttentionConfig& config, ClusterFormerOutput& out) {
  const attention::NeuralClusteringResult r = attention::neural_clustering_attention(
      y, centroids, weights, heads, lengths, causal, attention::ClusteringLosses(config.get("losses")),
      config.get("fused") ? attention::Fused::Yes : attention::Fused::No);
  out.centroids = r.centroids;
  out.clustering_loss = r.clustering_loss;
  out.sorting_loss = r.sorting_loss;
  out.layers = {{x, y, centroids, {r.u, r.centroids, r.assignment, r.clustering_loss, r.sorting_loss}}};
  return r.output;
}

// A stack's output so far, after `layer` (the i-th): its output and Ĉ, and the losses summed.
void accumulate(ClusterFormerOutput& out, const ClusterFormerOutput& layer, size_t i) {
  out.output = layer.output;
  out.centroids = layer.centroids;
  out.clustering_loss = i == 0 ? layer.clustering_loss : out.clustering_loss + layer.clustering_loss;
  out.sorting_loss = i == 0 ? layer.sorting_loss : out.sorting_loss + layer.sorting_loss;
  out.layers.insert(out.layers.end(), layer.layers.begin(), layer.layers.end());
}

// §3.1: "C is initialized randomly in the first layer" — N(0, 1/D), so the first similarities are O(1).
Tensor initial_centroids(const TransformerLayerOptions& options, Generator& gen) {
  return randn({options.attention.get("clusters"), options.d_model}, gen) / std::sqrt(double(options.d_model));
}

}  // namespace

ClusterFormerEncoderLayer::ClusterFormerEncoderLayer(const TransformerLayerOptions& options, Generator& gen)
    : Module("ClusterFormerEncoderLayer"), options_(options) {
  check_options("ClusterFormerEncoderLayer", options);
  check_neural("ClusterFormerEncoderLayer", options);
  const int64_t D = options.d_model;
  register_clustering_weights(*this, D, gen, {&w_c, &w_q, &w_k, &w_v, &w_o});
  ff = register_module("ff", std::make_shared<FeedForward>(feed_forward_options(options), gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(D, options.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(D, options.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
}

ClusterFormerOutput ClusterFormerEncoderLayer::forward(const Tensor& x, const Tensor& centroids, const Tensor& lengths,
                                                       Causal causal, Generator& gen) {
  check_sequence(*this, "input", x, w_c, options_.d_model);
  ClusterFormerOutput out;
  // §3.1–3.2 inside the first residual block: the clustering sees what the attention sees.
  const Tensor h = residual(options_.norm, x, *norm1, *dropout1, gen, [&](const Tensor& y) {
    return clustering_attention(x, y, centroids, {w_c, w_q, w_k, w_v, w_o}, options_.heads, lengths, causal,
                                options_.attention, out);
  });
  out.output = residual(options_.norm, h, *norm2, *dropout2, gen, [&](const Tensor& y) {
    const TapeScope scope("ff");
    return ff->forward(y, gen);
  });
  return out;
}

ClusterFormerEncoder::ClusterFormerEncoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen,
                                           const ClusteringLossWeights& weights)
    : Encoder("ClusterFormerEncoder"), attention_(options.attention), weights_(weights) {
  check_options("ClusterFormerEncoder", options, num_layers);
  check_neural("ClusterFormerEncoder", options);
  TP_CHECK(std::isfinite(weights.mu) && weights.mu >= 0 && std::isfinite(weights.nu) && weights.nu >= 0,
           "ClusterFormerEncoder", "the clustering loss weights µ, ν must be finite and non-negative (eq. 17), got ",
           weights.mu, " and ", weights.nu);
  // λ weights the task loss, which the encoder never sees: a λ other than 1 would be ignored.
  TP_CHECK(weights.lambda == 1.0, "ClusterFormerEncoder", "λ weights the task loss, which the encoder does not see ",
           "(its auxiliary loss is µ·L1 + ν·L2); weight the task loss where it is computed, or use ClusterFormerLoss; ",
           "got λ = ", weights.lambda);
  centroids = register_parameter("centroids", initial_centroids(options, gen));
  layers = register_module("layers", std::make_shared<ModuleList<ClusterFormerEncoderLayer>>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<ClusterFormerEncoderLayer>(options, gen));
  if (options.norm == NormPosition::Pre)
    norm = register_module("norm", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
}

ClusterFormerOutput ClusterFormerEncoder::forward(const Tensor& x, const Tensor& lengths, Generator& gen, Causal causal) {
  ClusterFormerOutput out{x, centroids, Tensor(), Tensor(), {}};
  for (size_t i = 0; i < layers->size(); ++i) {
    // Each layer clusters with the centroids the previous one updated (Ĉ, §3.1).
    const TapeScope scope("layers", int64_t(i));
    accumulate(out, (*layers)[i]->forward(out.output, out.centroids, lengths, causal, gen), i);
  }
  if (norm) out.output = norm->forward(out.output);
  return out;
}

EncoderOutput ClusterFormerEncoder::encode(const Tensor& x, const Tensor& lengths, Generator& gen) {
  const ClusterFormerOutput out = forward(x, lengths, gen);
  // eq. 17 without the task term: µ L1 + ν L2
  return {out.output, out.clustering_loss * weights_.mu + out.sorting_loss * weights_.nu, out.layers};
}

void ClusterFormerEncoder::set_attention(const attention::AttentionConfig& config) {
  TP_CHECK(config == attention_, name(), "a ClusterFormer encoder runs only with the attention it was built with (",
           attention_.to_string(), "), got ", config.to_string());
}

ClusterFormerDecoderLayer::ClusterFormerDecoderLayer(const TransformerLayerOptions& options, Generator& gen)
    : Module("ClusterFormerDecoderLayer"), options_(options) {
  check_options("ClusterFormerDecoderLayer", options);
  check_neural("ClusterFormerDecoderLayer", options);
  MultiheadAttention::check_attention(name(), options.cross_attention, Causal::No);
  const int64_t D = options.d_model;
  register_clustering_weights(*this, D, gen, {&w_c, &w_q, &w_k, &w_v, &w_o});
  cross_attn = register_module(
      "cross_attn", std::make_shared<MultiheadAttention>(attention_options(options, options.cross_attention), gen));
  ff = register_module("ff", std::make_shared<FeedForward>(feed_forward_options(options), gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(D, options.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(D, options.layer_norm_eps));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(D, options.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(options.dropout));
}

ClusterFormerOutput ClusterFormerDecoderLayer::forward(const Tensor& x, const Tensor& centroids, const Tensor& memory,
                                                       const Tensor& lengths, const Tensor& memory_lengths,
                                                       Generator& gen) {
  check_sequence(*this, "input", x, w_c, options_.d_model);
  check_sequence(*this, "memory", memory, w_c, options_.d_model);
  TP_CHECK(memory.size(0) == x.size(0), name(), "input ", to_string(x.shape()), " and memory ",
           to_string(memory.shape()), " have different batch sizes");
  ClusterFormerOutput out;
  // Appendix B: the decoder's self-attention is the masked form of §3.2.
  const Tensor h1 = residual(options_.norm, x, *norm1, *dropout1, gen, [&](const Tensor& y) {
    return clustering_attention(x, y, centroids, {w_c, w_q, w_k, w_v, w_o}, options_.heads, lengths, Causal::Yes,
                                options_.attention, out);
  });
  const Tensor h2 = residual(options_.norm, h1, *norm2, *dropout2, gen, [&](const Tensor& y) {
    const TapeScope scope("cross_attn");
    return cross_attn->forward(y, memory, memory, {lengths, memory_lengths}, Causal::No, gen);
  });
  out.output = residual(options_.norm, h2, *norm3, *dropout3, gen, [&](const Tensor& y) {
    const TapeScope scope("ff");
    return ff->forward(y, gen);
  });
  return out;
}

ClusterFormerDecoder::ClusterFormerDecoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen)
    : Module("ClusterFormerDecoder") {
  check_options("ClusterFormerDecoder", options, num_layers);
  check_neural("ClusterFormerDecoder", options);
  centroids = register_parameter("centroids", initial_centroids(options, gen));
  layers = register_module("layers", std::make_shared<ModuleList<ClusterFormerDecoderLayer>>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<ClusterFormerDecoderLayer>(options, gen));
  if (options.norm == NormPosition::Pre)
    norm = register_module("norm", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
}

ClusterFormerOutput ClusterFormerDecoder::forward(const Tensor& x, const Tensor& memory, const Tensor& lengths,
                                                  const Tensor& memory_lengths, Generator& gen) {
  ClusterFormerOutput out{x, centroids, Tensor(), Tensor(), {}};
  for (size_t i = 0; i < layers->size(); ++i) {
    const TapeScope scope("layers", int64_t(i));
    accumulate(out, (*layers)[i]->forward(out.output, out.centroids, memory, lengths, memory_lengths, gen), i);
  }
  if (norm) out.output = norm->forward(out.output);
  return out;
}

ClusterFormerLoss::ClusterFormerLoss(const ClusteringLossWeights& w) : Module("ClusterFormerLoss"), weights_(w) {
  TP_CHECK(w.mu >= 0 && w.nu >= 0 && w.lambda >= 0, "ClusterFormerLoss",
           "the weights µ, ν, λ must be non-negative (eq. 17), got ", w.mu, ", ", w.nu, ", ", w.lambda);
}

Tensor ClusterFormerLoss::forward(const Tensor& task_loss, const ClusterFormerOutput& out) const {
  const ClusteringLossWeights& w = weights_;
  // eq. 17: L_total = µ L1 + ν L2 + λ L3
  return out.clustering_loss * w.mu + out.sorting_loss * w.nu + task_loss * w.lambda;
}

}  // namespace tapestry::nn
