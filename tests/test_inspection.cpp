// Gradient-flow inspection below the app: separate_gradients and compare_gradients (nn/gradient_flow.h),
// the encoders' per-layer traces (nn/encoder.h), attention_rows (nn/attention/clustered.h), the cluster
// statistics (metrics/cluster_stats.h) and models::inspect (models/inspection.h) on a tagger, a
// padded batch and a translator's two stacks.
#include <cmath>
#include <functional>

#include "metrics/cluster_stats.h"
#include "models/inspection.h"
#include "models/sequence_tagger.h"
#include "models/translator.h"
#include "nn/attention/clustered.h"
#include "nn/clusterformer.h"
#include "nn/gradient_flow.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using attention::AttentionConfig;

namespace {

models::SequenceTaggerOptions tagger(const std::string& attention) {
  models::SequenceTaggerOptions o;
  o.vocabulary = o.labels = 6;
  o.encoder = {/*layers=*/2, /*heads=*/2, /*head_dim=*/4, /*ff=*/8, /*dropout=*/0.0, AttentionConfig::parse(attention),
               {/*mu=*/0.3, /*nu=*/0.7}};
  return o;
}

Tensor tokens_of(int64_t batch, int64_t length, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> t(size_t(batch * length));
  const std::vector<double> u = rand({batch * length}, gen, {DType::Float64}).to_vector<double>();
  for (size_t i = 0; i < t.size(); ++i) t[i] = int64_t(u[i] * 6);
  return from_vector<int64_t>(t, {batch, length});
}

// A tagger's one stack on tokens (B, N), lengths (B) or undefined; task(logits) the task loss.
models::Inspection inspect_tagger(models::SequenceTagger& model, const Tensor& tokens,
                                  const std::function<Tensor(const Tensor&)>& task, const models::InspectionOptions& o,
                                  const Tensor& lengths = Tensor()) {
  return models::inspect(
      model,
      [&](Generator& gen) {
        const auto out = model.forward(tokens, lengths, gen);
        return models::InspectedPass{{{"encoder", model.encoder, model.options().encoder.attention, out.layers, lengths}},
                                     task(out.logits)};
      },
      o);
}

}  // namespace

TEST_CASE("separate_gradients: each loss's own gradient, at leaves and retained non-leaves") {
  Tape::current().clear();
  const Tensor x = uniform({3, 2}, 1).set_requires_grad(true);
  const Tensor a = uniform({3, 2}, 2), b = uniform({3, 2}, 3);
  const Tensor h = x * 2.0;  // a non-leaf target
  const Tensor unreached = uniform({2}, 4).set_requires_grad(true);
  const Tensor first = sum(h * a), second = sum(h * h * b);
  const std::vector<std::vector<Tensor>> g = nn::separate_gradients({first, second}, {x, h, unreached});
  REQUIRE(g.size() == 3);
  // d first / dx = 2a, d second / dx = 8 x b; at h: a and 2 h b.
  check_close(g[0][0], a * 2.0);
  check_close(g[0][1], x.detach() * b * 8.0);
  check_close(g[1][0], a);
  check_close(g[1][1], h.detach() * b * 2.0);
  check_close(g[2][0], zeros({2}, {DType::Float64}));
  check_close(g[2][1], zeros({2}, {DType::Float64}));
  CHECK_FALSE(x.grad().defined());  // the targets' gradients are dropped at the end
  CHECK(Tape::current().size() == 0);  // every entry the passes ran is released
}

TEST_CASE("separate_gradients and compare_gradients refuse bad input") {
  const Tensor x = uniform({3}, 1).set_requires_grad(true);
  check_error([&] { nn::separate_gradients({x * 2.0}, {x}); }, {"separate_gradients", "must be 0-d", "(3,)"});
  check_error([&] { nn::separate_gradients({sum(x)}, {Tensor()}); }, {"separate_gradients", "target 0 is undefined"});
  check_error([&] { nn::compare_gradients({uniform({3}, 1), uniform({2}, 1)}); },
              {"compare_gradients", "gradient 1 has shape (2,)", "(3,)"});
}

