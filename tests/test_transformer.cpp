// Transformer encoder / decoder layers and stacks: gradchecks (float64, pre- and post-norm),
// causality, padding, switching attention, bad input, and a small model that learns to reverse.
#include <chrono>
#include <cmath>
#include <memory>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using attention::AttentionConfig;

namespace {

nn::TransformerLayerOptions small_options(nn::NormPosition norm, const std::string& attention = "full") {
  nn::TransformerLayerOptions o;
  o.d_model = 4;
  o.heads = 2;
  o.d_ff = 6;
  o.dropout = 0.2;
  o.activation = nn::Activation::GELU;
  o.norm = norm;
  o.attention = AttentionConfig::parse(attention);
  return o;
}

std::string norm_name(nn::NormPosition norm) { return norm == nn::NormPosition::Pre ? "pre-norm" : "post-norm"; }

void check_module_gradients(nn::Module& module, const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                            const std::vector<Tensor>& inputs) {
  const GradcheckResult result = nn::gradcheck(module, fn, inputs);
  INFO(result.report);
  CHECK(result.ok);
}

Tensor lengths(std::vector<int64_t> values) {
  const int64_t n = static_cast<int64_t>(values.size());
  return from_vector<int64_t>(values, {n});
}

// t with every position ≥ lens[b] of sample b set to NaN.
Tensor poison_padding(const Tensor& t, const Tensor& lens) {
  const Tensor pos = reshape(arange(t.size(1)), {1, t.size(1), 1});
  return masked_fill(t, ge(pos, reshape(lens, {t.size(0), 1, 1})), NAN);
}

// Rows [0, lens[b]) of each sample of a and b are equal (exactly).
void check_real_rows_equal(const Tensor& a, const Tensor& b, const Tensor& lens) {
  const std::vector<int64_t> n = lens.to_vector<int64_t>();
  for (int64_t i = 0; i < a.size(0); ++i)
    check_close(slice(select(a, 0, i), 0, 0, n[i]), slice(select(b, 0, i), 0, 0, n[i]), 0, 0);
}

}  // namespace

TEST_CASE("residual: post-norm normalises the sum, pre-norm normalises the sublayer's input") {
  nn::LayerNorm norm(4);
  nn::Dropout dropout(0.5);
  dropout.eval();
  norm.to(DType::Float64);
  const Tensor x = uniform({2, 3, 4}, 40);
  Generator gen(0);
  auto twice = [](const Tensor& y) { return y * 2.0; };
  check_close(nn::residual(nn::NormPosition::Post, x, norm, dropout, gen, twice), norm.forward(x * 3.0), 0, 0);
  check_close(nn::residual(nn::NormPosition::Pre, x, norm, dropout, gen, twice), x + norm.forward(x) * 2.0, 0, 0);
}

// ---- gradchecks ----

TEST_CASE("TransformerEncoderLayer: gradcheck, pre- and post-norm, dropout and padding") {
  for (nn::NormPosition norm : {nn::NormPosition::Post, nn::NormPosition::Pre}) {
    INFO(norm_name(norm));
    Generator gen(1);
    nn::TransformerEncoderLayer layer(small_options(norm), gen);
    layer.to(DType::Float64);
    const Tensor lens = lengths({3, 2});
    check_module_gradients(layer, [&](const std::vector<Tensor>& in) {
      Generator g(2);
      return layer.forward(in[0], lens, g);
    }, {uniform({2, 3, 4}, 3)});
  }
}

TEST_CASE("TransformerDecoderLayer: gradcheck, pre- and post-norm, dropout and padding") {
  for (nn::NormPosition norm : {nn::NormPosition::Post, nn::NormPosition::Pre}) {
    INFO(norm_name(norm));
    Generator gen(4);
    nn::TransformerDecoderLayer layer(small_options(norm), gen);
    layer.to(DType::Float64);
    const Tensor lens = lengths({3, 2}), memory_lens = lengths({2, 4});
    check_module_gradients(layer, [&](const std::vector<Tensor>& in) {
      Generator g(5);
      return layer.forward(in[0], in[1], lens, memory_lens, g);
    }, {uniform({2, 3, 4}, 6), uniform({2, 4, 4}, 7)});
  }
}

