// Sliding-window (local) attention: loops, W ≥ N − 1 is full attention, gradcheck, causality,
// padding, the attention config and bad input.
#include "tests/testing.h"

#include <cmath>

#include "nn/attention/config.h"
#include "nn/attention/full.h"
#include "nn/attention/local.h"
#include "nn/multihead_attention.h"
#include "tests/attention_checks.h"

using namespace tapestry;
using namespace tapestry::attention;
using namespace tapestry::testing;

namespace {

// Local attention by loops over one (batch, head): query i takes the softmax of q_i · k_j / √E over
// the real keys j with |i − j| ≤ W (and j ≤ i when causal); zeros when it sees none.
std::vector<double> naive_local(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                                int64_t N, int64_t E, int64_t M, int64_t length, bool causal, int64_t W) {
  std::vector<double> out(size_t(N * M), 0.0);
  for (int64_t i = 0; i < N; ++i) {
    std::vector<std::pair<int64_t, double>> seen;
    for (int64_t j = std::max<int64_t>(0, i - W); j <= std::min(N - 1, causal ? i : i + W); ++j) {
      if (j >= length) continue;
      double score = 0;
      for (int64_t e = 0; e < E; ++e) score += q[size_t(i * E + e)] * k[size_t(j * E + e)] / std::sqrt(double(E));
      seen.emplace_back(j, score);
    }
    double total = 0;
    for (const auto& [j, score] : seen) total += std::exp(score);
    for (const auto& [j, score] : seen)
      for (int64_t m = 0; m < M; ++m) out[size_t(i * M + m)] += std::exp(score) / total * v[size_t(j * M + m)];
  }
  return out;
}

std::vector<double> block(const Tensor& t, int64_t b, int64_t h) { return select(select(t, 0, b), 0, h).to_vector<double>(); }

const Tensor kLengths = from_vector<int64_t>({9, 5}, {2});

}  // namespace

TEST_CASE("local attention equals loops (windows 0 to beyond N, key padding, causal)") {
  const int64_t B = 2, H = 2, N = 9, E = 3, M = 2;
  const Tensor q = uniform({B, H, N, E}, 1, -2, 2), k = uniform({B, H, N, E}, 2, -2, 2), v = uniform({B, H, N, M}, 3);
  for (Causal causal : {Causal::No, Causal::Yes})
    for (int64_t W : {0, 1, 3, 8, 20}) {
      INFO("causal " << (causal == Causal::Yes) << " window " << W);
      const Tensor out = local_attention(q, k, v, W, {Tensor(), kLengths}, causal);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
          const std::vector<double> want = naive_local(block(q, b, h), block(k, b, h), block(v, b, h), N, E, M,
                                                       b == 0 ? 9 : 5, causal == Causal::Yes, W);
          check_close(from_vector(block(out, b, h), {N, M}), from_vector(want, {N, M}), 1e-12, 1e-12);
        }
    }
}

TEST_CASE("local attention with W ≥ N − 1 is full attention (values and gradients; padding, causal)") {
  const Tensor q = uniform({2, 2, 6, 3}, 7), k = uniform({2, 2, 6, 3}, 8), v = uniform({2, 2, 6, 4}, 9);
  for (Causal causal : {Causal::No, Causal::Yes})
    for (const Tensor& lengths : {Tensor(), from_vector<int64_t>({6, 4}, {2})}) {
      const Padding padding{Tensor(), lengths};
      for (int64_t W : {5, 1000}) {
        INFO("causal " << (causal == Causal::Yes) << " window " << W);
        check_same_function([&](const std::vector<Tensor>& in) { return local_attention(in[0], in[1], in[2], W, padding, causal); },
                            [&](const std::vector<Tensor>& in) { return full_attention(in[0], in[1], in[2], padding, causal); },
                            {q, k, v});
      }
    }
  // and a narrower window is not: the check can fail
  CHECK(max(abs(local_attention(q, k, v, 1) - full_attention(q, k, v))).item<double>() > 1e-3);
}

