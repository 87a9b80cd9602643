// The basic layers, MultiheadAttention and CrossEntropyLoss: values against references, gradchecks
// of inputs and parameters (float64), padding, and bad input.
#include <cmath>
#include <memory>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using attention::AttentionConfig;
using attention::Causal;
using attention::Padding;

namespace {

template <class M>
M& float64(M& module) {
  module.to(DType::Float64);
  return module;
}

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

}  // namespace

// ---- Linear ----

TEST_CASE("Linear: x Wᵀ + b over any leading dims; PyTorch's init bounds") {
  Generator gen(1);
  nn::Linear linear(5, 3, gen);
  CHECK(linear.weight.shape() == Shape{3, 5});
  CHECK(linear.bias.shape() == Shape{3});
  const double bound = 1 / std::sqrt(5.0);
  for (const Tensor& p : {linear.weight, linear.bias}) {
    for (float v : p.to_vector<float>()) CHECK(std::abs(v) <= bound);
  }
  CHECK(max(abs(linear.weight)).item<double>() > 0.5 * bound);  // spread over the range, not squeezed
  float64(linear);
  const Tensor x = uniform({2, 4, 5}, 2);
  const std::vector<double> w = linear.weight.to_vector<double>(), b = linear.bias.to_vector<double>(),
                            xs = x.to_vector<double>();
  std::vector<double> want(2 * 4 * 3);
  for (int64_t r = 0; r < 8; ++r)
    for (int64_t o = 0; o < 3; ++o) {
      double acc = b[o];
      for (int64_t i = 0; i < 5; ++i) acc += xs[r * 5 + i] * w[o * 5 + i];
      want[r * 3 + o] = acc;
    }
  check_close(linear.forward(x), from_vector(want, {2, 4, 3}), 1e-12, 1e-12);

  Generator again(1);
  nn::Linear no_bias(5, 3, again, nn::Bias::No);
  CHECK(!no_bias.bias.defined());
  CHECK(no_bias.named_parameters().size() == 1);
  CHECK(no_bias.forward(zeros({7, 5})).shape() == Shape{7, 3});
  CHECK(no_bias.forward(zeros({0, 5})).shape() == Shape{0, 3});
}

TEST_CASE("Linear: gradcheck, with and without bias") {
  for (nn::Bias bias : {nn::Bias::Yes, nn::Bias::No}) {
    Generator gen(3);
    nn::Linear linear(4, 3, gen, bias);
    float64(linear);
    check_module_gradients(linear, [&](const std::vector<Tensor>& in) { return linear.forward(in[0]); },
                           {uniform({2, 2, 4}, 4)});
  }
}

TEST_CASE("Linear: bad input") {
  Generator gen(0);
  nn::Linear linear(4, 3, gen);
  check_error([&] { linear.forward(zeros({2, 5})); }, {"Linear: input must have a last dim of 4, got shape (2, 5)"});
  check_error([&] { linear.forward(zeros({}, {DType::Float32})); }, {"Linear: input", "shape ()"});
  check_error([&] { linear.forward(zeros({2, 4}, {DType::Float64})); }, {"Linear: input must be float32", "float64"});
  check_error([&] { linear.forward(zeros({2, 4}, {DType::Int64})); }, {"Linear: input must be float32", "int64"});
  check_error([&] { nn::Linear(-1, 3, gen); }, {"Linear", "non-negative"});
}

// ---- Embedding ----