TEST_CASE("TransformerEncoder / TransformerDecoder stacks: gradcheck") {
  Generator gen(8);
  nn::TransformerEncoder encoder(small_options(nn::NormPosition::Pre), 2, gen);
  encoder.to(DType::Float64);
  check_module_gradients(encoder, [&](const std::vector<Tensor>& in) {
    Generator g(9);
    return encoder.forward(in[0], lengths({2, 3}), g);
  }, {uniform({2, 3, 4}, 10)});

  nn::TransformerDecoder decoder(small_options(nn::NormPosition::Post), 2, gen);
  decoder.to(DType::Float64);
  check_module_gradients(decoder, [&](const std::vector<Tensor>& in) {
    Generator g(11);
    return decoder.forward(in[0], in[1], Tensor(), lengths({3, 1}), g);
  }, {uniform({2, 2, 4}, 12), uniform({2, 3, 4}, 13)});
}

TEST_CASE("TransformerEncoderLayer with improved-clustered attention: gradcheck (fixed seed per call)") {
  Generator gen(14);
  nn::TransformerEncoderLayer layer(small_options(nn::NormPosition::Pre, "improved-clustered:clusters=2,bits=8,topk=2"), gen);
  layer.to(DType::Float64);
  check_module_gradients(layer, [&](const std::vector<Tensor>& in) {
    Generator g(15);  // the same hash planes and dropout masks on every call
    return layer.forward(in[0], lengths({4, 3}), g);
  }, {uniform({2, 4, 4}, 16, -2, 2)});
}

// ---- structure ----

TEST_CASE("Transformer stacks: parameter names, the final norm of pre-norm, modes") {
  Generator gen(17);
  nn::TransformerEncoder pre(small_options(nn::NormPosition::Pre), 2, gen);
  const nn::NamedTensors named = pre.named_parameters();
  CHECK(named.front().first == "layers.0.self_attn.q_proj.weight");
  CHECK(named[8].first == "layers.0.ff.linear1.weight");
  CHECK(named[12].first == "layers.0.norm1.weight");
  CHECK(named[16].first == "layers.1.self_attn.q_proj.weight");
  CHECK(named.back().first == "norm.bias");
  // per layer: 4 projections (4·4 + 4), ff (4·6 + 6 + 6·4 + 4), two norms (2·4 each)
  const int64_t per_layer = 4 * 20 + 58 + 16;
  CHECK(pre.parameter_count() == 2 * per_layer + 8);
  nn::TransformerEncoder post(small_options(nn::NormPosition::Post), 2, gen);
  CHECK(post.norm == nullptr);
  CHECK(post.parameter_count() == 2 * per_layer);

  nn::TransformerDecoder decoder(small_options(nn::NormPosition::Post), 1, gen);
  CHECK(decoder.named_parameters()[8].first == "layers.0.cross_attn.q_proj.weight");
  CHECK(decoder.parameter_count() == 8 * 20 + 58 + 24);

  // Eval turns every dropout off: full attention then draws nothing.
  const Tensor x = to(uniform({2, 3, 4}, 18), DType::Float32);
  Generator g(19);
  pre.forward(x, Tensor(), g);
  CHECK(g.offset() > 0);
  pre.eval();
  CHECK(!(*pre.layers)[1]->ff->dropout->is_training());
  const uint64_t offset = g.offset();
  const Tensor a = pre.forward(x, Tensor(), g), b = pre.forward(x, Tensor(), g);
  CHECK(g.offset() == offset);
  check_close(a, b, 0, 0);
}

// ---- causality and padding ----

TEST_CASE("TransformerDecoder: output t has exactly zero gradient from inputs after t") {
  const int64_t N = 5;
  Generator gen(20);
  nn::TransformerDecoder decoder(small_options(nn::NormPosition::Pre), 2, gen);
  decoder.to(DType::Float64);
  Tensor x = uniform({2, N, 4}, 21), memory = uniform({2, 3, 4}, 22);
  x.set_requires_grad(true);
  // Output t's elements weighted, not summed: the stack ends in a layer norm whose weight starts at
  // 1, and the sum of a normalized row does not depend on its input (its gradient is 0 but for
  // rounding).
  const Tensor weights = uniform({2, 4}, 26, 0.5, 1.5);
  for (int64_t t = 0; t < N; ++t) {
    x.zero_grad();
    Generator g(23);
    sum(select(decoder.forward(x, memory, Tensor(), Tensor(), g), 1, t) * weights).backward();
    const Tensor grad = x.grad();
    for (int64_t s = 0; s < N; ++s) {
      const double norm = sum(abs(select(grad, 1, s))).item<double>();
      INFO("output " << t << ", input " << s);
      if (s > t) CHECK(norm == 0.0);
      else CHECK(norm > 0.0);
    }
  }
}

