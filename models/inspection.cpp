#include "models/inspection.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/autograd.h"
#include "core/creation.h"
#include "core/error.h"
#include "nn/attention/clustered.h"
#include "nn/clusterformer.h"
#include "nn/multihead_attention.h"
#include "nn/transformer.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry::models {


namespace {

// The k of the improved-clustered rows the report compares for a clustered layer, which has no top-k
// of its own: improved-clustered's default.
constexpr int64_t kReportedTopk = 32;

constexpr const char* kOp = "inspect";

// The gradients of one target: the whole tensor, then each head's slice along `head_dim` (-1: none).
void report_target(LayerInspection& layer, const std::string& name, const std::vector<Tensor>& grads,
                   int64_t heads, int64_t head_dim) {
  layer.gradients.push_back({name, -1, nn::compare_gradients(grads)});
  if (head_dim < 0) return;
  const int64_t width = grads[0].size(head_dim) / heads;
  for (int64_t h = 0; h < heads; ++h) {
    std::vector<Tensor> sliced;
    for (const Tensor& g : grads) sliced.push_back(slice(g, head_dim, h * width, (h + 1) * width));
    layer.gradients.push_back({name, h, nn::compare_gradients(sliced)});
  }
}

// Sizes per sample of ids (B, N) flattened, summed and averaged.
ClusterReport cluster_report(const std::vector<int64_t>& ids, int64_t samples, int64_t length, int64_t clusters,
                             int64_t head) {
  ClusterReport r;
  r.head = head;
  r.total.sizes.assign(size_t(clusters), 0);
  for (int64_t b = 0; b < samples; ++b) {
    const std::vector<int64_t> sample(ids.begin() + b * length, ids.begin() + (b + 1) * length);
    const metrics::ClusterSizes s = metrics::cluster_sizes(sample, clusters);
    for (int64_t c = 0; c < clusters; ++c) r.total.sizes[size_t(c)] += s.sizes[size_t(c)];
    r.total.words += s.words;
    r.empty += double(s.empty) / double(samples);
    r.largest_share += s.largest_share / double(samples);
  }
  r.total.empty = std::count(r.total.sizes.begin(), r.total.sizes.end(), 0);
  r.total.largest_share = r.total.words == 0 ? 0.0
      : double(*std::max_element(r.total.sizes.begin(), r.total.sizes.end())) / double(r.total.words);
  return r;
}

// Neural-clustering: U's columns and Ĉ's norms, besides the sizes.
ClusterReport neural_cluster_report(const nn::EncoderLayerTrace& t) {
  const attention::NeuralClustering& nc = t.clustering;
  const int64_t B = nc.u.size(0), C = nc.u.size(1), N = nc.u.size(2), D = nc.centroids.size(2);
  const std::vector<int64_t> ids = nc.assignment.to_vector<int64_t>();
  ClusterReport r = cluster_report(ids, B, N, C, -1);
  const std::vector<double> u = nc.u.to_vector<double>();  // (B, C, N)
  std::vector<double> entropies;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 0; j < N; ++j) {
      if (ids[size_t(b * N + j)] >= C) continue;  // padding
      std::vector<double> column(static_cast<size_t>(C));
      double total = 0;
      for (int64_t c = 0; c < C; ++c) column[size_t(c)] = u[size_t((b * C + c) * N + j)], total += column[size_t(c)];
      if (total > 0) entropies.push_back(metrics::normalized_entropy(column));
      else ++r.unclaimed;  // every centroid's softmax over the words gives it 0 (underflow): no distribution
    }
  r.entropy = metrics::spread(entropies);
  r.centroid_norms = metrics::spread(metrics::row_norms(nc.centroids.to_vector<double>(), B * C, D));
  return r;
}

