// The ClusterFormer encoder and decoder: gradchecks, centroids handed from layer to layer, eq. 17,
// causality, padding, bad options.
#include <cmath>

#include "nn/clusterformer.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using attention::AttentionConfig;
using attention::Causal;

namespace {

nn::TransformerLayerOptions options(nn::NormPosition norm, int64_t clusters = 2) {
  nn::TransformerLayerOptions o;
  o.d_model = 4;
  o.heads = 2;
  o.d_ff = 6;
  o.dropout = 0.0;
  o.norm = norm;
  o.attention = AttentionConfig::parse("neural-clustering:clusters=" + std::to_string(clusters));
  return o;
}

Tensor scalar_objective(const nn::ClusterFormerOutput& out, const Tensor& w) {
  return sum(out.output * w) + out.clustering_loss * 0.3 + out.sorting_loss * 0.7;
}

}  // namespace

TEST_CASE("ClusterFormerEncoder: gradcheck of output and losses in x and every parameter") {
  for (nn::NormPosition norm : {nn::NormPosition::Post, nn::NormPosition::Pre}) {
    for (Causal causal : {Causal::No, Causal::Yes}) {
      Generator gen(3);
      nn::ClusterFormerEncoder encoder(options(norm), 2, gen);
      encoder.to(DType::Float64);
      const Tensor x = uniform({2, 5, 4}, 1), w = uniform({2, 5, 4}, 2);
      const Tensor lens = from_vector<int64_t>({5, 3}, {2});
      const GradcheckResult result = nn::gradcheck(
          encoder,
          [&](const std::vector<Tensor>& in) {
            Generator g(0);
            return scalar_objective(encoder.forward(in[0], lens, g, causal), w);
          },
          {x});
      INFO(result.report);
      CHECK(result.ok);
    }
  }
}

TEST_CASE("ClusterFormerEncoder hands each layer's updated centroids to the next and sums the losses") {
  Generator gen(4);
  nn::ClusterFormerEncoder encoder(options(nn::NormPosition::Post, 3), 2, gen);
  encoder.to(DType::Float64);
  const Tensor x = uniform({2, 7, 4}, 5);
  Generator g1(0), g2(0);
  const nn::ClusterFormerOutput stack = encoder.forward(x, Tensor(), g1);
  const nn::ClusterFormerOutput first = (*encoder.layers)[0]->forward(x, encoder.centroids, Tensor(), Causal::No, g2);
  const nn::ClusterFormerOutput second =
      (*encoder.layers)[1]->forward(first.output, first.centroids, Tensor(), Causal::No, g2);
  check_close(stack.output, second.output, 0, 0);
  check_close(stack.centroids, second.centroids, 0, 0);
  CHECK(stack.centroids.shape() == Shape{2, 3, 4});
  CHECK(stack.clustering_loss.item<double>() ==
        doctest::Approx(first.clustering_loss.item<double>() + second.clustering_loss.item<double>()).epsilon(1e-14));
  CHECK(stack.sorting_loss.item<double>() ==
        doctest::Approx(first.sorting_loss.item<double>() + second.sorting_loss.item<double>()).epsilon(1e-14));
  // eq. 17
  const Tensor task = scalar(2.0, {DType::Float64});
  const Tensor total = nn::ClusterFormerLoss({0.5, 0.25, 2.0}).forward(task, stack);
  CHECK(total.item<double>() == doctest::Approx(0.5 * stack.clustering_loss.item<double>() +
                                                0.25 * stack.sorting_loss.item<double>() + 4.0));
  check_error([&] { nn::ClusterFormerLoss({-1.0, 0.0, 1.0}); }, {"ClusterFormerLoss", "non-negative"});
}

TEST_CASE("ClusterFormerEncoder: causal output t has zero gradient from later inputs; padding changes nothing real") {
  Generator gen(6);
  nn::ClusterFormerEncoder encoder(options(nn::NormPosition::Pre, 3), 2, gen);
  encoder.to(DType::Float64);
  const int64_t N = 6;
  for (int64_t t = 0; t < N; ++t) {
    Tensor x = uniform({1, N, 4}, 7);
    x.set_requires_grad(true);
    Generator g(0);
    sum(select(encoder.forward(x, Tensor(), g, Causal::Yes).output, 1, t)).backward();
    for (int64_t later = t + 1; later < N; ++later)
      for (double v : select(select(x.grad(), 0, 0), 0, later).to_vector<double>()) CHECK(v == 0.0);
  }
  const Tensor lens = from_vector<int64_t>({6, 4}, {2});
  const Tensor x = uniform({2, N, 4}, 8);
  const Tensor real = to(reshape(attention::valid_positions(lens, 2, N, Device::cpu(), "test"), {2, N, 1}), DType::Float64);
  const Tensor x2 = x * real + uniform({2, N, 4}, 9, 50, 60) * (1.0 - real);
  for (Causal causal : {Causal::No, Causal::Yes}) {
    Generator g1(0), g2(0);
    const nn::ClusterFormerOutput a = encoder.forward(x, lens, g1, causal), b = encoder.forward(x2, lens, g2, causal);
    check_close(a.output * real, b.output * real, 0, 0);
    check_close(a.centroids, b.centroids, 0, 0);
    check_close(a.clustering_loss, b.clustering_loss, 0, 0);
    check_close(a.sorting_loss, b.sorting_loss, 0, 0);
  }
}

