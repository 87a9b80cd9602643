#include "nn/transformer.h"

#include "core/tape_graph.h"

#include "ops/autocast.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/shape.h"

namespace tapestry::nn {

using attention::AttentionConfig;
using attention::Causal;

MultiheadAttentionOptions attention_options(const TransformerLayerOptions& o, const AttentionConfig& config) {
  MultiheadAttentionOptions m;
  m.d_model = o.d_model;
  m.heads = o.heads;
  m.attention = config;
  return m;
}

void check_options(const char* layer, const TransformerLayerOptions& o, int64_t num_layers) {
  TP_CHECK(o.d_model >= 1 && o.d_ff >= 1, layer, "d_model and d_ff must be positive, got d_model = ", o.d_model,
           ", d_ff = ", o.d_ff);
  TP_CHECK(o.heads >= 1 && o.d_model % o.heads == 0, layer, "heads must be positive and divide d_model, got d_model = ",
           o.d_model, ", heads = ", o.heads);
  TP_CHECK(o.dropout >= 0 && o.dropout < 1, layer, "dropout must lie in [0, 1), got ", o.dropout);
  TP_CHECK(num_layers >= 1, layer, "needs at least one layer, got ", num_layers);
}

FeedForwardOptions feed_forward_options(const TransformerLayerOptions& o) {
  return {o.d_model, o.d_ff, o.activation, o.dropout};
}

// x (B, N, D) of the layer's dtype and device.
void check_sequence(const Module& layer, const char* what, const Tensor& x, const Tensor& like, int64_t d_model) {
  check_input(layer, what, x, like);
  TP_CHECK(x.dim() == 3 && x.size(2) == d_model, layer.name(), what, " must be (B, N, ", d_model, "), got shape ",
           to_string(x.shape()));
}

Tensor residual(NormPosition position, const Tensor& x, LayerNorm& norm, Dropout& dropout, Generator& gen,
                const std::function<Tensor(const Tensor&)>& sublayer) {
  if (position == NormPosition::Pre) return x + dropout.forward(sublayer(norm.forward(x)), gen);
  return norm.forward_residual(x, sublayer(x), dropout, gen);  // norm(x + dropout(sublayer(x))) as one op
}

// ---- TransformerEncoderLayer ----

TransformerEncoderLayer::TransformerEncoderLayer(const TransformerLayerOptions& options, Generator& gen)
    : Module("TransformerEncoderLayer"), options_(options) {
  check_options("TransformerEncoderLayer", options);
  MultiheadAttention::check_attention(name(), options.attention, Causal::No);
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(attention_options(options, options.attention), gen));
  ff = register_module("ff", std::make_shared<FeedForward>(feed_forward_options(options), gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
}

void TransformerEncoderLayer::set_attention(const AttentionConfig& config) {
  MultiheadAttention::check_attention(name(), config, Causal::No);
  self_attn->set_attention(config);
  options_.attention = config;
}

Tensor TransformerEncoderLayer::forward(const Tensor& x, const Tensor& lengths, Generator& gen,
                                       EncoderLayerTrace* trace) {
  check_sequence(*this, "input", x, norm1->weight, options_.d_model);
  const attention::Padding padding{lengths, lengths};
  const Tensor h = residual(options_.norm, x, *norm1, *dropout1, gen, [&](const Tensor& y) {
    if (trace) trace->input = x, trace->attention_input = y;
    const TapeScope scope("self_attn");
    return self_attn->forward(y, y, y, padding, Causal::No, gen);
  });
  return residual(options_.norm, h, *norm2, *dropout2, gen, [&](const Tensor& y) {
    const TapeScope scope("ff");
    return ff->forward(y, gen);
  });
}

void TransformerEncoderLayer::set_attention(const std::string& config) {
  set_attention(MultiheadAttention::parse_attention(name(), config));
}

// ---- TransformerDecoderLayer ----

TransformerDecoderLayer::TransformerDecoderLayer(const TransformerLayerOptions& options, Generator& gen)
    : Module("TransformerDecoderLayer"), options_(options) {
  check_options("TransformerDecoderLayer", options);
  MultiheadAttention::check_attention(name(), options.attention, Causal::Yes);
  MultiheadAttention::check_attention(name(), options.cross_attention, Causal::No);
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(attention_options(options, options.attention), gen));
  cross_attn = register_module("cross_attn",
                               std::make_shared<MultiheadAttention>(attention_options(options, options.cross_attention), gen));
  ff = register_module("ff", std::make_shared<FeedForward>(feed_forward_options(options), gen));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  norm3 = register_module("norm3", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(options.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(options.dropout));
  dropout3 = register_module("dropout3", std::make_shared<Dropout>(options.dropout));
}

void TransformerDecoderLayer::set_self_attention(const AttentionConfig& config) {
  MultiheadAttention::check_attention(name(), config, Causal::Yes);
  self_attn->set_attention(config);
  options_.attention = config;
}

void TransformerDecoderLayer::set_cross_attention(const AttentionConfig& config) {
  MultiheadAttention::check_attention(name(), config, Causal::No);
  cross_attn->set_attention(config);
  options_.cross_attention = config;
}

void TransformerDecoderLayer::set_self_attention(const std::string& config) {
  set_self_attention(MultiheadAttention::parse_attention(name(), config));
}

void TransformerDecoderLayer::set_cross_attention(const std::string& config) {
  set_cross_attention(MultiheadAttention::parse_attention(name(), config));
}

Tensor TransformerDecoderLayer::forward(const Tensor& x, const Tensor& memory, const Tensor& lengths,
                                        const Tensor& memory_lengths, Generator& gen) {
  check_sequence(*this, "input", x, norm1->weight, options_.d_model);
  check_sequence(*this, "memory", memory, norm1->weight, options_.d_model);
  TP_CHECK(memory.size(0) == x.size(0), name(), "input ", to_string(x.shape()), " and memory ",
           to_string(memory.shape()), " have different batch sizes");
  const attention::Padding self_padding{lengths, lengths}, cross_padding{lengths, memory_lengths};
  const Tensor h1 = residual(options_.norm, x, *norm1, *dropout1, gen, [&](const Tensor& y) {
    const TapeScope scope("self_attn");
    return self_attn->forward(y, y, y, self_padding, Causal::Yes, gen);
  });
  const Tensor h2 = residual(options_.norm, h1, *norm2, *dropout2, gen, [&](const Tensor& y) {
    const TapeScope scope("cross_attn");
    return cross_attn->forward(y, memory, memory, cross_padding, Causal::No, gen);
  });
  return residual(options_.norm, h2, *norm3, *dropout3, gen, [&](const Tensor& y) {
    const TapeScope scope("ff");
    return ff->forward(y, gen);
  });
}

DecoderLayerCache TransformerDecoderLayer::start(const Tensor& memory, const Tensor& memory_lengths) {
  check_sequence(*this, "memory", memory, norm1->weight, options_.d_model);
  // The memory enters cross-attention as it is in both norm positions (Pre normalises the query only).
  return {{}, cross_attn->project_keys_values(memory, memory, memory_lengths), memory_lengths};
}

Tensor TransformerDecoderLayer::step(const Tensor& x, DecoderLayerCache& cache, Generator& gen) {
  check_sequence(*this, "input", x, norm1->weight, options_.d_model);
  TP_CHECK(x.size(1) == 1 && cache.memory.keys.defined() && cache.memory.keys.size(0) == x.size(0), name(),
           "step takes one position of the batch the cache was started with, got input ", to_string(x.shape()),
           cache.memory.keys.defined() ? " for a cache of " + std::to_string(cache.memory.keys.size(0)) + " rows"
                                       : " and a cache that was never started");
  // Attending over the cached keys without a mask is causal attention only when a query's output
  // depends on the earlier keys alone, not on how later positions cluster or route.
  TP_CHECK(options_.attention.kind().decodes_incrementally(), name(), "incremental decoding needs a self-attention ",
           "whose queries depend on the earlier keys alone (",
           attention::kind_names([](const attention::Kind& k) { return k.decodes_incrementally(); }), "), got '",
           options_.attention.to_string(), "'");
  const Tensor h1 = residual(options_.norm, x, *norm1, *dropout1, gen, [&](const Tensor& y) {
    const KeyValues now = self_attn->project_keys_values(y, y, Tensor());
    cache.self = cache.self.keys.defined()
                     ? KeyValues{concat({cache.self.keys, now.keys}, 2), concat({cache.self.values, now.values}, 2)}
                     : now;
    return self_attn->forward_cached(y, cache.self, Tensor(), gen);
  });
  const Tensor h2 = residual(options_.norm, h1, *norm2, *dropout2, gen, [&](const Tensor& y) {
    return cross_attn->forward_cached(y, cache.memory, cache.memory_lengths, gen);
  });
  return residual(options_.norm, h2, *norm3, *dropout3, gen, [&](const Tensor& y) {
    const TapeScope scope("ff");
    return ff->forward(y, gen);
  });
}

// ---- stacks ----

TransformerEncoder::TransformerEncoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen)
    : Encoder("TransformerEncoder") {
  check_options("TransformerEncoder", options, num_layers);
  layers = register_module("layers", std::make_shared<ModuleList<TransformerEncoderLayer>>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<TransformerEncoderLayer>(options, gen));
  if (options.norm == NormPosition::Pre)
    norm = register_module("norm", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
}

Tensor TransformerEncoder::forward(const Tensor& x, const Tensor& lengths, Generator& gen,
                                  std::vector<EncoderLayerTrace>* traces) {
  const TransformerEncoderLayer& first = *(*layers)[0];
  check_sequence(*this, "input", x, first.norm1->weight, first.options().d_model);
  Tensor h = x;
  for (size_t i = 0; i < layers->size(); ++i) {
    const TapeScope scope("layers", int64_t(i));
    EncoderLayerTrace trace;
    h = (*layers)[i]->forward(h, lengths, gen, traces ? &trace : nullptr);
    if (traces) traces->push_back(trace);
  }
  return norm ? norm->forward(h) : h;
}

EncoderOutput TransformerEncoder::encode(const Tensor& x, const Tensor& lengths, Generator& gen) {
  EncoderOutput out;
  out.output = forward(x, lengths, gen, &out.layers);
  return out;
}

void TransformerEncoder::set_attention(const AttentionConfig& config) {
  MultiheadAttention::check_attention(name(), config, Causal::No);
  for (const auto& layer : *layers) layer->set_attention(config);
}

void TransformerEncoder::set_attention(const std::string& config) {
  set_attention(MultiheadAttention::parse_attention(name(), config));
}

TransformerDecoder::TransformerDecoder(const TransformerLayerOptions& options, int64_t num_layers, Generator& gen)
    : Module("TransformerDecoder") {
  check_options("TransformerDecoder", options, num_layers);
  layers = register_module("layers", std::make_shared<ModuleList<TransformerDecoderLayer>>());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(std::make_shared<TransformerDecoderLayer>(options, gen));
  if (options.norm == NormPosition::Pre)
    norm = register_module("norm", std::make_shared<LayerNorm>(options.d_model, options.layer_norm_eps));
}

Tensor TransformerDecoder::forward(const Tensor& x, const Tensor& memory, const Tensor& lengths,
                                   const Tensor& memory_lengths, Generator& gen) {
  const TransformerDecoderLayer& first = *(*layers)[0];
  check_sequence(*this, "input", x, first.norm1->weight, first.options().d_model);
  check_sequence(*this, "memory", memory, first.norm1->weight, first.options().d_model);
  // Under autocast every layer's cross-attention projects the memory in bfloat16: converted once
  // for all of them (ops/autocast.h), one copy kept for their backward.
  const Tensor m = autocast_lower(memory);
  Tensor h = x;
  for (size_t i = 0; i < layers->size(); ++i) {
    const TapeScope scope("layers", int64_t(i));
    h = (*layers)[i]->forward(h, m, lengths, memory_lengths, gen);
  }
  return norm ? norm->forward(h) : h;
}

void DecoderCache::select_rows(const Tensor& rows) {
  const auto select = [&](Tensor& t) {
    if (t.defined()) t = index_select(t, 0, rows);
  };
  for (DecoderLayerCache& layer : layers) {
    for (Tensor* t : {&layer.self.keys, &layer.self.values, &layer.memory.keys, &layer.memory.values,
                      &layer.memory_lengths})
      select(*t);
  }
}

DecoderCache TransformerDecoder::start(const Tensor& memory, const Tensor& memory_lengths) {
  DecoderCache cache;
  const Tensor m = autocast_lower(memory);  // converted once for every layer, as in forward
  for (const auto& layer : *layers) cache.layers.push_back(layer->start(m, memory_lengths));
  return cache;
}

Tensor TransformerDecoder::step(const Tensor& x, DecoderCache& cache, Generator& gen) {
  TP_CHECK(cache.layers.size() == layers->size(), name(), "the cache holds ", cache.layers.size(),
           " layers, the decoder ", layers->size(), ": start it with this decoder");
  Tensor h = x;
  for (size_t i = 0; i < cache.layers.size(); ++i) h = (*layers)[i]->step(h, cache.layers[i], gen);
  return norm ? norm->forward(h) : h;
}

void TransformerDecoder::set_self_attention(const AttentionConfig& config) {
  MultiheadAttention::check_attention(name(), config, Causal::Yes);
  for (const auto& layer : *layers) layer->set_self_attention(config);
}

void TransformerDecoder::set_cross_attention(const AttentionConfig& config) {
  MultiheadAttention::check_attention(name(), config, Causal::No);
  for (const auto& layer : *layers) layer->set_cross_attention(config);
}

void TransformerDecoder::set_self_attention(const std::string& config) {
  set_self_attention(MultiheadAttention::parse_attention(name(), config));
}

void TransformerDecoder::set_cross_attention(const std::string& config) {
  set_cross_attention(MultiheadAttention::parse_attention(name(), config));
}

}  // namespace tapestry::nn