// Adds one sample's clustered rows against full attention's, per head, over its `length` real
// queries to reports' sums (attention_reports divides them); fills `map` from head 0 when given.
void add_attention_rows(const attention::AttentionRows& rows, int64_t length, std::vector<AttentionReport>& reports,
                        AttentionMap* map) {
  const int64_t H = rows.full.size(1), N = rows.full.size(2), S = rows.full.size(3);
  const std::vector<double> full = rows.full.to_vector<double>(), clustered = rows.clustered.to_vector<double>(),
                            improved = rows.improved.to_vector<double>();
  const std::vector<bool> in_top = rows.in_top.to_vector<bool>();
  for (int64_t h = 0; h < H; ++h) {
    AttentionReport& r = reports[size_t(h)];
    for (int64_t i = 0; i < length; ++i) {
      const size_t row = size_t((h * N + i) * S);
      double l1c = 0, l1i = 0, mass_c = 0, mass_f = 0;
      for (int64_t s = 0; s < S; ++s) {
        l1c += std::abs(clustered[row + s] - full[row + s]);
        l1i += std::abs(improved[row + s] - full[row + s]);
        if (in_top[row + s]) mass_c += clustered[row + s], mass_f += full[row + s];
      }
      r.l1_clustered += l1c, r.l1_improved += l1i, r.clustered_topk_mass += mass_c, r.full_topk_mass += mass_f;
      r.proposition2 += l1i <= l1c + 1e-5;
      r.max_excess = std::max(r.max_excess, l1i - l1c);
    }
  }
  if (map) {  // head 0, its top-left corner
    const int64_t n = std::min(length, kMapPositions);
    map->size = n;
    for (int64_t i = 0; i < n; ++i) {
      const auto row = std::ptrdiff_t(i * S);
      map->full.insert(map->full.end(), full.begin() + row, full.begin() + row + n);
      map->clustered.insert(map->clustered.end(), clustered.begin() + row, clustered.begin() + row + n);
      map->improved.insert(map->improved.end(), improved.begin() + row, improved.begin() + row + n);
    }
  }
}

// Per head: the clustered and improved-clustered rows against full attention's, over the real
// queries; one sample at a time, so that memory holds one sample's N × N rows per head.
std::vector<AttentionReport> attention_reports(const Tensor& q, const Tensor& k, const attention::QueryClusters& clusters,
                                               const std::vector<int64_t>& lengths, int64_t topk, AttentionMap* map) {
  const int64_t B = q.size(0), H = q.size(1);
  std::vector<AttentionReport> reports(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) {
    reports[size_t(h)].head = h;
    reports[size_t(h)].max_excess = -std::numeric_limits<double>::infinity();
  }
  double queries = 0;
  for (int64_t b = 0; b < B; ++b) {
    const Tensor length = from_vector(std::vector<int64_t>{lengths[size_t(b)]}, {1}, q.device());
    const attention::QueryClusters sample{slice(clusters.ids, 0, b, b + 1), clusters.count};
    const attention::AttentionRows rows =
        attention::attention_rows(slice(q, 0, b, b + 1), slice(k, 0, b, b + 1), sample, topk, {length, length});
    add_attention_rows(rows, lengths[size_t(b)], reports, b == 0 ? map : nullptr);
    queries += double(lengths[size_t(b)]);
  }
  for (AttentionReport& r : reports) {
    r.l1_clustered /= queries, r.l1_improved /= queries, r.proposition2 /= queries;
    r.clustered_topk_mass /= queries, r.full_topk_mass /= queries;
  }
  return reports;
}

// Each sequence's real positions: lengths (B) read, or N for each when undefined.
std::vector<int64_t> real_lengths(const Tensor& lengths, int64_t batch, int64_t positions) {
  if (!lengths.defined()) return std::vector<int64_t>(size_t(batch), positions);
  return to(to(lengths, Device::cpu()), DType::Int64).to_vector<int64_t>();
}

// A neural-clustering layer's attention weights, from an encoder's or a decoder's layer.
struct NeuralWeights {
  Tensor w_c, w_q, w_k, w_v;
  int64_t heads = 1;
};

