#include "models/inspection.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "core/autograd.h"
#include "core/error.h"
#include "nn/attention/clustered.h"
#include "nn/clusterformer.h"
#include "ops/elementwise.h"
#include "ops/shape.h"

namespace tapestry::models {

using attention::AttentionType;

namespace {

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
  const int64_t B = t.u.size(0), C = t.u.size(1), N = t.u.size(2), D = t.updated_centroids.size(2);
  const std::vector<int64_t> ids = t.assignment.to_vector<int64_t>();
  ClusterReport r = cluster_report(ids, B, N, C, -1);
  const std::vector<double> u = t.u.to_vector<double>();  // (B, C, N)
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
  r.centroid_norms = metrics::spread(metrics::row_norms(t.updated_centroids.to_vector<double>(), B * C, D));
  return r;
}

// Per head: the clustered rows against full attention's, over the real queries (no padding here).
std::vector<AttentionReport> attention_reports(const attention::AttentionRows& rows, AttentionMap* map) {
  const int64_t B = rows.full.size(0), H = rows.full.size(1), N = rows.full.size(2), S = rows.full.size(3);
  const std::vector<double> full = rows.full.to_vector<double>(), clustered = rows.clustered.to_vector<double>(),
                            improved = rows.improved.to_vector<double>();
  const std::vector<bool> in_top = rows.in_top.to_vector<bool>();
  std::vector<AttentionReport> reports;
  for (int64_t h = 0; h < H; ++h) {
    AttentionReport r;
    r.head = h;
    r.max_excess = -std::numeric_limits<double>::infinity();
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < N; ++i) {
        const size_t row = size_t(((b * H + h) * N + i) * S);
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
    const double queries = double(B * N);
    r.l1_clustered /= queries, r.l1_improved /= queries, r.proposition2 /= queries;
    r.clustered_topk_mass /= queries, r.full_topk_mass /= queries;
    reports.push_back(r);
  }
  if (map) {  // head 0 of sample 0
    map->head = map->sample = 0;
    map->size = N;
    map->full.assign(full.begin(), full.begin() + N * S);
    map->clustered.assign(clustered.begin(), clustered.begin() + N * S);
    map->improved.assign(improved.begin(), improved.begin() + N * S);
  }
  return reports;
}

void inspect_neural(nn::ClusterFormerEncoder& encoder, const SequenceTagger::Output& out, const Tensor& task,
                    const InspectionOptions& o, Inspection& result) {
  Tensor l1 = out.layers[0].clustering_loss, l2 = out.layers[0].sorting_loss;
  for (size_t i = 1; i < out.layers.size(); ++i) l1 = l1 + out.layers[i].clustering_loss, l2 = l2 + out.layers[i].sorting_loss;
  const std::vector<Tensor> losses = {task, l1 * o.mu, l2 * o.nu};
  result.losses = {"task", "mu_l1", "nu_l2"};
  for (const Tensor& l : losses) result.loss_values.push_back(l.item<double>());

  std::vector<Tensor> targets;  // per layer: centroids, w_c, w_q, w_k, w_v, input
  for (size_t i = 0; i < out.layers.size(); ++i) {
    const nn::ClusterFormerEncoderLayer& layer = *(*encoder.layers)[i];
    targets.insert(targets.end(), {out.layers[i].centroids, layer.w_c, layer.w_q, layer.w_k, layer.w_v, out.layers[i].input});
  }
  const std::vector<std::vector<Tensor>> grads = nn::separate_gradients(losses, targets);
  const int64_t heads = (*encoder.layers)[0]->options().heads;
  for (size_t i = 0; i < out.layers.size(); ++i) {
    const nn::EncoderLayerTrace& t = out.layers[i];
    LayerInspection layer;
    layer.layer = int64_t(i);
    layer.l1 = t.clustering_loss.item<double>();
    layer.l2 = t.sorting_loss.item<double>();
    const size_t first = 6 * i;
    report_target(layer, "centroids", grads[first], heads, -1);
    report_target(layer, "w_c", grads[first + 1], heads, -1);
    report_target(layer, "w_q", grads[first + 2], heads, 1);  // (D, H·E): a head's columns
    report_target(layer, "w_k", grads[first + 3], heads, 1);
    report_target(layer, "w_v", grads[first + 4], heads, 1);
    report_target(layer, "input", grads[first + 5], heads, -1);
    layer.clusters.push_back(neural_cluster_report(t));
    layer.assignment = t.assignment.to_vector<int64_t>();
    layer.centroids = t.centroids.to_vector<double>();
    layer.clusters_count = t.u.size(1);
    layer.centroid_width = t.centroids.size(-1);
    result.layers.push_back(std::move(layer));
  }
}

void inspect_clustered(nn::TransformerEncoder& encoder, const SequenceTagger::Output& out, const Tensor& task,
                       const attention::AttentionConfig& config, const InspectionOptions& o, Inspection& result) {
  result.losses = {"task"};
  result.loss_values = {task.item<double>()};
  std::vector<Tensor> targets;  // per layer: w_q, w_k, w_v, input
  for (size_t i = 0; i < out.layers.size(); ++i) {
    const nn::MultiheadAttention& attn = *(*encoder.layers)[i]->self_attn;
    targets.insert(targets.end(), {attn.q_proj->weight, attn.k_proj->weight, attn.v_proj->weight, out.layers[i].input});
  }
  const std::vector<std::vector<Tensor>> grads = nn::separate_gradients({task}, targets);
  Generator gen(o.hash_seed);
  for (size_t i = 0; i < out.layers.size(); ++i) {
    nn::MultiheadAttention& attn = *(*encoder.layers)[i]->self_attn;
    const int64_t heads = attn.options().heads;
    LayerInspection layer;
    layer.layer = int64_t(i);
    report_target(layer, "w_q", grads[4 * i], heads, 0);  // (out, in): a head's rows
    report_target(layer, "w_k", grads[4 * i + 1], heads, 0);
    report_target(layer, "w_v", grads[4 * i + 2], heads, 0);
    report_target(layer, "input", grads[4 * i + 3], heads, -1);

    NoGradGuard no_grad;
    const Tensor y = out.layers[i].attention_input.detach();
    const Tensor q = attn.project_queries(y, Tensor());
    Tensor k = attn.project_keys_values(y, y, Tensor()).keys;
    if (attention::shares_qk(config)) k = attention::unit_keys(k);
    const attention::QueryClusters clusters =
        attention::cluster_queries(q, Tensor(), {config.clusters, config.bits, config.iterations}, gen);
    const std::vector<int64_t> ids = clusters.ids.to_vector<int64_t>();  // (B, H, N)
    const int64_t B = q.size(0), N = q.size(2);
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<int64_t> head_ids;
      for (int64_t b = 0; b < B; ++b)
        head_ids.insert(head_ids.end(), ids.begin() + (b * heads + h) * N, ids.begin() + (b * heads + h + 1) * N);
      layer.clusters.push_back(cluster_report(head_ids, B, N, clusters.count, h));
    }
    AttentionMap map;
    map.layer = int64_t(i);
    layer.attention = attention_reports(attention::attention_rows(q, k, clusters, config.topk), &map);
    result.maps.push_back(std::move(map));
    result.layers.push_back(std::move(layer));
  }
}

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json summary(const metrics::Spread& s) {
  return {{"min", number(s.min)}, {"mean", number(s.mean)}, {"max", number(s.max)}};
}

}  // namespace

