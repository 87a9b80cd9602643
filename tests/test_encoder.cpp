// The encoder factory (nn/encoder.h): the attention config picks the encoder, and the ClusterFormer's
// auxiliary loss is µ·L1 + ν·L2 of ClusterFormer eq. 17.
#include <memory>

#include "nn/clusterformer.h"
#include "nn/encoder.h"
#include "nn/transformer.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using attention::AttentionConfig;

namespace {

nn::TransformerLayerOptions layer(const std::string& attention) {
  nn::TransformerLayerOptions o;
  o.d_model = 8;
  o.heads = 2;
  o.d_ff = 16;
  o.dropout = 0;
  o.attention = AttentionConfig::parse(attention);
  return o;
}

}  // namespace

TEST_CASE("encoder factory: the attention config picks the encoder") {
  for (const char* config : {"full", "clustered:clusters=2", "improved-clustered:clusters=2,topk=3"}) {
    CAPTURE(config);
    Generator gen(0);
    const auto encoder = nn::make_encoder(layer(config), 2, gen);
    CHECK(std::dynamic_pointer_cast<nn::TransformerEncoder>(encoder) != nullptr);
  }
  Generator gen(0);
  const auto encoder = nn::make_encoder(layer("neural-clustering:clusters=2"), 2, gen);
  CHECK(std::dynamic_pointer_cast<nn::ClusterFormerEncoder>(encoder) != nullptr);
  check_error([] {
    Generator g(0);
    nn::make_encoder(layer("full"), 0, g);
  }, {"TransformerEncoder", "at least one layer"});
}

TEST_CASE("encoder factory: a Transformer's output is its forward and it adds no loss") {
  Generator a(1), b(1);
  const auto encoder = nn::make_encoder(layer("full"), 2, a);
  nn::TransformerEncoder reference(layer("full"), 2, b);
  const Tensor x = to(uniform({2, 5, 8}, 2), DType::Float32);
  Generator g(3), h(3);
  const nn::EncoderOutput out = encoder->encode(x, Tensor(), g);
  check_close(out.output, reference.forward(x, Tensor(), h), 0, 0);
  CHECK(!out.aux_loss.defined());
  const Tensor task = sum(out.output);
  CHECK(out.objective(task).item<double>() == task.item<double>());
}

TEST_CASE("encoder factory: a ClusterFormer's auxiliary loss is µ·L1 + ν·L2 (eq. 17), gradients included") {
  const nn::ClusteringLossWeights weights{0.25, 0.5};
  Generator a(1), b(1);
  const auto encoder = nn::make_encoder(layer("neural-clustering:clusters=2"), 2, a, weights);
  nn::ClusterFormerEncoder reference(layer("neural-clustering:clusters=2"), 2, b);
  const Tensor x = to(uniform({2, 6, 8}, 2), DType::Float32);
  Generator g(3), h(3);
  const nn::EncoderOutput out = encoder->encode(x, Tensor(), g);
  const nn::ClusterFormerOutput ref = reference.forward(x, Tensor(), h);
  check_close(out.output, ref.output, 0, 0);
  const Tensor task = mean(out.output * out.output), ref_task = mean(ref.output * ref.output);
  // The objective against ClusterFormerLoss (eq. 17 with λ = 1), values and every parameter's gradient.
  const Tensor objective = out.objective(task);
  const Tensor ref_objective = nn::ClusterFormerLoss({0.25, 0.5, 1.0}).forward(ref_task, ref);
  CHECK(objective.item<double>() == doctest::Approx(ref_objective.item<double>()).epsilon(1e-6));
  objective.backward();
  ref_objective.backward();
  const auto p = encoder->named_parameters(), q = reference.named_parameters();
  REQUIRE(p.size() == q.size());
  for (size_t i = 0; i < p.size(); ++i) {
    CAPTURE(p[i].first);
    check_close(p[i].second.grad(), q[i].second.grad(), 1e-6, 1e-5);
  }
}

TEST_CASE("encoder factory: set_attention switches a Transformer; a ClusterFormer keeps its own") {
  Generator gen(0);
  const auto transformer = nn::make_encoder(layer("full"), 1, gen);
  transformer->set_attention(AttentionConfig::parse("improved-clustered:clusters=2,topk=2"));
  check_error([&] { transformer->set_attention(AttentionConfig::parse("neural-clustering:clusters=2")); },
              {"neural-clustering"});
  const auto clusterformer = nn::make_encoder(layer("neural-clustering:clusters=2"), 1, gen);
  clusterformer->set_attention(AttentionConfig::parse("neural-clustering:clusters=2"));
  check_error([&] { clusterformer->set_attention(AttentionConfig::parse("full")); },
              {"ClusterFormerEncoder", "neural-clustering:clusters=2", "full"});
  check_error([&] { nn::make_encoder(layer("neural-clustering:clusters=2"), 1, gen, {-1, 0}); },
              {"ClusterFormerEncoder", "µ, ν"});
}