std::vector<NeuralWeights> neural_weights(const InspectedStack& stack) {
  std::vector<NeuralWeights> out;
  const auto add = [&](const auto& layers) {
    for (size_t i = 0; i < layers.size(); ++i)
      out.push_back({layers[i]->w_c, layers[i]->w_q, layers[i]->w_k, layers[i]->w_v, layers[i]->options().heads});
  };
  if (auto encoder = std::dynamic_pointer_cast<nn::ClusterFormerEncoder>(stack.module)) add(*encoder->layers);
  else if (auto decoder = std::dynamic_pointer_cast<nn::ClusterFormerDecoder>(stack.module)) add(*decoder->layers);
  else fail(kOp, "the ", stack.name, " has neural-clustering attention but is not a ClusterFormer encoder or decoder");
  TP_CHECK(out.size() == stack.layers.size(), kOp, "the ", stack.name, " has ", out.size(), " layers but the pass traced ",
           stack.layers.size());
  return out;
}

std::shared_ptr<nn::TransformerEncoder> transformer_of(const InspectedStack& stack) {
  auto encoder = std::dynamic_pointer_cast<nn::TransformerEncoder>(stack.module);
  TP_CHECK(encoder != nullptr, kOp, "the ", stack.name, " has '", stack.attention.to_string(),
           "' attention but is not a Transformer encoder");
  TP_CHECK(encoder->layers->size() == stack.layers.size(), kOp, "the ", stack.name, " has ", encoder->layers->size(),
           " layers but the pass traced ", stack.layers.size());
  return encoder;
}

// A ClusterFormer stack (neural clustering of the hidden states), else a Transformer with clustered queries.
bool is_neural(const InspectedStack& stack) { return stack.attention.kind().form() == attention::Form::HiddenStates; }

// The tensors whose gradients a stack's layers report, in order: per neural-clustering layer the
// centroids, W_C, W_Q, W_K, W_V and the input; per clustered layer W_Q, W_K, W_V and the input.
std::vector<Tensor> gradient_targets(const InspectedStack& stack) {
  std::vector<Tensor> targets;
  if (is_neural(stack)) {
    const std::vector<NeuralWeights> w = neural_weights(stack);
    for (size_t i = 0; i < stack.layers.size(); ++i)
      targets.insert(targets.end(), {stack.layers[i].centroids, w[i].w_c, w[i].w_q, w[i].w_k, w[i].w_v,
                                     stack.layers[i].input});
  } else {
    const auto encoder = transformer_of(stack);
    for (size_t i = 0; i < stack.layers.size(); ++i) {
      const nn::MultiheadAttention& attn = *(*encoder->layers)[i]->self_attn;
      targets.insert(targets.end(), {attn.q_proj->weight, attn.k_proj->weight, attn.v_proj->weight, stack.layers[i].input});
    }
  }
  return targets;
}

// The layers of a neural-clustering stack; grads[t] for its targets from `first` on.
void inspect_neural(const InspectedStack& stack, const std::vector<std::vector<Tensor>>& grads, size_t first,
                    Inspection& result) {
  const std::vector<NeuralWeights> w = neural_weights(stack);
  for (size_t i = 0; i < stack.layers.size(); ++i) {
    const nn::EncoderLayerTrace& t = stack.layers[i];
    const int64_t heads = w[i].heads;
    LayerInspection layer;
    layer.stack = stack.name;
    layer.layer = int64_t(i);
    layer.l1 = t.clustering.clustering_loss.item<double>();
    layer.l2 = t.clustering.sorting_loss.item<double>();
    layer.w_c_norm = std::sqrt(sum(w[i].w_c.detach() * w[i].w_c.detach()).item<double>());
    const size_t at = first + 6 * i;
    report_target(layer, "centroids", grads[at], heads, -1);
    report_target(layer, "w_c", grads[at + 1], heads, -1);
    report_target(layer, "w_q", grads[at + 2], heads, 1);  // (D, H·E): a head's columns
    report_target(layer, "w_k", grads[at + 3], heads, 1);
    report_target(layer, "w_v", grads[at + 4], heads, 1);
    report_target(layer, "input", grads[at + 5], heads, -1);
    layer.clusters.push_back(neural_cluster_report(t));
    layer.assignment = t.clustering.assignment.to_vector<int64_t>();
    layer.positions = t.clustering.assignment.size(1);
    layer.centroids = t.centroids.to_vector<double>();
    layer.clusters_count = t.clustering.u.size(1);
    layer.centroid_width = t.centroids.size(-1);
    result.layers.push_back(std::move(layer));
  }
}

