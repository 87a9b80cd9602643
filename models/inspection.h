/// @file
/// Gradient flow through the clustering of a model's layers, and what its clustering does, on one
/// batch (`tapestry inspect`, docs/TUTORIAL-gradient-flow.md). A model is inspected as its stacks of
/// layers (an encoder, and a translator's neural-clustering decoder) in one forward pass:
///
///   - gradients: the gradient each loss sends separately into each layer's tensors, by separate
///     backward passes over one forward (nn/gradient_flow.h). Losses: the task loss and, for a
///     ClusterFormer (neural-clustering), µ·L1 and ν·L2 summed over the layers (ClusterFormer eq. 17;
///     L1 of a later layer reaches an earlier layer's weights through the hidden states and Ĉ).
///     Targets per layer: neural-clustering: the centroids the layer clusters with (the parameter C
///     in layer 0, the previous layer's Ĉ after), W_C, W_Q, W_K, W_V (whole and per head: the head's
///     columns) and the layer's input; clustered types: W_Q, W_K, W_V (whole and per head: the head's
///     rows of the projection) and the input.
///   Padded positions (a stack's lengths) are left out of every figure below.
///   - clusters: per sample, cluster sizes (summed over the batch for the histogram), empty clusters
///     and the largest cluster's share (means over the samples); for neural-clustering also the
///     normalised entropy of each word's column of U (the column rescaled to sum 1: 0 is a word
///     claimed by one centroid, 1 by all alike) and the norms of Ĉ. Per head for the clustered types
///     (each head clusters its own queries), one per layer for neural-clustering (heads share it).
///   - attention (clustered and improved-clustered): per head, over the real queries, the mass A^c
///     gives its cluster's top-k keys (m̂), the mass full attention gives the same keys, and the mean
///     L1 distance of the clustered and the improved-clustered rows from full attention's, with the
///     fraction of queries where Proposition 2 (improved never worse than clustered) holds.
///
/// Shape letters: B batch, N positions, D width, H heads, E head width, C clusters.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tape_graph.h"
#include "metrics/cluster_stats.h"
#include "nn/attention/config.h"
#include "nn/encoder.h"
#include "nn/gradient_flow.h"
#include "nn/module.h"