TEST_CASE("ClusterFormer layers refuse other attentions and bad input") {
  Generator gen(0);
  nn::TransformerLayerOptions full = options(nn::NormPosition::Post);
  full.attention = AttentionConfig::parse("full");
  check_error([&] { nn::ClusterFormerEncoder(full, 2, gen); }, {"ClusterFormerEncoder", "neural-clustering", "'full'"});
  check_error([&] { nn::ClusterFormerEncoder(options(nn::NormPosition::Post), 0, gen); }, {"ClusterFormerEncoder", "layer"});
  // λ weights the task loss, which the encoder never sees: refused rather than ignored.
  check_error([&] { nn::ClusterFormerEncoder(options(nn::NormPosition::Post), 1, gen, {1e-3, 1e-3, 0.5}); },
              {"ClusterFormerEncoder", "λ weights the task loss", "0.5"});
  check_error([&] { nn::ClusterFormerEncoder(options(nn::NormPosition::Post), 1, gen, {-1.0, 1e-3, 1.0}); },
              {"ClusterFormerEncoder", "µ, ν must be finite and non-negative"});
  nn::TransformerLayerOptions odd = options(nn::NormPosition::Post);
  odd.heads = 3;
  check_error([&] { nn::ClusterFormerEncoderLayer(odd, gen); }, {"ClusterFormerEncoderLayer", "heads"});
  nn::ClusterFormerEncoder encoder(options(nn::NormPosition::Post), 1, gen);
  Generator g(0);
  check_error([&] { encoder.forward(zeros({2, 5, 3}), Tensor(), g); }, {"ClusterFormerEncoderLayer", "(B, N, 4)"});
  check_error([&] { encoder.forward(zeros({2, 5, 4}, {DType::Float64}), Tensor(), g); }, {"ClusterFormerEncoderLayer"});
}

TEST_CASE("ClusterFormerDecoder: gradcheck in x, memory and every parameter; causal; layers chained") {
  for (nn::NormPosition norm : {nn::NormPosition::Post, nn::NormPosition::Pre}) {
    Generator gen(7);
    nn::ClusterFormerDecoder decoder(options(norm), 2, gen);
    decoder.to(DType::Float64);
    const Tensor x = uniform({2, 5, 4}, 1), memory = uniform({2, 3, 4}, 3), w = uniform({2, 5, 4}, 2);
    const Tensor lens = from_vector<int64_t>({5, 3}, {2}), memory_lens = from_vector<int64_t>({3, 2}, {2});
    const GradcheckResult result = nn::gradcheck(
        decoder,
        [&](const std::vector<Tensor>& in) {
          Generator g(0);
          return scalar_objective(decoder.forward(in[0], in[1], lens, memory_lens, g), w);
        },
        {x, memory});
    INFO(result.report);
    CHECK(result.ok);
  }
  Generator gen(8);
  nn::ClusterFormerDecoder decoder(options(nn::NormPosition::Pre, 3), 2, gen);
  decoder.to(DType::Float64);
  const int64_t N = 6;
  const Tensor memory = uniform({1, 4, 4}, 9);
  // Appendix B's mask: output t takes no gradient from the words after t.
  for (int64_t t = 0; t < N; ++t) {
    Tensor x = uniform({1, N, 4}, 10);
    x.set_requires_grad(true);
    Generator g(0);
    sum(select(decoder.forward(x, memory, Tensor(), Tensor(), g).output, 1, t)).backward();
    for (int64_t later = t + 1; later < N; ++later)
      for (double v : select(select(x.grad(), 0, 0), 0, later).to_vector<double>()) CHECK(v == 0.0);
  }
  // The stack is its layers in turn, Ĉ handed on, the losses summed.
  const Tensor x = uniform({1, N, 4}, 11);
  Generator g1(0), g2(0);
  const nn::ClusterFormerOutput stack = decoder.forward(x, memory, Tensor(), Tensor(), g1);
  const nn::ClusterFormerOutput first =
      (*decoder.layers)[0]->forward(x, decoder.centroids, memory, Tensor(), Tensor(), g2);
  const nn::ClusterFormerOutput second =
      (*decoder.layers)[1]->forward(first.output, first.centroids, memory, Tensor(), Tensor(), g2);
  check_close(stack.output, decoder.norm->forward(second.output), 0, 0);
  CHECK(stack.clustering_loss.item<double>() ==
        doctest::Approx(first.clustering_loss.item<double>() + second.clustering_loss.item<double>()).epsilon(1e-14));

  nn::TransformerLayerOptions full = options(nn::NormPosition::Post);
  full.attention = AttentionConfig::parse("full");
  check_error([&] { nn::ClusterFormerDecoder(full, 1, gen); }, {"ClusterFormerDecoder", "neural-clustering", "'full'"});
  nn::TransformerLayerOptions cross = options(nn::NormPosition::Post);
  cross.cross_attention = AttentionConfig::parse("neural-clustering:clusters=2");
  check_error([&] { nn::ClusterFormerDecoderLayer(cross, gen); }, {"ClusterFormerDecoderLayer"});
  Generator g(0);
  check_error([&] { decoder.forward(x, uniform({2, 4, 4}, 12), Tensor(), Tensor(), g); },
              {"ClusterFormerDecoderLayer", "different batch sizes"});
}