TEST_CASE("Embedding: lookup, padding row, gradcheck") {
  Generator gen(5);
  nn::Embedding embedding(6, 3, gen, /*padding_idx=*/2);
  CHECK(embedding.weight.shape() == Shape{6, 3});
  CHECK(select(embedding.weight, 0, 2).to_vector<float>() == std::vector<float>{0, 0, 0});
  float64(embedding);
  const Tensor indices = from_vector<int64_t>({0, 2, 5, 0, 1, 2}, {2, 3});
  const Tensor out = embedding.forward(indices);
  CHECK(out.shape() == Shape{2, 3, 3});
  check_close(select(select(out, 0, 1), 0, 0), select(embedding.weight, 0, 0), 0, 0);  // indices[1][0] = 0
  sum(out * out).backward();
  CHECK(select(embedding.weight.grad(), 0, 2).to_vector<double>() == std::vector<double>{0, 0, 0});
  CHECK(select(embedding.weight.grad(), 0, 3).to_vector<double>() == std::vector<double>{0, 0, 0});
  embedding.zero_grad();
  // The padding row gets no gradient by design, so the gradcheck looks up the other rows (repeated).
  const Tensor others = from_vector<int64_t>({0, 3, 5, 0, 1, 4}, {3, 2});
  check_module_gradients(embedding, [&](const std::vector<Tensor>&) { return embedding.forward(others); }, {});
  CHECK(embedding.forward(from_vector<int32_t>({4}, {1})).shape() == Shape{1, 3});
}

TEST_CASE("Embedding: bad input") {
  Generator gen(0);
  nn::Embedding embedding(4, 2, gen);
  check_error([&] { embedding.forward(zeros({3})); }, {"Embedding: indices must be int32 or int64, got float32"});
  check_error([&] { embedding.forward(Tensor()); }, {"Embedding: indices is an undefined tensor"});
  check_error([&] { embedding.forward(from_vector<int64_t>({1, 4}, {2})); }, {"embedding", "index 4", "out of range"});
  check_error([&] { nn::Embedding(4, 2, gen, 4); }, {"Embedding", "padding_idx must be -1 (none) or in [0, 4), got 4"});
}

// ---- LayerNorm ----

TEST_CASE("LayerNorm: normalises the last dim; gradcheck; bad input") {
  nn::LayerNorm norm(4, 1e-5);
  float64(norm);
  const Tensor x = uniform({2, 3, 4}, 6, -3, 3);
  const Tensor y = norm.forward(x);
  check_close(mean(y, {-1}), zeros({2, 3}, {DType::Float64}), 1e-12, 0);
  check_close(y, layer_norm(x, Tensor(), Tensor(), 1e-5), 0, 0);
  {
    NoGradGuard no_grad;
    copy_(norm.weight, uniform({4}, 7));
    copy_(norm.bias, uniform({4}, 8));
  }
  check_module_gradients(norm, [&](const std::vector<Tensor>& in) { return norm.forward(in[0]); }, {x});
  check_error([&] { norm.forward(zeros({2, 3}, {DType::Float64})); }, {"LayerNorm: input must have a last dim of 4"});
  check_error([&] { norm.forward(zeros({2, 4})); }, {"LayerNorm: input must be float64", "got float32"});
  check_error([&] { nn::LayerNorm(0); }, {"LayerNorm", "dim must be positive"});
}

// ---- Dropout ----

TEST_CASE("Dropout: follows the module's mode; the mask comes from the generator") {
  nn::Dropout drop(0.5);
  const Tensor x = ones({1000}, {DType::Float64});
  Generator g1(9), g2(9);
  const Tensor a = drop.forward(x, g1);
  check_close(a, dropout(x, 0.5, g2, Mode::Train), 0, 0);  // the op, with the same generator state
  CHECK(g1.offset() == 125);  // a Philox block per eight elements
  const double kept = sum(a).item<double>() / 2;  // kept elements are 2, dropped 0
  CHECK(kept > 400);
  CHECK(kept < 600);
  drop.eval();
  CHECK(drop.forward(x, g1).impl_ptr() == x.impl_ptr());
  CHECK(g1.offset() == 125);  // eval draws nothing

  drop.train();
  nn::Dropout dropout_module(0.3);
  check_module_gradients(dropout_module, [&](const std::vector<Tensor>& in) {
    Generator gen(11);  // a fresh generator per call: the same mask every time
    return dropout_module.forward(in[0], gen);
  }, {uniform({3, 4}, 10)});
  check_error([&] { nn::Dropout(1.0); }, {"Dropout", "[0, 1), got 1"});
  check_error([&] { drop.forward(arange(3), g1); }, {"Dropout: input must be a floating tensor, got int64"});
}