TEST_CASE("compare_gradients: norms, cosines, and no cosine with a zero gradient") {
  const nn::GradientComparison c = nn::compare_gradients({from_vector<double>({3, 4}, {2}), from_vector<double>({-6, -8}, {2}),
                                                          from_vector<double>({4, -3}, {2}), zeros({2}, {DType::Float64})});
  CHECK(c.norms[0] == doctest::Approx(5));
  CHECK(c.norms[1] == doctest::Approx(10));
  CHECK(c.cosines[0][1] == doctest::Approx(-1));
  CHECK(c.cosines[0][2] == doctest::Approx(0));
  CHECK(c.cosines[1][1] == doctest::Approx(1));
  CHECK(std::isnan(c.cosines[0][3]));
  CHECK(c.norms[3] == 0);
}

TEST_CASE("cluster statistics: sizes, normalised entropy, churn, summaries, row norms") {
  const metrics::ClusterSizes s = metrics::cluster_sizes({0, 2, 2, 3, 2, 4 /* padding when C = 4 */}, 4);
  CHECK(s.sizes == std::vector<int64_t>{1, 0, 3, 1});
  CHECK(s.words == 5);
  CHECK(s.empty == 1);
  CHECK(s.largest_share == doctest::Approx(0.6));
  CHECK(metrics::normalized_entropy({1, 1, 1, 1}) == doctest::Approx(1));
  CHECK(metrics::normalized_entropy({0, 5, 0}) == doctest::Approx(0));
  CHECK(metrics::normalized_entropy({1, 3}) == doctest::Approx(-(0.25 * std::log(0.25) + 0.75 * std::log(0.75)) / std::log(2)));
  CHECK(metrics::churn({0, 1, 2, 3}, {0, 2, 2, 1}, 3) == doctest::Approx(1.0 / 3));  // position 3 is padding in a
  const metrics::Spread m = metrics::spread({2, -1, 5});
  CHECK(m.min == -1);
  CHECK(m.max == 5);
  CHECK(m.mean == doctest::Approx(2));
  CHECK(metrics::row_norms({3, 4, 0, 1}, 2, 2) == std::vector<double>{5, 1});
  check_error([] { metrics::cluster_sizes({0}, 0); }, {"cluster_sizes", "at least one cluster"});
  check_error([] { metrics::normalized_entropy({0, 0}); }, {"normalized_entropy", "all 0"});
  check_error([] { metrics::normalized_entropy({1, -1}); }, {"normalized_entropy", "non-negative"});
  check_error([] { metrics::churn({0}, {0, 1}, 2); }, {"churn", "1 and 2 words"});
  check_error([] { metrics::row_norms({1, 2, 3}, 2, 2); }, {"row_norms", "needs 4 values, got 3"});
}

TEST_CASE("attention_rows: rows times V are clustered and improved-clustered attention; Proposition 2 holds") {
  const int64_t B = 2, H = 2, N = 9, S = 9, E = 3, C = 3;
  const Tensor q = uniform({B, H, N, E}, 1, -2, 2), k = uniform({B, H, S, E}, 2, -2, 2), v = uniform({B, H, S, E}, 3);
  const attention::Padding padding{from_vector<int64_t>({9, 6}, {2}), from_vector<int64_t>({9, 6}, {2})};
  Generator gen(0);
  const attention::QueryClusters clusters = attention::cluster_queries(q, padding.query_lengths, {C, 16, 5}, gen);
  for (const int64_t topk : {int64_t(2), int64_t(4)}) {
    const attention::AttentionRows rows = attention::attention_rows(q, k, clusters, topk, padding);
    check_close(matmul(rows.clustered, v), attention::clustered_attention(q, k, v, clusters, padding), 1e-12, 1e-9);
    // At real queries only: a padded query's improved output is not defined by rows.
    const Tensor improved = attention::improved_clustered_attention(q, k, v, clusters, topk, padding);
    check_close(slice(matmul(rows.improved, v), 0, 0, 1), slice(improved, 0, 0, 1), 1e-12, 1e-9);
    check_close(slice(slice(matmul(rows.improved, v), 0, 1, 2), 2, 0, 6), slice(slice(improved, 0, 1, 2), 2, 0, 6), 1e-12, 1e-9);
    const std::vector<double> l1c = sum(abs(rows.clustered - rows.full), {-1}).to_vector<double>();
    const std::vector<double> l1i = sum(abs(rows.improved - rows.full), {-1}).to_vector<double>();
    for (size_t i = 0; i < l1c.size(); ++i) {
      INFO("row " << i);
      CHECK(l1i[i] <= l1c[i] + 1e-12);
    }
  }
  // With every key in the top-k, improved-clustered rows are full attention's (sample 0: no padded query).
  const attention::AttentionRows all = attention::attention_rows(q, k, clusters, S);
  check_close(slice(all.improved, 0, 0, 1), slice(all.full, 0, 0, 1), 1e-12, 1e-9);
  check_error([&] { attention::attention_rows(q, k, clusters, 0); }, {"attention_rows", "topk must be at least 1"});
  check_error([&] { attention::attention_rows(q, slice(k, 3, 0, 2), clusters, 2); }, {"attention_rows"});
}