std::string nothing_to_inspect(const attention::AttentionConfig& config) {
  switch (config.type) {
    case AttentionType::Clustered:
    case AttentionType::ImprovedClustered:
    case AttentionType::NeuralClustering:
      return "";
    case AttentionType::Full:
      return "full attention has no clusters and no clustering losses: every query attends to every key and "
             "the task loss is the only loss";
    default:
      return std::string(attention::type_name(config.type)) +
             " attention is not inspected: only clustered, improved-clustered and neural-clustering attention";
  }
}

Inspection inspect_tagger(SequenceTagger& model, const Tensor& tokens,
                          const std::function<Tensor(const Tensor& logits)>& task_loss, const InspectionOptions& o) {
  const attention::AttentionConfig& config = model.options().attention;
  const std::string why = nothing_to_inspect(config);
  TP_CHECK(why.empty(), kOp, "nothing to inspect in a model with '", config.to_string(), "' attention: ", why);
  TP_CHECK(tokens.defined() && tokens.dim() == 2 && tokens.dtype() == DType::Int64, kOp,
           "tokens must be (B, N) int64, got ", tokens.defined() ? to_string(tokens.shape()) : "undefined");
  model.eval();
  for (Tensor& p : model.parameters()) p.zero_grad();
  Generator gen(o.hash_seed);
  const SequenceTagger::Output out = model.forward(tokens, Tensor(), gen);
  const Tensor task = task_loss(out.logits);
  Inspection result;
  result.attention = config.to_string();
  result.sequences = tokens.size(0);
  result.length = tokens.size(1);
  if (auto neural = std::dynamic_pointer_cast<nn::ClusterFormerEncoder>(model.encoder)) {
    inspect_neural(*neural, out, task, o, result);
  } else {
    auto transformer = std::dynamic_pointer_cast<nn::TransformerEncoder>(model.encoder);
    TP_CHECK(transformer != nullptr, kOp, "the model's encoder is neither a ClusterFormer nor a Transformer");
    inspect_clustered(*transformer, out, task, config, o, result);
  }
  for (Tensor& p : model.parameters()) p.zero_grad();
  return result;
}

std::vector<LayerChange> compare_inspections(const Inspection& before, const Inspection& after) {
  TP_CHECK(before.layers.size() == after.layers.size(), kOp, "the two models have ", before.layers.size(), " and ",
           after.layers.size(), " layers");
  std::vector<LayerChange> changes;
  for (size_t i = 0; i < before.layers.size(); ++i) {
    const LayerInspection &a = before.layers[i], &b = after.layers[i];
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
    c.layer = int64_t(i);
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
    L["layer"] = layer.layer;
    L["l1"] = number(layer.l1);
    L["l2"] = number(layer.l2);
    if (!layer.assignment.empty())  // the first sequence's words
      L["assignment"] = std::vector<int64_t>(layer.assignment.begin(), layer.assignment.begin() + in.length);
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
    j["maps"].push_back({{"layer", m.layer}, {"head", m.head}, {"sample", m.sample}, {"size", m.size},
                         {"full", m.full}, {"clustered", m.clustered}, {"improved", m.improved}});
  return j;
}

nlohmann::json to_json(const std::vector<LayerChange>& changes) {
  nlohmann::json j = nlohmann::json::array();
  for (const LayerChange& c : changes)
    j.push_back({{"layer", c.layer}, {"churn", c.churn}, {"centroid_movement", summary(c.centroid_movement)}});
  return j;
}

}  // namespace tapestry::models
