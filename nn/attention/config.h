/// @file
/// Choosing an attention by a string, so that a model can be trained with one attention and
/// evaluated with another:
///
///   full
///   clustered:clusters=15,bits=63,iterations=10
///   improved-clustered:clusters=15,topk=32
///   neural-clustering:clusters=8
///
/// Keys left out take the defaults below. to_string() prints every key of the type, so that
/// parse(to_string(c)) == c.
#pragma once

#include <string>

#include "core/random.h"
#include "nn/attention/common.h"

namespace tapestry::attention {

/// The attention families (DESIGN §5).
enum class AttentionType { Full, Clustered, ImprovedClustered, NeuralClustering };

// The ranges parse() accepts: clusters 1..65536, bits 1..63, iterations 0..1000, topk 1..2^20.
constexpr int64_t kMaxClusters = 65536;            ///< the most clusters parse() accepts
constexpr int64_t kMaxIterations = 1000;           ///< the most Lloyd iterations parse() accepts
constexpr int64_t kMaxTopk = int64_t{1} << 20;     ///< the largest topk parse() accepts

/// An attention and its settings; a layer runs the one its config names.
struct AttentionConfig {
  AttentionType type = AttentionType::Full;  ///< which attention
  int64_t clusters = 100;  ///< C (clustered, improved-clustered); k blocks (neural-clustering)
  int64_t bits = 63;       ///< R: hash bits, 1..63
  int64_t iterations = 10; ///< L: Lloyd iterations
  int64_t topk = 32;       ///< k: top keys per cluster (improved-clustered)

  /// Throws Error naming the text and what is wrong with it (unknown type or key, a key the type
  /// does not take, a value that is not an integer or is out of range).
  static AttentionConfig parse(const std::string& text);
  /// The config as text, every setting spelled out (parse reads it back).
  std::string to_string() const;
  /// Same type and settings.
  bool operator==(const AttentionConfig& other) const;
};

const char* type_name(AttentionType type);  ///< "full", "clustered", ...

/// Attention of queries q (B, H, N, E) over keys k and values v, as the config says. Clustered types
/// group the queries with `gen`. neural-clustering works on hidden states, not on q/k/v (it sorts
/// the sequence before projecting it), so it is refused here: see nn/attention/neural_clustering.h.
Tensor attend(const AttentionConfig& config, const Tensor& q, const Tensor& k, const Tensor& v,
              const Padding& padding, Causal causal, Generator& gen);

}  // namespace tapestry::attention
