/// @file
/// Attention kinds, and choosing one by a string, so that a model can be trained with one attention
/// and evaluated with another:
///
///   full                              full:shared-qk=1
///   clustered:clusters=15,bits=63,iterations=10
///   improved-clustered:clusters=15,topk=32
///   neural-clustering:clusters=8,losses=cosine
///   oracle-top:topk=32
///   routing:clusters=16
///   reformer:rounds=4,bucket=32
///   local:window=16
///
/// Each kind is one file in nn/attention/kinds/, named after it (local.cpp): a subclass of Kind that declares its name,
/// its settings (key, default, range, help), whether it has a causal form, the state a layer keeps
/// for it, its memory model, what the inspector reads of it, and how it attends. kinds() lists them
/// (nn/attention/config.cpp, one line each). Nothing outside nn/attention asks which kind a config
/// is: it asks the kind (has_causal_form, form, score_elements, ...), so that a new kind is one file.
///
/// Keys left out take the kind's defaults. to_string() prints every key of the kind (a 0/1 flag
/// only when it is not its default, so that plain full attention stays "full"), so that
/// parse(to_string(c)) == c.
///
/// Shared queries and keys (shared-qk=1; full:shared-qk=1 is the clustered-attention paper's
/// "shared-full"; reformer always shares): the keys are the query projection of the key positions,
/// normalised to unit length, k_j = q_j / ‖q_j‖ (Kitaev et al. 2020, §2, "Shared-QK Transformer").
/// MultiheadAttention projects the keys with its query projection; attend() normalises them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/config_text.h"
#include "core/random.h"
#include "nn/attention/common.h"

namespace tapestry::attention {

class Kind;

/// One setting of a kind, in the key grammar every config shares (core/config_text.h): an integer
/// in [min, max], or, when `names` is not empty, one of those names (stored as its index).
using Setting = ConfigKey;

/// An attention kind and its settings; a layer runs the one its config names. The default is full
/// attention.
class AttentionConfig {
 public:
  AttentionConfig();
  /// Throws Error naming the text and what is wrong with it (unknown kind or key, a key the kind
  /// does not take, a value that is not an integer or one of the key's names, or is out of range).
  static AttentionConfig parse(const std::string& text);
  /// The config as text, every setting spelled out (parse reads it back).
  std::string to_string() const;
  /// Same kind and settings.
  bool operator==(const AttentionConfig& other) const;

  const Kind& kind() const { return *kind_; }  ///< the kind: ask it what the attention can do
  const std::string& name() const;  ///< the kind's name: "full", "clustered", ...
  /// The value of `key`; throws Error when the kind has no such setting.
  int64_t get(const std::string& key) const;
  /// Whether the kind has the setting `key`.
  bool has(const std::string& key) const;
  /// This config with `key` set to `value`, range-checked like parse.
  AttentionConfig with(const std::string& key, int64_t value) const;