TEST_CASE("local attention gradcheck (padding, causal)") {
  const Tensor q = uniform({2, 2, 6, 3}, 10), k = uniform({2, 2, 6, 3}, 11), v = uniform({2, 2, 6, 2}, 12);
  for (Causal causal : {Causal::No, Causal::Yes})
    for (int64_t W : {0, 1, 2}) {
      INFO("causal " << (causal == Causal::Yes) << " window " << W);
      check_gradients([&](const std::vector<Tensor>& in) {
        return local_attention(in[0], in[1], in[2], W, {Tensor(), from_vector<int64_t>({6, 3}, {2})}, causal);
      }, {q, k, v});
    }
}

TEST_CASE("local attention causal: no output depends on a later position") {
  check_causal([](const Tensor& q, const Tensor& k, const Tensor& v) { return local_attention(q, k, v, 3, {}, Causal::Yes); },
               10, 3);
}

TEST_CASE("local attention: values at padded positions change no real output") {
  const int64_t B = 2, H = 2, N = 10, E = 4;
  const Tensor lengths = from_vector<int64_t>({10, 6}, {B});
  const Tensor real = to(reshape(valid_positions(lengths, B, N, Device::cpu(), "test"), {B, 1, N, 1}), DType::Float64);
  const Tensor q = uniform({B, H, N, E}, 130), k = uniform({B, H, N, E}, 131), v = uniform({B, H, N, E}, 132);
  auto disturb = [&](const Tensor& t, uint64_t seed) { return t * real + uniform(t.shape(), seed, 5, 9) * (1.0 - real); };
  for (Causal causal : {Causal::No, Causal::Yes}) {
    INFO("causal " << (causal == Causal::Yes));
    check_close(local_attention(q, k, v, 2, {lengths, lengths}, causal) * real,
                local_attention(disturb(q, 133), disturb(k, 134), disturb(v, 135), 2, {lengths, lengths}, causal) * real,
                1e-12, 1e-12);
  }
}

TEST_CASE("local attention config: window parses, prints, defaults, and runs through attend and MultiheadAttention") {
  CHECK(AttentionConfig::parse("local").to_string() == "local:window=32");
  const AttentionConfig c = AttentionConfig::parse("local:window=2");
  CHECK(c.get("window") == 2);
  CHECK(AttentionConfig::parse(c.to_string()) == c);
  CHECK(c.kind().has_causal_form());
  const Tensor q = uniform({1, 2, 7, 3}, 20), k = uniform({1, 2, 7, 3}, 21), v = uniform({1, 2, 7, 3}, 22);
  Generator gen(0);
  check_close(attend(c, q, k, v, {}, Causal::Yes, gen), local_attention(q, k, v, 2, {}, Causal::Yes), 0.0, 0.0);
  nn::MultiheadAttentionOptions options;
  options.d_model = 6;
  options.heads = 2;
  options.attention = c;
  Generator init(1);
  nn::MultiheadAttention mha(options, init);
  const Tensor x = to(uniform({2, 7, 6}, 23), DType::Float32);
  CHECK(mha.forward(x, x, x, {}, Causal::Yes, gen).shape() == Shape{2, 7, 6});
}

TEST_CASE("local attention refuses bad settings and inputs") {
  check_error([] { AttentionConfig::parse("local:window=-1"); }, {"window must be a non-negative integer"});
  check_error([] { AttentionConfig::parse("local:window=1048577"); }, {"window must be in [0, 1048576]"});
  check_error([] { AttentionConfig::parse("local:clusters=3"); }, {"'clusters' is not a setting of local", "window"});
  const Tensor q = uniform({1, 1, 4, 3}, 30), k = uniform({1, 1, 5, 3}, 31), v = uniform({1, 1, 5, 3}, 32);
  check_error([&] { local_attention(q, k, v, 1); }, {"local_attention", "needs as many queries as keys", "N = 4, S = 5"});
  check_error([&] { local_attention(q, q, q, -1); }, {"local_attention", "window must be non-negative"});
  check_error([&] { local_attention(q, q, q, 1, {Tensor(), from_vector<int64_t>({9}, {1})}); }, {"local_attention", "outside [0, 4]"});
  check_error([&] { local_attention(q, q, zeros({1, 1, 3, 3}, {DType::Float64}), 1); }, {"local_attention", "do not fit"});
}
