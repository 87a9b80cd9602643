#include "nn/multihead_attention.h"

#include "core/autograd.h"
#include "ops/autocast.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace tapestry::nn {

using attention::AttentionConfig;
using attention::Causal;
using attention::Padding;

namespace {

// x (B, L, D) with the rows at positions ≥ lengths[b] set to 0; x itself without lengths.
Tensor zero_padding(const Tensor& x, const Tensor& lengths, const char* layer) {
  if (!lengths.defined()) return x;
  const Tensor real = attention::valid_positions(lengths, x.size(0), x.size(1), x.device(), layer);  // (B, L)
  return where(unsqueeze(real, 2), x, zeros({}, x.options()));
}

bool same(const Tensor& a, const Tensor& b) { return a.impl_ptr() == b.impl_ptr(); }

}  // namespace

void MultiheadAttention::check_attention(const std::string& layer, const AttentionConfig& config, Causal causal) {
  const attention::Kind& kind = config.kind();
  TP_CHECK(kind.form() == attention::Form::Heads, layer, config.name(), " attention is handled by the ClusterFormer ",
           "layers, not by MultiheadAttention: it clusters the hidden states before the projections and returns ",
           "clustering losses and centroids besides its output (got '", config.to_string(), "')");
  TP_CHECK(causal == Causal::No || kind.has_causal_form(), layer, config.name(),
           " attention has no causal form; causal self-attention must be one of ",
           attention::kind_names([](const attention::Kind& k) { return k.has_causal_form() && k.form() == attention::Form::Heads; }),
           " (got '", config.to_string(), "')");
}

MultiheadAttention::MultiheadAttention(const MultiheadAttentionOptions& options, Generator& gen)
    : Module("MultiheadAttention"), options_(options) {
  TP_CHECK(options.d_model >= 1 && options.heads >= 1 && options.d_model % options.heads == 0, name(),
           "heads must be positive and divide d_model, got d_model = ", options.d_model, ", heads = ", options.heads);
  check_attention(name(), options.attention, Causal::No);
  const int64_t D = options.d_model;
  q_proj = register_module("q_proj", std::make_shared<Linear>(D, D, gen, options.bias));
  k_proj = register_module("k_proj", std::make_shared<Linear>(D, D, gen, options.bias));
  v_proj = register_module("v_proj", std::make_shared<Linear>(D, D, gen, options.bias));
  out_proj = register_module("out_proj", std::make_shared<Linear>(D, D, gen, options.bias));
  for (const auto& [buffer, value] : options.attention.kind().initial_state(options.attention, options.heads,
                                                                          D / options.heads, gen, Options{}))
    state_[buffer] = register_buffer(buffer, value);
}

AttentionConfig MultiheadAttention::parse_attention(const std::string& layer, const std::string& text) {
  try {
    return AttentionConfig::parse(text);
  } catch (const Error& e) {
    throw Error(layer + ": " + e.what());
  }
}

void MultiheadAttention::set_attention(const AttentionConfig& config) {
  check_attention(name(), config, Causal::No);
  // The state this layer keeps (its buffers, or state made for an earlier switch) stays where it fits
  // the new config; a layer built for another attention gets state that is not saved, from a fixed seed.
  Generator gen(0);
  attention::State state = config.kind().initial_state(config, options_.heads, options_.d_model / options_.heads, gen,
                                                       q_proj->weight.options());
  for (auto& [buffer_name, value] : state) {
    const auto earlier = state_.find(buffer_name);
    const Tensor* kept = has_buffer(buffer_name) ? &buffer(buffer_name) : earlier != state_.end() ? &earlier->second : nullptr;
    if (kept && kept->shape() == value.shape()) value = *kept;
    else TP_CHECK(!has_buffer(buffer_name), name(), "this layer keeps '", buffer_name, "' of shape ",
                  to_string(kept->shape()), " for the attention it was built with; '", config.to_string(), "' needs ",
                  to_string(value.shape()));
  }
  options_.attention = config;
  state_ = std::move(state);
}

void MultiheadAttention::set_attention(const std::string& config) { set_attention(parse_attention(name(), config)); }

void MultiheadAttention::check_model_input(const char* what, const Tensor& x) const {
  check_input(*this, what, x, q_proj->weight);
  TP_CHECK(x.dim() == 3 && x.size(2) == options_.d_model, "MultiheadAttention", what, " must be (B, L, ",
           options_.d_model, "), got shape ", to_string(x.shape()));
}

Tensor MultiheadAttention::split_heads(const Tensor& x) const {
  const int64_t H = options_.heads;
  return permute(reshape(x, {x.size(0), x.size(1), H, options_.d_model / H}), {0, 2, 1, 3});
}

Tensor MultiheadAttention::merge_heads(const Tensor& x) const {
  return out_proj->forward(reshape(permute(x, {0, 2, 1, 3}), {x.size(0), x.size(2), options_.d_model}));
}