// The layers of a clustered or improved-clustered stack; grads[t] for its targets from `first` on.
void inspect_clustered(const InspectedStack& stack, const std::vector<std::vector<Tensor>>& grads, size_t first,
                       const InspectionOptions& o, Inspection& result) {
  const auto encoder = transformer_of(stack);
  const attention::AttentionConfig& config = stack.attention;
  Generator gen(o.hash_seed);
  for (size_t i = 0; i < stack.layers.size(); ++i) {
    nn::MultiheadAttention& attn = *(*encoder->layers)[i]->self_attn;
    const int64_t heads = attn.options().heads;
    LayerInspection layer;
    layer.stack = stack.name;
    layer.layer = int64_t(i);
    const size_t at = first + 4 * i;
    report_target(layer, "w_q", grads[at], heads, 0);  // (out, in): a head's rows
    report_target(layer, "w_k", grads[at + 1], heads, 0);
    report_target(layer, "w_v", grads[at + 2], heads, 0);
    report_target(layer, "input", grads[at + 3], heads, -1);

    NoGradGuard no_grad;
    const Tensor y = stack.layers[i].attention_input.detach();
    const Tensor q = attn.project_queries(y, Tensor());
    Tensor k = attn.project_keys_values(y, y, Tensor()).keys;
    if (attention::shares_qk(config)) k = attention::unit_rows(k);
    const attention::QueryClusters clusters =
        attention::cluster_queries(q, stack.lengths, attention::clustering_options(config), gen);
    std::vector<int64_t> ids = clusters.ids.to_vector<int64_t>();  // (B, H, N)
    const int64_t B = q.size(0), N = q.size(2);
    const std::vector<int64_t> lengths = real_lengths(stack.lengths, B, N);
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<int64_t> head_ids;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t n = 0; n < N; ++n)  // padding joins no cluster
          head_ids.push_back(n < lengths[size_t(b)] ? ids[size_t((b * heads + h) * N + n)] : clusters.count);
      layer.clusters.push_back(cluster_report(head_ids, B, N, clusters.count, h));
    }
    AttentionMap map;
    map.layer = int64_t(i);
    const int64_t topk = config.has("topk") ? config.get("topk") : kReportedTopk;
    layer.attention = attention_reports(q, k, clusters, lengths, topk, &map);
    layer.positions = N;
    map.stack = stack.name;
    result.maps.push_back(std::move(map));
    result.layers.push_back(std::move(layer));
  }
}

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json summary(const metrics::Spread& s) {
  return {{"min", number(s.min)}, {"mean", number(s.mean)}, {"max", number(s.max)}};
}

}  // namespace

std::string nothing_to_inspect(const attention::AttentionConfig& config) { return config.kind().not_inspected(); }