TEST_CASE("encoders trace every layer; a ClusterFormer's per-layer losses sum to its auxiliary loss") {
  nn::TransformerLayerOptions o;
  o.d_model = 4, o.heads = 2, o.d_ff = 6, o.dropout = 0;
  o.attention = AttentionConfig::parse("neural-clustering:clusters=2");
  Generator gen(1);
  const auto encoder = nn::make_encoder(o, 3, gen, {0.3, 0.7});
  encoder->to(DType::Float64);
  const Tensor x = uniform({2, 5, 4}, 2);
  Generator g(0);
  const nn::EncoderOutput out = encoder->encode(x, Tensor(), g);
  REQUIRE(out.layers.size() == 3);
  Tensor aux = zeros({}, {DType::Float64});
  for (const nn::EncoderLayerTrace& t : out.layers)
    aux = aux + t.clustering.clustering_loss * 0.3 + t.clustering.sorting_loss * 0.7;
  check_close(aux, out.aux_loss, 1e-12, 1e-12);
  CHECK(out.layers[0].input.impl_ptr() == x.impl_ptr());
  CHECK(out.layers[1].centroids.impl_ptr() == out.layers[0].clustering.centroids.impl_ptr());
  CHECK(out.layers[0].clustering.u.shape() == Shape{2, 2, 5});

  o.attention = AttentionConfig::parse("clustered:clusters=2");
  const auto transformer = nn::make_encoder(o, 2, gen);
  const nn::EncoderOutput t = transformer->encode(to(x, DType::Float32), Tensor(), g);
  REQUIRE(t.layers.size() == 2);
  CHECK(t.layers[0].attention_input.shape() == Shape{2, 5, 4});
  CHECK_FALSE(t.layers[0].clustering.u.defined());
}