// ---- SinusoidalPositionalEncoding ----

TEST_CASE("SinusoidalPositionalEncoding: Vaswani's table, added to x") {
  const Tensor table = nn::SinusoidalPositionalEncoding::table(7, 5, {DType::Float64});
  const std::vector<double> t = table.to_vector<double>();
  for (int64_t n = 0; n < 7; ++n)
    for (int64_t c = 0; c < 5; ++c) {
      const double angle = n / std::pow(10000.0, (c - c % 2) / 5.0);
      CHECK(t[n * 5 + c] == doctest::Approx(c % 2 == 0 ? std::sin(angle) : std::cos(angle)).epsilon(1e-14));
    }
  nn::SinusoidalPositionalEncoding pe(5);
  const Tensor x = uniform({2, 3, 5}, 12);
  check_close(pe.forward(x), x + slice(table, 0, 0, 3), 0, 0);
  const Tensor longer = uniform({7, 5}, 13);  // 2-d input, longer than before: the cache grows
  check_close(pe.forward(longer), longer + table, 0, 0);
  const Tensor x32 = to(x, DType::Float32);
  check_close(pe.forward(x32), x32 + to(slice(table, 0, 0, 3), DType::Float32), 0, 0);
  CHECK(pe.parameter_count() == 0);
  check_error([&] { pe.forward(zeros({3, 4})); }, {"SinusoidalPositionalEncoding: input must be (..., N, 5), got shape (3, 4)"});
  check_error([&] { pe.forward(zeros({5})); }, {"SinusoidalPositionalEncoding: input must be (..., N, 5)"});
  check_error([&] { pe.forward(arange(5)); }, {"SinusoidalPositionalEncoding: input must be a floating tensor"});
}

// ---- FeedForward ----

TEST_CASE("FeedForward: gradcheck with ReLU and GELU, dropout in training mode") {
  for (nn::Activation activation : {nn::Activation::ReLU, nn::Activation::GELU}) {
    Generator gen(14);
    nn::FeedForward ff({4, 6, activation, 0.25}, gen);
    float64(ff);
    check_module_gradients(ff, [&](const std::vector<Tensor>& in) {
      Generator drop(15);
      return ff.forward(in[0], drop);
    }, {uniform({2, 3, 4}, 16)});
  }
}

TEST_CASE("FeedForward: eval mode is linear2(act(linear1(x))); bad input") {
  Generator gen(17);
  nn::FeedForward ff({4, 6, nn::Activation::GELU, 0.5}, gen);
  ff.eval();
  const Tensor x = to(uniform({3, 4}, 18), DType::Float32);
  Generator unused(0);
  check_close(ff.forward(x, unused), ff.linear2->forward(gelu(ff.linear1->forward(x))), 0, 0);
  check_error([&] { ff.forward(zeros({3, 5}), unused); }, {"FeedForward: input must have a last dim of 4"});
  check_error([&] { nn::FeedForward({4, 0}, gen); }, {"FeedForward", "must be positive"});
}

// ---- MultiheadAttention ----