TEST_CASE("Padded positions (even NaN) change no real output of the stacks") {
  const Tensor x = uniform({2, 5, 4}, 24), memory = uniform({2, 6, 4}, 25);
  const Tensor lens = lengths({5, 3}), memory_lens = lengths({4, 6});
  for (const char* config : {"full", "improved-clustered:clusters=2,topk=3", "clustered:clusters=3"}) {
    INFO(std::string(config));
    Generator gen(26);
    nn::TransformerEncoder encoder(small_options(nn::NormPosition::Post, config), 2, gen);
    encoder.to(DType::Float64);
    auto run = [&](const Tensor& input) {
      Generator g(27);
      return encoder.forward(input, lens, g);
    };
    check_real_rows_equal(run(poison_padding(x, lens)), run(x), lens);
  }
  Generator gen(28);
  nn::TransformerLayerOptions options = small_options(nn::NormPosition::Pre);
  options.cross_attention = AttentionConfig::parse("improved-clustered:clusters=2,topk=2");
  nn::TransformerDecoder decoder(options, 2, gen);
  decoder.to(DType::Float64);
  auto run = [&](const Tensor& input, const Tensor& mem) {
    Generator g(29);
    return decoder.forward(input, mem, lens, memory_lens, g);
  };
  check_real_rows_equal(run(poison_padding(x, lens), poison_padding(memory, memory_lens)), run(x, memory), lens);
}

// ---- switching attention ----

TEST_CASE("set_attention on the stacks reaches every layer; improved-clustered with topk = S equals full") {
  Generator gen(30);
  nn::TransformerEncoder encoder(small_options(nn::NormPosition::Post), 3, gen);
  encoder.to(DType::Float64);
  encoder.eval();
  const Tensor x = uniform({2, 6, 4}, 31), lens = lengths({6, 4});
  Generator g(32);
  const Tensor full = encoder.forward(x, lens, g);
  encoder.set_attention("improved-clustered:clusters=2,topk=6");
  for (const auto& layer : *encoder.layers) {
    CHECK(layer->self_attn->attention().to_string() == "improved-clustered:clusters=2,bits=63,iterations=10,topk=6");
    CHECK(layer->options().attention.name() == "improved-clustered");
  }
  const Tensor improved = encoder.forward(x, lens, g);
  check_close(slice(select(improved, 0, 0), 0, 0, 6), slice(select(full, 0, 0), 0, 0, 6), 1e-12, 1e-9);
  check_close(slice(select(improved, 0, 1), 0, 0, 4), slice(select(full, 0, 1), 0, 0, 4), 1e-12, 1e-9);

  nn::TransformerDecoder decoder(small_options(nn::NormPosition::Post), 2, gen);
  decoder.set_cross_attention("clustered:clusters=2");
  CHECK((*decoder.layers)[1]->cross_attn->attention().name() == "clustered");
  CHECK((*decoder.layers)[1]->self_attn->attention().name() == "full");
  check_error([&] { decoder.set_self_attention("clustered:clusters=2"); },
              {"TransformerDecoder", "clustered attention has no causal form"});
  // improved-clustered has a causal form (causal_improved_clustered_attention)
  (*decoder.layers)[0]->set_self_attention("improved-clustered");
  CHECK((*decoder.layers)[0]->self_attn->attention().name() == "improved-clustered");
  decoder.set_self_attention("full");
}

// ---- bad input ----

TEST_CASE("Under autocast the attention's shared input and the decoder's memory become bfloat16 once") {
  // What a forward keeps beyond its output, given a float32 input, against the same input already
  // in bfloat16: one bfloat16 copy more, not one per projection (self-attention's q, k and v) or one
  // per layer (the decoder's cross-attentions). The outputs are the same to the bit.
  Allocator& alloc = context(Device::cpu()).allocator();
  const auto kept = [&](const std::function<Tensor()>& forward, std::vector<float>& values) {
    alloc.empty_cache();
    const int64_t before = alloc.stats().in_use;
    const Tensor y = forward();
    const int64_t held = alloc.stats().in_use - before - y.numel() * static_cast<int64_t>(element_size(y.dtype()));
    values = to(y, DType::Float32).to_vector<float>();
    return held;
  };
  const AutocastScope autocast;
  Generator init(4), gen(0);
  nn::MultiheadAttentionOptions mo;
  mo.d_model = 32;
  mo.heads = 2;
  nn::MultiheadAttention mha(mo, init);
  const Tensor x = to(uniform({2, 64, 32}, 40), DType::Float32), x16 = to(x, DType::BFloat16);
  std::vector<float> a, b;
  const int64_t from32 = kept([&] { return mha.forward(x, x, x, {}, attention::Causal::No, gen); }, a);
  const int64_t from16 = kept([&] { return mha.forward(x16, x16, x16, {}, attention::Causal::No, gen); }, b);
  CHECK(a == b);
  CHECK(from32 - from16 == x16.numel() * 2);

  nn::TransformerLayerOptions o = small_options(nn::NormPosition::Post);
  o.d_model = 32;
  o.d_ff = 64;
  o.dropout = 0;
  nn::TransformerDecoder decoder(o, 3, init);
  const Tensor t = to(uniform({2, 16, 32}, 41), DType::Float32), memory = to(uniform({2, 64, 32}, 42), DType::Float32);
  const Tensor memory16 = to(memory, DType::BFloat16);
  const int64_t memory32_kept = kept([&] { return decoder.forward(t, memory, {}, {}, gen); }, a);
  const int64_t memory16_kept = kept([&] { return decoder.forward(t, memory16, {}, {}, gen); }, b);
  CHECK(a == b);
  CHECK(memory32_kept - memory16_kept == memory16.numel() * 2);
}