namespace tapestry::models {

/// A quiet NaN: the value of a figure that was not measured (to_json writes it as null).
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// The gradients the losses send into one target of a layer: the whole tensor, or one head's part.
struct GradientReport {
  std::string target;   ///< "centroids", "w_c", "w_q", "w_k", "w_v", "input"
  int64_t head = -1;    ///< -1: the whole tensor
  nn::GradientComparison comparison;  ///< over Inspection::losses, in order
};

/// What one clustering of a layer does: one head's (clustered types), or the layer's (neural-clustering).
struct ClusterReport {
  int64_t head = -1;             ///< -1: one clustering for all heads (neural-clustering)
  metrics::ClusterSizes total;   ///< sizes summed over the samples
  double empty = 0;              ///< mean over the samples of the number of empty clusters
  double largest_share = 0;      ///< mean over the samples of the largest cluster's share
  metrics::Spread entropy{kNaN, kNaN, kNaN};         ///< neural-clustering: of U's columns, over the real words
  int64_t unclaimed = 0;  ///< neural-clustering: words whose column of U is all 0 (left out of the entropy)
  metrics::Spread centroid_norms{kNaN, kNaN, kNaN};  ///< neural-clustering: ‖Ĉ_i‖ over samples and clusters
};

/// One head's clustered and improved-clustered attention against full attention (clustered types).
struct AttentionReport {
  int64_t head = 0;                ///< the head
  double clustered_topk_mass = 0;  ///< mean m̂: A^c's mass on its cluster's top-k keys
  double full_topk_mass = 0;       ///< mean mass full attention gives the same keys
  double l1_clustered = 0;         ///< mean ‖clustered row − full row‖₁
  double l1_improved = 0;          ///< mean ‖improved row − full row‖₁
  double proposition2 = 0;         ///< fraction of queries with l1_improved ≤ l1_clustered + 1e-5
  double max_excess = 0;           ///< max over queries of l1_improved − l1_clustered (≤ 0 when it holds)
};

constexpr int64_t kMapPositions = 128;  ///< the most queries and keys an AttentionMap shows
/// One head's attention rows for one sample: the first `size` real queries over the first `size` keys
/// (size = min(the sample's length, kMapPositions)), row-major. The rows are over all the sample's
/// keys; the map shows their top-left corner.
struct AttentionMap {
  std::string stack = "encoder";  ///< the stack of the layer (InspectedStack::name)
  ///@{
  /// The layer's index in its stack, the head and the sample shown, and the map's side (size × size).
  int64_t layer = 0, head = 0, sample = 0, size = 0;
  ///@}
  ///@{
  /// The rows of full, clustered and improved-clustered attention, size × size each.
  std::vector<double> full, clustered, improved;
  ///@}
};

/// What the inspection found in one layer.
struct LayerInspection {
  std::string stack = "encoder";  ///< the stack the layer belongs to (InspectedStack::name)
  int64_t layer = 0;              ///< its index in the stack
  ///@{
  /// neural-clustering: this layer's unweighted L1 (eq. 6) and L2 (eq. 11)
  double l1 = kNaN, l2 = kNaN;
  ///@}
  double w_c_norm = kNaN;  ///< neural-clustering: the Frobenius norm of the layer's W_C (L1, L2 grow with it)
  std::vector<GradientReport> gradients;  ///< one per target (and head), see the top of this file
  std::vector<ClusterReport> clusters;  ///< one per head (clustered types), or one (neural-clustering)
  std::vector<AttentionReport> attention;  ///< clustered types
  // For comparing two inspections of the same batch (compare_inspections), neural-clustering only:
  std::vector<int64_t> assignment;  ///< (B·N) each word's cluster; C for padding
  int64_t positions = 0;            ///< N of this stack
  std::vector<double> centroids;    ///< the centroids the layer clustered with, rows of D
  int64_t clusters_count = 0;       ///< C
  int64_t centroid_width = 1;       ///< D
};

/// What inspect returns: the losses on the batch and each inspected layer's figures.
struct Inspection {
  std::string attention;            ///< the config inspected ("encoder: …; decoder: …" for two stacks)
  std::vector<std::string> losses;  ///< "task", and "mu_l1", "nu_l2" for neural-clustering
  std::vector<double> loss_values;  ///< their values on the batch
  ///@{
  /// B, and N of the first stack
  int64_t sequences = 0, length = 0;
  ///@}
  std::vector<LayerInspection> layers;  ///< the inspected layers, stack by stack
  std::vector<AttentionMap> maps;   ///< clustered types: head 0 of sample 0 in every layer
  /// With InspectionOptions::graph: the inspected forward pass as a graph, each edge with the norm
  /// each loss's backward pass sent along it (passes named as `losses`).
  std::optional<TapeGraph> graph;
};

/// Whether inspect records the tape's graph (Inspection::graph).
enum class DrawGraph { No, Yes };

/// The settings of inspect.
struct InspectionOptions {
  ///@{
  /// the weights of L1 and L2 the model trains with
  double mu = 1e-3, nu = 1e-3;
  ///@}
  uint64_t hash_seed = 0;       ///< the clustered types' hashing draws from Generator(hash_seed)
  DrawGraph graph = DrawGraph::No;  ///< whether to record the pass's graph (Inspection::graph)
};

/// The view of an inspection's graph that `tapestry inspect` draws: layers collapsed into one box
/// each, except the first inspected layer (and its attention module), shown op by op.
GraphView inspection_graph_view(const Inspection& inspection);

/// Whether inspect has something to show for a stack with this attention: clusters and, for
/// neural-clustering, clustering losses. "" when it has; otherwise why not.
std::string nothing_to_inspect(const attention::AttentionConfig& config);

/// One stack of a model's layers, and what its layers made in the inspected forward pass.
struct InspectedStack {
  std::string name = "encoder";  ///< "encoder" or "decoder": how the report labels its layers
  /// Its module: an nn::TransformerEncoder (clustered types) or an nn::ClusterFormerEncoder or
  /// nn::ClusterFormerDecoder (neural-clustering).
  std::shared_ptr<nn::Module> module;
  attention::AttentionConfig attention;       ///< its self-attention
  std::vector<nn::EncoderLayerTrace> layers;  ///< what each layer made (nn::EncoderOutput::layers)
  Tensor lengths;                             ///< (B) int64, each sequence's real positions; undefined: no padding
};

/// A model's forward pass over the inspected batch, recorded on the tape: its stacks, and the task
/// loss (0-d) computed from its output.
struct InspectedPass {
  std::vector<InspectedStack> stacks;  ///< the model's stacks (the report keeps their order)
  Tensor task_loss;  ///< 0-d
};

/// Inspects the pass that forward(gen) records (gen: Generator(options.hash_seed)). `model`, the
/// module owning the stacks, is put in eval mode (no dropout) and left there; its parameters'
/// gradients are dropped. Stacks whose attention has nothing to inspect are left out; throws Error
/// when none is left, or when a stack's module is not of its attention's kind.
Inspection inspect(nn::Module& model, const std::function<InspectedPass(Generator& gen)>& forward,
                   const InspectionOptions& options);

/// How the clustering moved between two inspections of the same batch (two checkpoints of one run).
struct LayerChange {
  std::string stack = "encoder";  ///< the stack the layer belongs to
  int64_t layer = 0;  ///< its index in the stack
  double churn = 0;                    ///< the fraction of real words whose cluster differs
  metrics::Spread centroid_movement;  ///< ‖c_after − c_before‖ over the centroid rows
};

/// Per layer, for neural-clustering inspections of one batch with the same shapes; Error otherwise
/// (naming what differs).
std::vector<LayerChange> compare_inspections(const Inspection& before, const Inspection& after);

/// The JSON form documented in docs/INSPECT.md ("layers", "losses", ...); NaN is written as null.
nlohmann::json to_json(const Inspection& inspection);
/// The JSON form of docs/INSPECT.md's compare.layers: one {stack, layer, churn, centroid_movement}
/// per layer; NaN is written as null.
nlohmann::json to_json(const std::vector<LayerChange>& changes);

}  // namespace tapestry::models