namespace {

nn::MultiheadAttentionOptions mha_options(int64_t d_model, int64_t heads, const std::string& config = "full") {
  nn::MultiheadAttentionOptions o;
  o.d_model = d_model;
  o.heads = heads;
  o.attention = AttentionConfig::parse(config);
  return o;
}

// The same layer computed head by head: each head's slice of the projections through full_attention,
// the heads concatenated, then the output projection.
Tensor heads_one_by_one(nn::MultiheadAttention& mha, const Tensor& query, const Tensor& memory,
                        const Padding& padding, Causal causal) {
  const int64_t D = mha.options().d_model, H = mha.options().heads, E = D / H;
  const Tensor q = mha.q_proj->forward(query), k = mha.k_proj->forward(memory), v = mha.v_proj->forward(memory);
  std::vector<Tensor> outs;
  for (int64_t h = 0; h < H; ++h) {
    auto head = [&](const Tensor& x) { return unsqueeze(slice(x, 2, h * E, (h + 1) * E), 1); };
    outs.push_back(select(attention::full_attention(head(q), head(k), head(v), padding, causal), 1, 0));
  }
  return mha.out_proj->forward(concat(outs, 2));
}

}  // namespace

TEST_CASE("MultiheadAttention: equals the heads computed one by one (self, causal, cross)") {
  Generator gen(20);
  nn::MultiheadAttention mha(mha_options(6, 3), gen);
  float64(mha);
  const Tensor x = uniform({2, 4, 6}, 21), memory = uniform({2, 5, 6}, 22);
  Generator unused(0);
  // Sample 1 has 2 real positions; the outputs at its padded queries are not compared.
  const Padding self{lengths({4, 2}), lengths({4, 2})};
  const Tensor out = mha.forward(x, x, x, self, Causal::No, unused), ref = heads_one_by_one(mha, x, x, self, Causal::No);
  check_close(select(out, 0, 0), select(ref, 0, 0), 1e-12, 1e-10);
  check_close(slice(select(out, 0, 1), 0, 0, 2), slice(select(ref, 0, 1), 0, 0, 2), 1e-12, 1e-10);
  check_close(mha.forward(x, x, x, {}, Causal::Yes, unused), heads_one_by_one(mha, x, x, {}, Causal::Yes), 1e-12, 1e-10);
  const Padding cross{Tensor(), lengths({3, 5})};
  check_close(mha.forward(x, memory, memory, cross, Causal::No, unused),
              heads_one_by_one(mha, x, memory, cross, Causal::No), 1e-12, 1e-10);
  CHECK(unused.offset() == 0);  // full attention draws nothing
}

TEST_CASE("MultiheadAttention: gradcheck, full attention (padding, causal, cross)") {
  Generator gen(23);
  nn::MultiheadAttention mha(mha_options(4, 2), gen);
  float64(mha);
  Generator unused(0);
  const Tensor lens = lengths({3, 2});
  check_module_gradients(mha, [&](const std::vector<Tensor>& in) {
    return mha.forward(in[0], in[0], in[0], {lens, lens}, Causal::No, unused);
  }, {uniform({2, 3, 4}, 24)});
  check_module_gradients(mha, [&](const std::vector<Tensor>& in) {
    return mha.forward(in[0], in[0], in[0], {}, Causal::Yes, unused);
  }, {uniform({1, 3, 4}, 25)});
  check_module_gradients(mha, [&](const std::vector<Tensor>& in) {
    return mha.forward(in[0], in[1], in[1], {Tensor(), lengths({4, 1})}, Causal::No, unused);
  }, {uniform({2, 2, 4}, 26), uniform({2, 4, 4}, 27)});
}

TEST_CASE("MultiheadAttention: gradcheck, clustered and improved-clustered (fixed seed per call)") {
  for (const char* config : {"clustered:clusters=2,bits=8,iterations=3", "improved-clustered:clusters=2,bits=8,topk=2"}) {
    INFO(std::string(config));
    Generator gen(28);
    nn::MultiheadAttention mha(mha_options(4, 2, config), gen);
    float64(mha);
    const Tensor lens = lengths({5, 3});
    check_module_gradients(mha, [&](const std::vector<Tensor>& in) {
      Generator hashing(29);  // the same hash planes on every call
      return mha.forward(in[0], in[0], in[0], {lens, lens}, Causal::No, hashing);
    }, {uniform({2, 5, 4}, 30, -2, 2)});
  }
}