TEST_CASE("inspect_tagger, neural-clustering: the losses' gradients add up to the objective's; none from the task into C") {
  Generator gen(2);
  models::SequenceTagger model(tagger("neural-clustering:clusters=3"), gen);
  model.to(DType::Float64);
  const Tensor tokens = tokens_of(3, 8, 1), target = tokens_of(3, 8, 2);
  const auto task = [&](const Tensor& logits) { return cross_entropy(logits, target); };
  const models::Inspection in = inspect_tagger(model, tokens, task, {0.3, 0.7, 0});
  REQUIRE(in.losses == std::vector<std::string>{"task", "mu_l1", "nu_l2"});
  REQUIRE(in.layers.size() == 2);
  const auto whole = [&](size_t layer, const std::string& target_name) {
    for (const models::GradientReport& g : in.layers[layer].gradients)
      if (g.target == target_name && g.head < 0) return g.comparison;
    FAIL("no gradient report for " << target_name);
    return nn::GradientComparison();
  };
  // The assignment is piecewise constant: the task loss sends nothing into the first centroids or W_C.
  CHECK(whole(0, "centroids").norms[0] == 0);
  CHECK(whole(0, "w_c").norms[0] == 0);
  CHECK(whole(0, "centroids").norms[1] > 0);
  // The three parts of W_Q's gradient in layer 0 add up to the gradient of the objective (one backward).
  Generator g(0);
  const auto out = model.forward(tokens, Tensor(), g);
  out.objective(task(out.logits)).backward();
  const auto& layer = *std::dynamic_pointer_cast<nn::ClusterFormerEncoder>(model.encoder)->layers->operator[](0);
  const Tensor total = layer.w_q.grad();
  const std::vector<Tensor> parts = nn::separate_gradients(
      {cross_entropy(model.forward(tokens, Tensor(), g).logits, target)}, {layer.w_q})[0];
  const double total_norm = std::sqrt(sum(total * total).item<double>());
  const nn::GradientComparison wq = whole(0, "w_q");
  // ‖g_task + g_L1 + g_L2‖² from the reported norms and cosines.
  double square = 0;
  for (size_t a = 0; a < 3; ++a)
    for (size_t b = 0; b < 3; ++b)
      square += wq.norms[a] * wq.norms[b] * (a == b ? 1.0 : (std::isnan(wq.cosines[a][b]) ? 0.0 : wq.cosines[a][b]));
  CHECK(std::sqrt(square) == doctest::Approx(total_norm).epsilon(1e-9));
  CHECK(parts[0].shape() == layer.w_q.shape());
  // U's columns, cluster sizes: every real word is in one cluster.
  const models::ClusterReport& c = in.layers[0].clusters.at(0);
  int64_t words = 0;
  for (const int64_t s : c.total.sizes) words += s;
  CHECK(words == 3 * 8);
  CHECK(c.entropy.max <= 1.0 + 1e-12);
  // Comparing an inspection with itself: no churn, no movement.
  const std::vector<models::LayerChange> same = models::compare_inspections(in, in);
  CHECK(same.at(0).churn == 0);
  CHECK(same.at(1).centroid_movement.max == 0);
}

TEST_CASE("inspect_tagger, improved-clustered: per-head figures, Proposition 2 on the model's own activations") {
  Generator gen(3);
  models::SequenceTagger model(tagger("improved-clustered:clusters=3,topk=3,bits=16,iterations=5"), gen);
  const Tensor tokens = tokens_of(4, 10, 3), target = tokens_of(4, 10, 4);
  const models::Inspection in =
      inspect_tagger(model, tokens, [&](const Tensor& l) { return cross_entropy(l, target); }, {});
  REQUIRE(in.losses == std::vector<std::string>{"task"});
  REQUIRE(in.layers.size() == 2);
  for (const models::LayerInspection& layer : in.layers) {
    CHECK(layer.clusters.size() == 2);   // one clustering per head
    REQUIRE(layer.attention.size() == 2);
    for (const models::AttentionReport& a : layer.attention) {
      CHECK(a.proposition2 == 1.0);
      CHECK(a.l1_improved <= a.l1_clustered);
      CHECK(a.clustered_topk_mass > 0);
      CHECK(a.clustered_topk_mass <= 1.0 + 1e-6);
    }
    CHECK(layer.gradients.size() == 3 * 3 + 1);  // w_q, w_k, w_v whole and per head; the input
  }
  REQUIRE(in.maps.size() == 2);
  CHECK(in.maps[0].full.size() == 100);
  check_error([&] { models::compare_inspections(in, in); }, {"neural-clustering on both sides"});
}

TEST_CASE("inspect_tagger refuses a model with nothing to inspect, and says why") {
  Generator gen(4);
  models::SequenceTagger model(tagger("full"), gen);
  const Tensor tokens = tokens_of(2, 5, 1);
  check_error([&] { inspect_tagger(model, tokens, [](const Tensor& l) { return sum(l); }, {}); },
              {"nothing to inspect", "'full'", "no clusters and no clustering losses"});
  CHECK(models::nothing_to_inspect(AttentionConfig::parse("reformer")).find("not inspected") != std::string::npos);
}

