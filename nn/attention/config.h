/// @file
/// Choosing an attention by a string, so that a model can be trained with one attention and
/// evaluated with another:
///
///   full                              full:shared-qk=1
///   clustered:clusters=15,bits=63,iterations=10
///   improved-clustered:clusters=15,topk=32
///   neural-clustering:clusters=8,losses=cosine
///   oracle-top:topk=32
///   routing:clusters=16
///   reformer:rounds=4,bucket=32
///
/// Keys left out take the defaults below. to_string() prints every key of the type (the flag
/// shared-qk only when it is on, so that plain full attention stays "full"), so that
/// parse(to_string(c)) == c.
///
/// Shared queries and keys (shared-qk=1; full:shared-qk=1 is the clustered-attention paper's
/// "shared-full"; reformer always shares): the keys are the query projection of the key positions,
/// normalised to unit length, k_j = q_j / ‖q_j‖ (Kitaev et al. 2020, §2, "Shared-QK Transformer").
/// MultiheadAttention projects the keys with its query projection; attend() normalises them. Full,
/// clustered, improved-clustered, oracle-top and routing take the flag, so that a shared-QK model
/// can be evaluated with each (the paper's Table 1 approximates shared-full "by setting keys to be
/// equal to queries"); neural-clustering has projections of its own and does not.
#pragma once

#include <string>

#include "core/random.h"
#include "nn/attention/common.h"
#include "nn/attention/neural_clustering.h"

namespace tapestry::attention {

/// neural-clustering's default number of clusters k: ClusterFormer's k = 3 (§4.1, §4.3). The
/// other types default to AttentionConfig::clusters.
constexpr int64_t kNeuralClusteringClusters = 3;

/// What a neural-clustering config text without the key `losses` meant before the key existed: the
/// only form there was. Checkpoints that record such a text load with it (with_legacy_defaults).
constexpr ClusteringLosses kLegacyClusteringLosses = ClusteringLosses::Projected;
/// What a neural-clustering config text without the key `clusters` meant before neural-clustering had
/// a default of its own (kNeuralClusteringClusters): the default every type shared.
constexpr int64_t kLegacyNeuralClusteringClusters = 100;

/// The attention families (DESIGN §5).
enum class AttentionType { Full, Clustered, ImprovedClustered, NeuralClustering, OracleTop, Routing, Reformer };

// The ranges parse() accepts: clusters 1..65536, bits 1..63, iterations 0..1000, topk and bucket
// 1..2^20, rounds 1..64.
constexpr int64_t kMaxClusters = 65536;            ///< the most clusters parse() accepts
constexpr int64_t kMaxRounds = 64;                 ///< the most hashing rounds parse() accepts
constexpr int64_t kMaxIterations = 1000;           ///< the most Lloyd iterations parse() accepts
constexpr int64_t kMaxTopk = int64_t{1} << 20;     ///< the largest topk parse() accepts

/// An attention and its settings; a layer runs the one its config names.
struct AttentionConfig {
  AttentionType type = AttentionType::Full;  ///< which attention
  /// C (clustered, improved-clustered, routing); k blocks (neural-clustering, whose default is
  /// kNeuralClusteringClusters)
  int64_t clusters = 100;
  int64_t bits = 63;       ///< R: hash bits, 1..63
  int64_t iterations = 10; ///< L: Lloyd iterations
  int64_t topk = 32;       ///< k: top keys per cluster (improved-clustered), per query (oracle-top)
  int64_t shared_qk = 0;   ///< 1: keys are the normalised query projection (all but neural-clustering)
  int64_t rounds = 4;      ///< hashing rounds (reformer)
  int64_t bucket = 32;     ///< W, bucket and chunk size (reformer)
  /// The form of the clustering losses (neural-clustering; "losses=projected|printed|cosine"). A
  /// config text written before the key existed means projected: see kLegacyClusteringLosses.
  ClusteringLosses losses = ClusteringLosses::Cosine;

  /// Throws Error naming the text and what is wrong with it (unknown type or key, a key the type
  /// does not take, a value that is not an integer or is out of range).
  static AttentionConfig parse(const std::string& text);
  /// The config as text, every setting spelled out (parse reads it back).
  std::string to_string() const;
  /// Same type and settings.
  bool operator==(const AttentionConfig& other) const;
};

const char* type_name(AttentionType type);  ///< "full", "clustered", ...

/// A config text recorded before neural-clustering had the key `losses` and a default number of
/// clusters of its own, as it reads today: a neural-clustering text gets the keys it lacks with what
/// they meant then (clusters=100, losses=projected: kLegacyNeuralClusteringClusters,
/// kLegacyClusteringLosses) appended; any other text is returned unchanged.
std::string with_legacy_defaults(const std::string& text);

/// Whether the config's keys are the normalised query projection (shared-qk=1, or reformer).
bool shares_qk(const AttentionConfig& config);

/// Attention of queries q (B, H, N, E) over keys k and values v, as the config says. Clustered types
/// group the queries with `gen`. A shared-QK config takes k as the query projection of the key
/// positions and normalises it here (unit_rows). neural-clustering works on hidden states, not on q/k/v (it sorts
/// the sequence before projecting it), so it is refused here: see nn/attention/neural_clustering.h;
/// so is routing, whose centroids are a layer's state: see nn/attention/routing.h.
Tensor attend(const AttentionConfig& config, const Tensor& q, const Tensor& k, const Tensor& v,
              const Padding& padding, Causal causal, Generator& gen);

}  // namespace tapestry::attention