TEST_CASE("Transformer layers and stacks: bad options and bad input name the layer") {
  Generator gen(0);
  nn::TransformerLayerOptions bad = small_options(nn::NormPosition::Post);
  bad.heads = 3;
  check_error([&] { nn::TransformerEncoderLayer(bad, gen); }, {"TransformerEncoderLayer", "heads must be positive and divide d_model"});
  check_error([&] { nn::TransformerDecoder(bad, 2, gen); }, {"TransformerDecoder", "divide d_model, got d_model = 4, heads = 3"});
  bad = small_options(nn::NormPosition::Post);
  bad.dropout = 1.5;
  check_error([&] { nn::TransformerDecoderLayer(bad, gen); }, {"TransformerDecoderLayer", "dropout must lie in [0, 1)"});
  check_error([&] { nn::TransformerEncoder(small_options(nn::NormPosition::Pre), 0, gen); },
              {"TransformerEncoder", "at least one layer"});
  check_error([&] { nn::TransformerEncoder(small_options(nn::NormPosition::Pre, "neural-clustering"), 1, gen); },
              {"TransformerEncoder", "ClusterFormer layers"});
  bad = small_options(nn::NormPosition::Post, "clustered");
  check_error([&] { nn::TransformerDecoderLayer(bad, gen); }, {"TransformerDecoderLayer", "no causal form"});
  bad = small_options(nn::NormPosition::Post);
  bad.cross_attention = attention::AttentionConfig::parse("neural-clustering");
  check_error([&] { nn::TransformerDecoderLayer(bad, gen); }, {"TransformerDecoderLayer", "ClusterFormer"});

  nn::TransformerEncoder encoder(small_options(nn::NormPosition::Pre), 1, gen);
  nn::TransformerDecoder decoder(small_options(nn::NormPosition::Pre), 1, gen);
  const Tensor x = zeros({2, 3, 4});
  Generator g(1);
  check_error([&] { encoder.forward(zeros({3, 4}), Tensor(), g); }, {"TransformerEncoder: input must be (B, N, 4), got shape (3, 4)"});
  check_error([&] { encoder.forward(zeros({2, 3, 5}), Tensor(), g); }, {"TransformerEncoder: input must be (B, N, 4)"});
  check_error([&] { encoder.forward(to(x, DType::Float64), Tensor(), g); }, {"TransformerEncoder: input must be float32"});
  check_error([&] { (*encoder.layers)[0]->forward(zeros({2, 3}), Tensor(), g); },
              {"TransformerEncoderLayer: input must be (B, N, 4)"});
  check_error([&] { encoder.forward(x, lengths({3, 4}), g); }, {"MultiheadAttention", "a length of 4 is outside [0, 3]"});
  check_error([&] { decoder.forward(x, zeros({2, 5, 3}), Tensor(), Tensor(), g); },
              {"TransformerDecoder: memory must be (B, N, 4), got shape (2, 5, 3)"});
  check_error([&] { decoder.forward(x, zeros({3, 5, 4}), Tensor(), Tensor(), g); },
              {"TransformerDecoderLayer: input (2, 3, 4) and memory (3, 5, 4) have different batch sizes"});
  check_error([&] { encoder.set_attention("full:clusters=3"); },
              {"TransformerEncoder: attention config 'full:clusters=3'", "'clusters' is not a setting of full"});
  check_error([&] { encoder.set_attention("linear"); }, {"TransformerEncoder", "unknown attention type 'linear'"});
  check_error([&] { decoder.set_cross_attention("neural-clustering:clusters=2"); }, {"TransformerDecoder", "ClusterFormer"});
}