TEST_CASE("inspect, improved-clustered with padding: padded positions join no cluster and change no figure") {
  Generator gen(5);
  models::SequenceTagger model(tagger("improved-clustered:clusters=3,topk=3,bits=16,iterations=5"), gen);
  const int64_t B = 3, N = 10;
  const std::vector<int64_t> real = {10, 6, 3};
  const Tensor lengths = from_vector<int64_t>(real, {B});
  std::vector<int64_t> tokens = tokens_of(B, N, 6).to_vector<int64_t>(), other = tokens;
  std::vector<int64_t> target = tokens_of(B, N, 7).to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t n = real[size_t(b)]; n < N; ++n) {
      other[size_t(b * N + n)] = (tokens[size_t(b * N + n)] + 1) % 6;  // different padding
      target[size_t(b * N + n)] = -100;                                 // ignored by the loss
    }
  const Tensor t = from_vector<int64_t>(target, {B, N});
  const auto task = [&](const Tensor& logits) { return cross_entropy(logits, t); };
  const models::Inspection a = inspect_tagger(model, from_vector<int64_t>(tokens, {B, N}), task, {}, lengths);
  const models::Inspection b = inspect_tagger(model, from_vector<int64_t>(other, {B, N}), task, {}, lengths);
  REQUIRE(a.layers.size() == 2);
  CHECK(a.loss_values[0] == doctest::Approx(b.loss_values[0]).epsilon(1e-6));
  for (size_t l = 0; l < a.layers.size(); ++l) {
    for (const models::ClusterReport& c : a.layers[l].clusters) CHECK(c.total.words == 19);
    for (size_t h = 0; h < a.layers[l].attention.size(); ++h) {
      const models::AttentionReport &x = a.layers[l].attention[h], &y = b.layers[l].attention[h];
      CHECK(x.proposition2 == 1.0);  // a padded query (a zero clustered row) would break it
      CHECK(x.l1_clustered == doctest::Approx(y.l1_clustered).epsilon(1e-5));
      CHECK(x.clustered_topk_mass == doctest::Approx(y.clustered_topk_mass).epsilon(1e-5));
    }
    for (size_t g = 0; g < a.layers[l].gradients.size(); ++g)
      CHECK(a.layers[l].gradients[g].comparison.norms[0] ==
            doctest::Approx(b.layers[l].gradients[g].comparison.norms[0]).epsilon(1e-5));
  }
  REQUIRE(a.maps.size() == 2);
  CHECK(a.maps[0].size == 10);
  CHECK(a.maps[0].full.size() == 100);
}

TEST_CASE("inspect, a translator: a clustered encoder and a neural-clustering decoder in one pass") {
  Generator gen(8);
  models::TranslatorOptions o;
  o.vocabulary = 9;
  o.encoder_layers = 1;
  o.decoder_layers = 2;
  o.heads = 2;
  o.head_dim = 4;
  o.ff = 8;
  o.dropout = 0;
  o.encoder_attention = AttentionConfig::parse("clustered:clusters=2,bits=16,iterations=3");
  o.decoder_attention = AttentionConfig::parse("neural-clustering:clusters=2");
  o.clustering = {0.5, 0.25};
  models::Translator model(o, gen);
  const Tensor source = from_vector<int64_t>({3, 4, 5, 6, 2, 7, 8, 2, 0, 0}, {2, 5});
  const Tensor source_lengths = from_vector<int64_t>({5, 3}, {2});
  const Tensor target_in = from_vector<int64_t>({1, 3, 4, 5, 1, 6, 0, 0}, {2, 4});
  const Tensor target_lengths = from_vector<int64_t>({4, 2}, {2});
  const Tensor target_out = from_vector<int64_t>({3, 4, 5, 2, 6, 2, 0, 0}, {2, 4});
  const models::Inspection in = models::inspect(
      model,
      [&](Generator& g) {
        const auto out = model.forward(source, source_lengths, target_in, target_lengths, g);
        return models::InspectedPass{
            {{"encoder", model.encoder, o.encoder_attention, out.encoder_layers, source_lengths},
             {"decoder", model.clustering_decoder, o.decoder_attention, out.decoder_layers, target_lengths}},
            cross_entropy(out.logits, target_out, 0)};
      },
      {0.5, 0.25, 0});
  CHECK(in.attention == "encoder: " + o.encoder_attention.to_string() + "; decoder: " + o.decoder_attention.to_string());
  REQUIRE(in.losses == std::vector<std::string>{"task", "mu_l1", "nu_l2"});
  REQUIRE(in.layers.size() == 3);
  CHECK(in.layers[0].stack == "encoder");
  CHECK(in.layers[1].stack == "decoder");
  CHECK(in.layers[2].layer == 1);
  // The encoder: per head, its 5 + 3 real queries; the decoder: its 4 + 2 real words.
  CHECK(in.layers[0].clusters.at(0).total.words == 8);
  CHECK(in.layers[1].clusters.at(0).total.words == 6);
  // The decoder's first centroids get no gradient from the task (the assignment is piecewise
  // constant), one from µ·L1.
  const auto& centroids = in.layers[1].gradients.at(0);
  REQUIRE(centroids.target == "centroids");
  CHECK(centroids.comparison.norms[0] == 0);
  CHECK(centroids.comparison.norms[1] > 0);
  REQUIRE(in.maps.size() == 1);
  CHECK(in.maps[0].stack == "encoder");
  CHECK(in.maps[0].size == 5);
  const nlohmann::json j = models::to_json(in);
  CHECK(j.at("layers").at(1).at("stack") == "decoder");
  CHECK(j.at("layers").at(1).at("assignment").size() == 4);
}