TEST_CASE("MultiheadAttention: set_attention keeps the weights; improved-clustered with topk = S is full") {
  Generator gen(31);
  nn::MultiheadAttention mha(mha_options(8, 2), gen);
  float64(mha);
  const Tensor x = uniform({2, 6, 8}, 32);
  const Padding padding{lengths({6, 4}), lengths({6, 4})};
  Generator g(33);
  const Tensor full = mha.forward(x, x, x, padding, Causal::No, g);
  mha.set_attention("improved-clustered:clusters=3,topk=6");
  CHECK(mha.attention().name() == "improved-clustered");
  const Tensor improved = mha.forward(x, x, x, padding, Causal::No, g);
  CHECK(g.offset() > 0);  // the hashing drew from the generator
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t real = b == 0 ? 6 : 4;
    check_close(slice(select(improved, 0, b), 0, 0, real), slice(select(full, 0, b), 0, 0, real), 1e-12, 1e-10);
  }
  mha.set_attention(AttentionConfig{});
  check_close(mha.forward(x, x, x, padding, Causal::No, g), full, 0, 0);
}

TEST_CASE("MultiheadAttention: padded positions (even NaN) change no real output") {
  for (const char* config : {"full", "clustered:clusters=2", "improved-clustered:clusters=2,topk=3"}) {
    INFO(std::string(config));
    Generator gen(34);
    nn::MultiheadAttention mha(mha_options(4, 2, config), gen);
    float64(mha);
    const Tensor x = uniform({2, 5, 4}, 35), memory = uniform({2, 6, 4}, 36);
    const Tensor x_lens = lengths({5, 3}), m_lens = lengths({4, 6});
    // Everything at padded positions replaced by NaN.
    auto poison = [](const Tensor& t, const Tensor& lens) {
      const Tensor pos = reshape(arange(t.size(1)), {1, t.size(1), 1});
      return masked_fill(t, ge(pos, reshape(lens, {t.size(0), 1, 1})), NAN);
    };
    auto run = [&](const Tensor& q, const Tensor& m, const Padding& p) {
      Generator hashing(37);
      return mha.forward(q, m, m, p, Causal::No, hashing);
    };
    const Padding self{x_lens, x_lens}, cross{x_lens, m_lens};
    const Tensor a = run(x, x, self), b = run(poison(x, x_lens), poison(x, x_lens), self);
    const Tensor c = run(x, memory, cross), d = run(poison(x, x_lens), poison(memory, m_lens), cross);
    for (const auto& [clean, dirty] : {std::pair{a, b}, std::pair{c, d}}) {
      check_close(slice(select(dirty, 0, 0), 0, 0, 5), slice(select(clean, 0, 0), 0, 0, 5), 0, 0);
      check_close(slice(select(dirty, 0, 1), 0, 0, 3), slice(select(clean, 0, 1), 0, 0, 3), 0, 0);
      CHECK(std::isfinite(sum(dirty).item<double>()));  // padded outputs are finite too
    }
  }
}