// ---- learning ----

namespace {

// Embedding + positional encoding + a 2-layer encoder + a linear read-out.
class Reverser : public nn::Module {
 public:
  Reverser(const nn::TransformerLayerOptions& options, int64_t vocab, Generator& gen) : Module("Reverser") {
    embed = register_module("embed", std::make_shared<nn::Embedding>(vocab, options.d_model, gen));
    position = register_module("position", std::make_shared<nn::SinusoidalPositionalEncoding>(options.d_model));
    encoder = register_module("encoder", std::make_shared<nn::TransformerEncoder>(options, 2, gen));
    head = register_module("head", std::make_shared<nn::Linear>(options.d_model, vocab, gen));
  }
  Tensor forward(const Tensor& tokens, Generator& gen) {  // (B, N) -> logits (B, N, V)
    return head->forward(encoder->forward(position->forward(embed->forward(tokens)), Tensor(), gen));
  }
  std::shared_ptr<nn::Embedding> embed;
  std::shared_ptr<nn::SinusoidalPositionalEncoding> position;
  std::shared_ptr<nn::TransformerEncoder> encoder;
  std::shared_ptr<nn::Linear> head;
};

constexpr int64_t kVocab = 8, kLength = 8;

// Token accuracy of reversing 256 fresh sequences, in eval mode.
double reversal_accuracy(Reverser& model, Generator& hashing) {
  NoGradGuard no_grad;
  model.eval();
  Generator data(1000);
  const Tensor tokens = randint(0, kVocab, {256, kLength}, data);
  const Tensor reversed = index_select(tokens, 1, arange(kLength - 1.0, -1.0, -1.0));
  const Tensor correct = eq(argmax(model.forward(tokens, hashing), -1), reversed);
  model.train();
  return sum(to(correct, DType::Float64)).item<double>() / static_cast<double>(correct.numel());
}

// Trains with Adam on batches of 32 random sequences until the accuracy reaches 99% (checked every
// 25 steps) or max_steps pass; returns the steps taken.
int64_t train_reversal(Reverser& model, Generator& hashing, int64_t max_steps) {
  optim::Adam adam(model.parameters(), {3e-3});
  nn::CrossEntropyLoss loss_fn;
  Generator data(7);
  const Tensor reverse = arange(kLength - 1.0, -1.0, -1.0);
  for (int64_t step = 1; step <= max_steps; ++step) {
    const Tensor tokens = randint(0, kVocab, {32, kLength}, data);
    adam.zero_grad();
    loss_fn.forward(model.forward(tokens, hashing), index_select(tokens, 1, reverse)).backward();
    adam.step();
    if (step % 25 == 0 && reversal_accuracy(model, hashing) >= 0.99) return step;
  }
  return max_steps;
}

nn::TransformerLayerOptions reverser_options(nn::NormPosition norm, const std::string& attention) {
  nn::TransformerLayerOptions o;
  o.d_model = 32;
  o.heads = 4;
  o.d_ff = 64;
  o.dropout = 0.0;
  o.norm = norm;
  o.attention = AttentionConfig::parse(attention);
  return o;
}

}  // namespace

TEST_CASE("A 2-layer Transformer encoder learns to reverse 8 tokens: full and improved-clustered attention") {
  struct Run {
    nn::NormPosition norm;
    const char* attention;
  };
  // improved-clustered: 4 clusters of the 8 queries, each with its cluster's top 4 keys (of 8).
  for (const Run& run : {Run{nn::NormPosition::Post, "full"},
                         Run{nn::NormPosition::Pre, "improved-clustered:clusters=4,topk=4"}}) {
    const std::string attention = run.attention;
    INFO(attention << ", " << norm_name(run.norm));
    const auto start = std::chrono::steady_clock::now();
    Generator init(1), hashing(3);
    Reverser model(reverser_options(run.norm, run.attention), kVocab, init);
    const int64_t steps = train_reversal(model, hashing, 400);
    const double accuracy = reversal_accuracy(model, hashing);
    MESSAGE(attention << ": " << accuracy * 100 << "% after " << steps << " steps, "
                          << std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() << " s");
    CHECK(accuracy >= 0.99);

    if (attention == "full") {
      // Evaluated with another attention: improved-clustered over all 8 keys is full attention.
      model.encoder->set_attention("improved-clustered:clusters=2,topk=8");
      CHECK(reversal_accuracy(model, hashing) == accuracy);
    }
  }
}