Inspection inspect(nn::Module& model, const std::function<InspectedPass(Generator& gen)>& forward,
                   const InspectionOptions& o) {
  model.eval();
  for (Tensor& p : model.parameters()) p.zero_grad();
  Generator gen(o.hash_seed);
  std::optional<GraphRecorder> recorder;  // the forward pass and the losses' backward passes
  if (o.graph == DrawGraph::Yes) recorder.emplace(model.named_parameters());
  const InspectedPass pass = forward(gen);
  std::vector<const InspectedStack*> stacks;
  std::string why_not;
  for (const InspectedStack& stack : pass.stacks) {
    const std::string why = nothing_to_inspect(stack.attention);
    if (why.empty()) stacks.push_back(&stack);
    else why_not += (why_not.empty() ? "" : "; ") + stack.name + " '" + stack.attention.to_string() + "': " + why;
  }
  TP_CHECK(!stacks.empty(), kOp, "nothing to inspect in the model: ", why_not.empty() ? "it has no layers" : why_not);
  TP_CHECK(pass.task_loss.defined() && pass.task_loss.dim() == 0, kOp, "the task loss must be 0-d");

  Inspection result;
  for (const InspectedStack* stack : stacks) {
    TP_CHECK(!stack->layers.empty(), kOp, "the ", stack->name, "'s pass traced no layer");
    result.attention += (result.attention.empty() ? "" : "; ") +
                        (pass.stacks.size() == 1 ? "" : stack->name + ": ") + stack->attention.to_string();
  }
  result.sequences = stacks[0]->layers[0].input.size(0);
  result.length = stacks[0]->layers[0].input.size(1);

  // The losses: the task's and, with a neural-clustering stack, µ·L1 and ν·L2 over its layers (eq. 17).
  std::vector<Tensor> losses = {pass.task_loss};
  result.losses = {"task"};
  Tensor l1, l2;
  for (const InspectedStack* stack : stacks)
    if (is_neural(*stack))
      for (const nn::EncoderLayerTrace& t : stack->layers) {
        l1 = l1.defined() ? l1 + t.clustering.clustering_loss : t.clustering.clustering_loss;
        l2 = l2.defined() ? l2 + t.clustering.sorting_loss : t.clustering.sorting_loss;
      }
  if (l1.defined()) {
    losses.insert(losses.end(), {l1 * o.mu, l2 * o.nu});
    result.losses.insert(result.losses.end(), {"mu_l1", "nu_l2"});
  }
  for (const Tensor& l : losses) result.loss_values.push_back(l.item<double>());

  // One backward pass per loss over all the stacks' targets (the passes release the tape together).
  std::vector<Tensor> targets;
  std::vector<size_t> first;
  for (const InspectedStack* stack : stacks) {
    first.push_back(targets.size());
    const std::vector<Tensor> t = gradient_targets(*stack);
    targets.insert(targets.end(), t.begin(), t.end());
  }
  const std::vector<std::vector<Tensor>> grads = nn::separate_gradients(losses, targets);
  if (recorder) {
    result.graph = recorder->graph(result.losses);
    recorder.reset();  // the figures below are computed off the tape
  }
  for (size_t s = 0; s < stacks.size(); ++s) {
    if (is_neural(*stacks[s])) inspect_neural(*stacks[s], grads, first[s], result);
    else inspect_clustered(*stacks[s], grads, first[s], o, result);
  }
  for (Tensor& p : model.parameters()) p.zero_grad();
  return result;
}

GraphView inspection_graph_view(const Inspection& inspection) {
  GraphView view;
  view.depth = 1;  // the stacks open, their layers closed
  if (!inspection.layers.empty()) {
    const LayerInspection& first = inspection.layers[0];
    const std::string layer = first.stack + ".layers." + std::to_string(first.layer);
    view.expand = {layer, layer + ".self_attn"};  // clustered types: the attention's own ops
  }
  return view;
}

std::vector<LayerChange> compare_inspections(const Inspection& before, const Inspection& after) {
  TP_CHECK(before.layers.size() == after.layers.size(), kOp, "the two models have ", before.layers.size(), " and ",
           after.layers.size(), " layers");
  std::vector<LayerChange> changes;
  for (size_t i = 0; i < before.layers.size(); ++i) {
    const LayerInspection &a = before.layers[i], &b = after.layers[i];
    TP_CHECK(a.stack == b.stack, kOp, "layer ", i, " is in the ", a.stack, " of one model and the ", b.stack,
             " of the other");
    TP_CHECK(!a.assignment.empty() && !b.assignment.empty(), kOp,
             "churn and centroid movement need neural-clustering on both sides: clustered attention's cluster ids "
             "are not identities (its Hamming k-means starts afresh at every forward)");
    TP_CHECK(a.assignment.size() == b.assignment.size() && a.centroids.size() == b.centroids.size() &&
                 a.clusters_count == b.clusters_count && a.centroid_width == b.centroid_width,
             kOp, "layer ", i, ": the two inspections are of different batches or models (", a.assignment.size(),
             " and ", b.assignment.size(), " words, ", a.clusters_count, " and ", b.clusters_count, " clusters)");
    std::vector<double> moved(a.centroids.size());
    for (size_t e = 0; e < moved.size(); ++e) moved[e] = b.centroids[e] - a.centroids[e];
    LayerChange c;
    c.stack = a.stack;
    c.layer = a.layer;
    c.churn = metrics::churn(a.assignment, b.assignment, a.clusters_count);
    const int64_t d = a.centroid_width;
    c.centroid_movement = metrics::spread(metrics::row_norms(moved, int64_t(moved.size()) / d, d));
    changes.push_back(c);
  }
  return changes;
}