TEST_CASE("MultiheadAttention: bad input and unsupported attention") {
  Generator gen(0);
  check_error([&] { nn::MultiheadAttention(mha_options(6, 4), gen); },
              {"MultiheadAttention", "heads must be positive and divide d_model, got d_model = 6, heads = 4"});
  check_error([&] { nn::MultiheadAttention(mha_options(6, 3, "neural-clustering:clusters=4"), gen); },
              {"MultiheadAttention", "neural-clustering attention is handled by the ClusterFormer layers"});
  nn::MultiheadAttention mha(mha_options(6, 3), gen);
  check_error([&] { mha.set_attention("neural-clustering"); }, {"MultiheadAttention", "ClusterFormer"});
  check_error([&] { mha.set_attention("sparse:clusters=3"); },
              {"MultiheadAttention: attention config 'sparse:clusters=3'", "unknown attention type 'sparse'"});
  check_error([&] { mha.set_attention("clustered:topk=3"); }, {"MultiheadAttention", "'topk' is not a setting of clustered"});
  CHECK(mha.attention().name() == "full");  // unchanged by the failed calls

  const Tensor x = zeros({2, 4, 6}), m = zeros({2, 5, 6});
  Generator g(1);
  check_error([&] { mha.forward(zeros({4, 6}), x, x, {}, Causal::No, g); },
              {"MultiheadAttention: query must be (B, L, 6), got shape (4, 6)"});
  check_error([&] { mha.forward(x, zeros({2, 4, 5}), x, {}, Causal::No, g); },
              {"MultiheadAttention: key must be (B, L, 6), got shape (2, 4, 5)"});
  check_error([&] { mha.forward(x, m, zeros({2, 4, 6}), {}, Causal::No, g); }, {"MultiheadAttention", "do not fit"});
  check_error([&] { mha.forward(x, zeros({3, 5, 6}), zeros({3, 5, 6}), {}, Causal::No, g); },
              {"MultiheadAttention", "do not fit"});
  check_error([&] { mha.forward(to(x, DType::Float64), x, x, {}, Causal::No, g); },
              {"MultiheadAttention: query must be float32", "float64"});
  check_error([&] { mha.forward(x, m, m, {}, Causal::Yes, g); },
              {"MultiheadAttention: causal attention needs as many queries as keys, got N = 4, S = 5"});
  check_error([&] { mha.forward(x, x, x, {lengths({4, 5}), Tensor()}, Causal::No, g); },
              {"MultiheadAttention", "a length of 5 is outside [0, 4]"});
  check_error([&] { mha.forward(x, x, x, {from_vector<float>({4, 4}, {2}), Tensor()}, Causal::No, g); },
              {"MultiheadAttention", "lengths must be int64 or int32 of shape (2,)", "float32"});
  mha.set_attention("clustered:clusters=2");
  check_error([&] { mha.forward(x, x, x, {}, Causal::Yes, g); },
              {"MultiheadAttention", "clustered attention has no causal form"});
}

// ---- CrossEntropyLoss ----

TEST_CASE("CrossEntropyLoss: wraps the op with its settings; bad input") {
  const Tensor logits = uniform({2, 3, 5}, 40, -2, 2);
  const Tensor targets = from_vector<int64_t>({0, 4, -100, 2, 2, 1}, {2, 3});
  nn::CrossEntropyLoss plain;
  check_close(plain.forward(logits, targets), cross_entropy(logits, targets), 0, 0);
  nn::CrossEntropyLoss smooth({-100, 0.1});
  check_close(smooth.forward(logits, targets), cross_entropy(logits, targets, -100, 0.1), 0, 0);
  nn::CrossEntropyLoss ignore_two({2, 0.0});
  const Tensor no_ignored = from_vector<int64_t>({0, 4, 3, 2, 2, 1}, {2, 3});
  check_close(ignore_two.forward(logits, no_ignored), cross_entropy(logits, no_ignored, 2), 0, 0);
  check_gradients([&](const std::vector<Tensor>& in) { return smooth.forward(in[0], targets); }, {logits});

  check_error([&] { nn::CrossEntropyLoss({-100, 1.0}); }, {"CrossEntropyLoss", "label_smoothing must lie in [0, 1)"});
  check_error([&] { plain.forward(logits, to(targets, DType::Float64)); },
              {"CrossEntropyLoss: targets must be int64 or int32 class indices, got float64"});
  check_error([&] { plain.forward(logits, from_vector<int64_t>({0, 1}, {2})); },
              {"CrossEntropyLoss: targets must have the shape of logits without its last dim, (2, 3), got (2,)"});
  check_error([&] { plain.forward(arange(3), from_vector<int64_t>({0}, {1})); },
              {"CrossEntropyLoss: logits must be a floating tensor (..., C), got int64"});
}