TEST_CASE("inspect refuses a pass whose stack is not of its attention's kind, or traced no layer") {
  Generator gen(9);
  models::SequenceTagger model(tagger("clustered:clusters=2"), gen);
  const Tensor tokens = tokens_of(2, 5, 1);
  const auto pass_as = [&](const std::string& attention, bool traced) {
    return [&, attention, traced](Generator& g) {
      const auto out = model.forward(tokens, Tensor(), g);
      return models::InspectedPass{
          {{"encoder", model.encoder, AttentionConfig::parse(attention),
            traced ? out.layers : std::vector<nn::EncoderLayerTrace>(), Tensor()}},
          sum(out.logits)};
    };
  };
  check_error([&] { models::inspect(model, pass_as("neural-clustering:clusters=2", true), {}); },
              {"inspect", "encoder", "not a ClusterFormer encoder or decoder"});
  check_error([&] { models::inspect(model, pass_as("clustered:clusters=2", false), {}); },
              {"inspect", "traced no layer"});
}

TEST_CASE("inspect with DrawGraph::Yes: the pass's graph, each loss's norm on C's edge equal to the report's, the argmax cut") {
  Generator gen(2);
  models::SequenceTagger model(tagger("neural-clustering:clusters=3"), gen);
  model.to(DType::Float64);
  const Tensor tokens = tokens_of(3, 8, 1), target = tokens_of(3, 8, 2);
  const auto task = [&](const Tensor& logits) { return cross_entropy(logits, target); };
  models::InspectionOptions o{0.3, 0.7, 0};
  CHECK_FALSE(inspect_tagger(model, tokens, task, o).graph.has_value());  // not asked for
  o.graph = models::DrawGraph::Yes;
  const models::Inspection in = inspect_tagger(model, tokens, task, o);
  REQUIRE(in.graph.has_value());
  const TapeGraph& g = *in.graph;
  CHECK(g.passes == in.losses);
  nn::GradientComparison centroids;
  for (const models::GradientReport& r : in.layers[0].gradients)
    if (r.target == "centroids" && r.head < 0) centroids = r.comparison;
  int64_t argmax_cuts = 0, centroid_edges = 0;
  for (const GraphNode& node : g.nodes)
    if (node.kind == NodeKind::Cut && node.label == "argmax") {
      ++argmax_cuts;
      CHECK(node.module.rfind("encoder.layers.", 0) == 0);
    }
  CHECK(argmax_cuts == 2);  // one per layer
  for (const GraphEdge& e : g.edges) {
    if (g.nodes[size_t(e.from)].label != "encoder.centroids") continue;
    ++centroid_edges;
    CHECK(std::isnan(e.grad_norms[0]));  // the task's pass never reaches C
    for (size_t l = 1; l < 3; ++l) {
      INFO(in.losses[l] << ": edge " << e.grad_norms[l] << ", report " << centroids.norms[l]);
      CHECK(std::abs(e.grad_norms[l] - centroids.norms[l]) <= 1e-12 * centroids.norms[l]);
    }
  }
  CHECK(centroid_edges == 1);
  const TapeGraph view = collapse(g, models::inspection_graph_view(in));
  int64_t boxes = 0;
  for (const GraphNode& node : view.nodes) boxes += node.kind == NodeKind::Module && node.label == "encoder.layers.1";
  CHECK(boxes == 1);
}