Tensor MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value, const Padding& padding,
                                   Causal causal, Generator& gen) {
  const char* op = "MultiheadAttention";
  for (const auto& [what, x] : {std::pair<const char*, const Tensor*>{"query", &query}, {"key", &key}, {"value", &value}})
    check_model_input(what, *x);
  const int64_t B = query.size(0), N = query.size(1), S = key.size(1);
  TP_CHECK(key.size(0) == B && value.size(0) == B && value.size(1) == S, op, "query ", to_string(query.shape()),
           ", key ", to_string(key.shape()), " and value ", to_string(value.shape()),
           " do not fit (B, N, D), (B, S, D), (B, S, D)");
  check_attention(op, options_.attention, causal);
  TP_CHECK(causal == Causal::No || N == S, op, "causal attention needs as many queries as keys, got N = ", N,
           ", S = ", S);

  // Under autocast the projections compute in bfloat16 (ops/autocast.h): a shared input is converted
  // once here, so that their backward keeps one bfloat16 copy of it, not one per projection.
  const Tensor q_in = zero_padding(autocast_lower(query), padding.query_lengths, op);
  const Tensor k_in = same(key, query) && same(padding.key_lengths, padding.query_lengths)
                          ? q_in
                          : zero_padding(autocast_lower(key), padding.key_lengths, op);
  const Tensor v_in = same(value, key) ? k_in : zero_padding(autocast_lower(value), padding.key_lengths, op);
  const Tensor q = split_heads(q_proj->forward(q_in));
  // Shared-QK attention keys the positions by the query projection (attend normalises them); k_proj
  // is kept, unused, so that one model can be evaluated with either kind of attention.
  const bool shared = attention::shares_qk(options_.attention);
  const Tensor k = shared && same(k_in, q_in) ? q : split_heads((shared ? q_proj : k_proj)->forward(k_in));
  const Tensor v = split_heads(v_proj->forward(v_in));
  const Tensor attended = attention::attend(options_.attention, q, k, v, padding, causal, gen, state_);  // (B, H, N, E)
  if (is_training() && !state_.empty()) {
    NoGradGuard no_grad;
    attention::State moved = state_;
    options_.attention.kind().update_state(options_.attention, q, k, padding, moved);
    for (auto& [buffer, value] : state_) copy_(value, moved.at(buffer));
  }
  return merge_heads(attended);
}

Tensor MultiheadAttention::project_queries(const Tensor& query, const Tensor& query_lengths) {
  const char* op = "MultiheadAttention.project_queries";
  check_model_input("query", query);
  return split_heads(q_proj->forward(zero_padding(query, query_lengths, op)));
}

KeyValues MultiheadAttention::project_keys_values(const Tensor& key, const Tensor& value, const Tensor& key_lengths) {
  const char* op = "MultiheadAttention.project_keys_values";
  check_model_input("key", key);
  check_model_input("value", value);
  TP_CHECK(key.size(0) == value.size(0) && key.size(1) == value.size(1), op, "key ", to_string(key.shape()),
           " and value ", to_string(value.shape()), " do not fit (B, S, D), (B, S, D)");
  const Tensor k_in = zero_padding(autocast_lower(key), key_lengths, op);  // converted once (forward's comment)
  const Tensor v_in = same(value, key) ? k_in : zero_padding(autocast_lower(value), key_lengths, op);
  const bool shared = attention::shares_qk(options_.attention);
  return {split_heads((shared ? q_proj : k_proj)->forward(k_in)), split_heads(v_proj->forward(v_in))};
}

Tensor MultiheadAttention::forward_cached(const Tensor& query, const KeyValues& cached, const Tensor& key_lengths,
                                          Generator& gen) {
  const char* op = "MultiheadAttention.forward_cached";
  check_model_input("query", query);
  const int64_t B = query.size(0), H = options_.heads, E = options_.d_model / H;
  for (const Tensor* t : {&cached.keys, &cached.values})
    TP_CHECK(t->defined() && t->dim() == 4 && t->size(0) == B && t->size(1) == H && t->size(3) == E, op,
             "cached keys and values must be (", B, ", ", H, ", S, ", E, ") for query ", to_string(query.shape()),
             ", got ", t->defined() ? to_string(t->shape()) : std::string("an undefined tensor"));
  TP_CHECK(cached.keys.size(2) == cached.values.size(2), op, "cached keys ", to_string(cached.keys.shape()),
           " and values ", to_string(cached.values.shape()), " hold different numbers of positions");
  const Padding padding{Tensor(), key_lengths};
  return merge_heads(attention::attend(options_.attention, split_heads(q_proj->forward(query)), cached.keys,
                                       cached.values, padding, Causal::No, gen, state_));
}

}  // namespace tapestry::nn