nlohmann::json to_json(const Inspection& in) {
  nlohmann::json j;
  j["attention"] = in.attention;
  j["batch"] = {{"sequences", in.sequences}, {"length", in.length}};
  j["losses"] = nlohmann::json::object();
  for (size_t l = 0; l < in.losses.size(); ++l) j["losses"][in.losses[l]] = number(in.loss_values[l]);
  j["layers"] = nlohmann::json::array();
  for (const LayerInspection& layer : in.layers) {
    nlohmann::json L;
    L["stack"] = layer.stack;
    L["layer"] = layer.layer;
    L["l1"] = number(layer.l1);
    L["l2"] = number(layer.l2);
    L["w_c_norm"] = number(layer.w_c_norm);
    if (!layer.assignment.empty())  // the first sequence's words
      L["assignment"] = std::vector<int64_t>(layer.assignment.begin(), layer.assignment.begin() + layer.positions);
    L["gradients"] = nlohmann::json::array();
    for (const GradientReport& g : layer.gradients) {
      nlohmann::json G = {{"target", g.target}, {"head", g.head < 0 ? nlohmann::json() : nlohmann::json(g.head)}};
      G["norms"] = nlohmann::json::object();
      G["cosines"] = nlohmann::json::object();
      for (size_t a = 0; a < in.losses.size(); ++a) {
        G["norms"][in.losses[a]] = number(g.comparison.norms[a]);
        for (size_t b = a + 1; b < in.losses.size(); ++b)
          G["cosines"][in.losses[a] + "|" + in.losses[b]] = number(g.comparison.cosines[a][b]);
      }
      L["gradients"].push_back(G);
    }
    L["clusters"] = nlohmann::json::array();
    for (const ClusterReport& c : layer.clusters)
      L["clusters"].push_back({{"head", c.head < 0 ? nlohmann::json() : nlohmann::json(c.head)},
                               {"sizes", c.total.sizes},
                               {"words", c.total.words},
                               {"empty", c.empty},
                               {"largest_share", c.largest_share},
                               {"entropy", summary(c.entropy)},
                               {"unclaimed", c.unclaimed},
                               {"centroid_norms", summary(c.centroid_norms)}});
    L["attention"] = nlohmann::json::array();
    for (const AttentionReport& a : layer.attention)
      L["attention"].push_back({{"head", a.head},
                                {"clustered_topk_mass", a.clustered_topk_mass},
                                {"full_topk_mass", a.full_topk_mass},
                                {"l1_clustered", a.l1_clustered},
                                {"l1_improved", a.l1_improved},
                                {"proposition2", a.proposition2},
                                {"max_excess", a.max_excess}});
    j["layers"].push_back(L);
  }
  j["maps"] = nlohmann::json::array();
  for (const AttentionMap& m : in.maps)
    j["maps"].push_back({{"stack", m.stack}, {"layer", m.layer}, {"head", m.head}, {"sample", m.sample}, {"size", m.size},
                         {"full", m.full}, {"clustered", m.clustered}, {"improved", m.improved}});
  return j;
}

nlohmann::json to_json(const std::vector<LayerChange>& changes) {
  nlohmann::json j = nlohmann::json::array();
  for (const LayerChange& c : changes)
    j.push_back({{"stack", c.stack},
                 {"layer", c.layer},
                 {"churn", c.churn},
                 {"centroid_movement", summary(c.centroid_movement)}});
  return j;
}

}  // namespace tapestry::models