 private:
  const Kind* kind_;
  std::vector<double> values_;  // one per kind().settings(), in that order (integers, or a name's index)
};

/// Where a kind attends. Heads: over the projected queries, keys and values of
/// nn::MultiheadAttention. HiddenStates: over the hidden states before any projection (neural
/// clustering sorts the sequence before projecting it), as a ClusterFormer layer
/// (nn/clusterformer.h) that also returns clustering losses and centroids.
enum class Form { Heads, HiddenStates };

/// The tensors a layer keeps for its attention between calls, by buffer name (routing's centroids).
using State = std::map<std::string, Tensor>;

/// An attention kind: subclass it in a file of its own in nn/attention/kinds/ and list it in kinds().
class Kind {
 public:
  virtual ~Kind() = default;
  virtual std::string name() const = 0;       ///< what configs call it: "local"
  virtual std::string summary() const = 0;    ///< one phrase for --help, with its paper
  virtual std::vector<Setting> settings() const { return {}; }  ///< its keys, in the order to_string prints them
  virtual Form form() const { return Form::Heads; }  ///< where it attends (see Form)
  /// Whether it has a causal form (a decoder's self-attention may use it).
  virtual bool has_causal_form() const = 0;
  /// Whether a causal decoder may attend over the keys it has cached so far with no mask: a query's
  /// output depends on the earlier keys alone, not on how later positions cluster or route. Kinds
  /// that say no decode by re-running the prefix.
  virtual bool decodes_incrementally() const { return false; }
  /// Whether the keys are the normalised query projection (shared-qk=1 for the kinds that take it).
  virtual bool shares_qk(const AttentionConfig& config) const { return config.has("shared-qk") && config.get("shared-qk"); }
  /// Attention scores each (sequence, head) holds at length n, for the memory check and the
  /// benchmark: n² for full attention.
  virtual double score_elements(const AttentionConfig& config, int64_t n) const = 0;
  /// Whether a benchmark at length N gives it ⌈√N⌉ clusters when the text sets none (the kinds whose
  /// cost is balanced at C = √N); otherwise the kind's default.
  virtual bool clusters_follow_length() const { return false; }
  /// Why the gradient-flow inspector (models/inspection.h) has nothing to read in this kind; empty
  /// when it reads the kind's clusters.
  virtual std::string not_inspected() const = 0;
  /// The state a layer of H heads of width E keeps (buffers, saved in checkpoints); none by default.
  virtual State initial_state(const AttentionConfig& /*config*/, int64_t /*heads*/, int64_t /*head_dim*/,
                              Generator& /*gen*/, Options /*options*/) const {
    return {};
  }
  /// Attention of q (B, H, N, E) over k (B, H, S, E) and v (B, H, S, M) -> (B, H, N, M). The keys
  /// arrive normalised when shares_qk. Kinds of Form::HiddenStates throw.
  virtual Tensor attend(const AttentionConfig& config, const Tensor& q, const Tensor& k, const Tensor& v,
                        const Padding& padding, Causal causal, Generator& gen, const State& state) const = 0;
  /// After a forward in train mode: the state's new values (no gradient); by default none changes.
  virtual void update_state(const AttentionConfig& /*config*/, const Tensor& /*q*/, const Tensor& /*k*/,
                            const Padding& /*padding*/, State& /*state*/) const {}
};

/// Every kind, in the order --help lists them.
const std::vector<const Kind*>& kinds();
/// The names of the kinds that pass `keep`, joined by ", ": for refusals that say what is allowed.
std::string kind_names(bool (*keep)(const Kind&));
/// Every kind with its settings and defaults on one line, for --help.
std::string kinds_help();
/// Every kind on lines of its own: its name and summary, whether it has a causal form, and each
/// setting with its default, range and help (`tapestry attentions`).
std::string describe_kinds();

/// neural-clustering's default number of clusters k: ClusterFormer's k = 3 (§4.1, §4.3).
constexpr int64_t kNeuralClusteringClusters = 3;
/// What a neural-clustering config text without the key `clusters` meant before neural-clustering had
/// a default of its own (kNeuralClusteringClusters): the default every kind shared.
constexpr int64_t kLegacyNeuralClusteringClusters = 100;
/// What a neural-clustering config text without the key `losses` meant before the key existed (the
/// only form there was, "projected"). Checkpoints that record such a text load with it.
constexpr const char* kLegacyClusteringLosses = "projected";

/// A config text recorded before neural-clustering had the key `losses` and a default number of
/// clusters of its own, as it reads today: a neural-clustering text gets the keys it lacks with what
/// they meant then (clusters=100, losses=projected) appended; any other text is returned unchanged.
std::string with_legacy_defaults(const std::string& text);

/// Whether the config's keys are the normalised query projection (shared-qk=1, or reformer).
bool shares_qk(const AttentionConfig& config);

/// Attention of queries q (B, H, N, E) over keys k and values v, as the config says, for the kinds
/// that keep no state. Clustered kinds group the queries with `gen`. A shared-QK config takes k as
/// the query projection of the key positions and normalises it here (unit_rows). neural-clustering
/// works on hidden states, not on q/k/v, and is refused here: see nn/attention/neural_clustering.h;
/// so is routing, whose centroids are a layer's state: see nn/attention/routing.h.
Tensor attend(const AttentionConfig& config, const Tensor& q, const Tensor& k, const Tensor& v,
              const Padding& padding, Causal causal, Generator& gen, const State& state = {});

}  // namespace tapestry::attention
