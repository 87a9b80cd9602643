#include "nn/attention/neural_clustering.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "ops/attention.h"
#include "ops/autocast.h"
#include "ops/creation.h"
#include "ops/common.h"
#include "ops/elementwise.h"
#include "ops/index.h"
#include "ops/matmul.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/softmax.h"
#include "ops/sort.h"

namespace tapestry::attention {

namespace {

constexpr const char* kOp = "neural_clustering_attention";
constexpr const char* kClusterOp = "neural_clustering";

std::string describe(const Tensor& t) { return detail::concat(t.dtype(), " ", to_string(t.shape())); }

void check_matrix(const char* op, const char* name, const Tensor& t, int64_t rows, int64_t cols, const Tensor& x) {
  TP_CHECK(t.defined(), op, name, " is undefined");
  TP_CHECK(t.dim() == 2 && t.size(0) == rows && (cols < 0 || t.size(1) == cols), op, name,
           " must have shape (", rows, ", ", cols < 0 ? std::string("any") : std::to_string(cols), "), got ",
           to_string(t.shape()));
  TP_CHECK(t.dtype() == x.dtype(), op, name, " must have x's dtype ", x.dtype(), ", got ", describe(t));
  TP_CHECK(t.device() == x.device(), op, name, " is on ", t.device(), " but x is on ", x.device());
}

void check_heads(const char* name, const Tensor& w, int64_t heads) {
  TP_CHECK(w.size(1) >= heads && w.size(1) % heads == 0, kOp, "heads = ", heads, " must divide the width ",
           w.size(1), " of ", name, " ", to_string(w.shape()), " (at least one dim per head)");
}

// What the clustering alone needs: x and the centroids.
void check_clustering_inputs(const char* op, const Tensor& x, const Tensor& centroids) {
  TP_CHECK(x.defined(), op, "x is undefined");
  TP_CHECK(x.dim() == 3, op, "x must be (B, N, D), got shape ", to_string(x.shape()));
  TP_CHECK(x.dtype() == DType::Float32 || x.dtype() == DType::Float64, op,
           "x must be float32 or float64, got ", describe(x));
  TP_CHECK(x.size(0) >= 1 && x.size(1) >= 1, op,
           "x must hold at least one sample of at least one word (B, N ≥ 1), got shape ", to_string(x.shape()));
  const int64_t batch = x.size(0), d = x.size(2);

  TP_CHECK(centroids.defined(), op, "centroids is undefined");
  const bool shaped = (centroids.dim() == 2 && centroids.size(1) == d) ||
                      (centroids.dim() == 3 && centroids.size(0) == batch && centroids.size(2) == d);
  TP_CHECK(shaped, op, "centroids must be (C, D) or (B, C, D) with B = ", batch, ", D = ", d, ", got shape ",
           to_string(centroids.shape()));
  TP_CHECK(centroids.size(-2) >= 1, op, "needs at least one cluster, got centroids of shape ",
           to_string(centroids.shape()));
  TP_CHECK(centroids.dtype() == x.dtype(), op, "centroids must have x's dtype ", x.dtype(), ", got ",
           describe(centroids));
  TP_CHECK(centroids.device() == x.device(), op, "centroids are on ", centroids.device(), " but x is on ",
           x.device());
}

void check_inputs(const Tensor& x, const Tensor& centroids, const NeuralClusteringWeights& w, int64_t heads) {
  check_clustering_inputs(kOp, x, centroids);
  const int64_t d = x.size(2);
  check_matrix(kOp, "w_c", w.w_c, d, d, x);
  TP_CHECK(heads >= 1, kOp, "heads must be at least 1, got ", heads);
  check_matrix(kOp, "w_q", w.w_q, d, -1, x);
  check_heads("w_q", w.w_q, heads);
  check_matrix(kOp, "w_k", w.w_k, d, w.w_q.size(1), x);
  check_matrix(kOp, "w_v", w.w_v, d, -1, x);
  check_heads("w_v", w.w_v, heads);
  check_matrix(kOp, "w_o", w.w_o, w.w_v.size(1), d, x);
}

// The previous block of each block along `dim`, cyclically: y[i] = t[(i − 1) mod size]. The first
// block's previous block is the last one (eq. 11 pairs Ĉ_1 with Ĉ_C for the same reason).
Tensor previous_block(const Tensor& t, int64_t dim) {
  const int64_t n = t.size(dim);
  if (n == 1) return t;
  return concat({slice(t, dim, n - 1, n), slice(t, dim, 0, n - 1)}, dim);
}

// (..., C, W, ...) → (..., C, 2W, ...): the previous block then the block itself, for each block
// along `dim` (eq. 8's K^O_i = K^S((i − 2)W : iW]).
Tensor with_previous_block(const Tensor& t, int64_t dim) { return concat({previous_block(t, dim), t}, dim + 1); }

// Each sample's rows in the order `index` gives: y[b, j] = t[b, index[b, j]] for t (B, R, F) and index
// (B, K) int64. index_select over the flattened rows: its index has B·K elements where gather's
// would have B·K·F (kept for the backward, in int64), and its backward is index_add.
Tensor rows_of(const Tensor& t, const Tensor& index) {
  const int64_t B = t.size(0), R = t.size(1), F = t.size(2), K = index.size(1);
  const Tensor first_row = reshape(arange(0, double(B * R), double(R), {DType::Int64, t.device()}), {B, 1});
  return reshape(index_select(reshape(t, {B * R, F}), 0, reshape(index + first_row, {B * K})), {B, K, F});
}

// Padding zeroed, so that whatever it holds cannot reach a real word: masking alone leaves products
// 0·value in U X W_C and in the attention, NaN when the value is inf or NaN.
Tensor zero_padding(const Tensor& x, const Tensor& keep, const Tensor& lengths) {
  return lengths.defined() ? where(unsqueeze(keep, 2), x, zeros({}, x.options())) : x;
}

// Products with the words projected, X W (X (B, N, D), W (D, D), an undefined W the identity),
// re-associated around W so that X W, an (N, D) tensor, is never formed and kept for a backward: what
// the products keep is X (which the attention's projections keep anyway) and (C, D) matrices.
struct ProjectedWords {
  Tensor x, w;
  // M (X W)ᵀ = (M Wᵀ) Xᵀ for M (..., C, D): (B, C, N)
  Tensor times_transposed(const Tensor& m) const {
    return matmul(w.defined() ? matmul(m, transpose(w, 0, 1)) : m, transpose(x, 1, 2));
  }
  // U (X W) = (U X) W for U (B, C, N): (B, C, D)
  Tensor left_times(const Tensor& u) const {
    const Tensor ux = matmul(u, x);
    return w.defined() ? matmul(ux, w) : ux;
  }
  // ‖X_j W‖² (B, N), X W formed again in the backward (ops/matmul.h)
  Tensor squared_norms() const { return w.defined() ? squared_row_norms_of_product(x, w) : sum(x * x, {2}); }
};

// φ(word_j, Ĉ_{cluster_j}) for each word j → (B, N), c_hat (B, C, D), cluster (B, N) int64 in [0, C):
// the inner product, or the cosine, computed as (a · b) / (max(‖a‖, 1e-12) max(‖b‖, 1e-12)) so that no
// unit rows are kept for the backward. Each word's own centroid row is never formed: its inner
// products with every centroid, Ĉ wordᵀ (B, C, N), are computed and its own one taken (gather's
// backward keeps the index alone), and the centroids' inverse norms (B, C) are picked likewise.
Tensor similarity_to_own_centroid(const ProjectedWords& words, const Tensor& c_hat, const Tensor& cluster,
                                  bool cosine) {
  const Tensor dot = squeeze(gather(words.times_transposed(c_hat), 1, unsqueeze(cluster, 1)), 1);  // (B, N)
  if (!cosine) return dot;
  const double no_limit = std::numeric_limits<double>::infinity();
  const auto inverse_norm = [no_limit](const Tensor& squared) { return rsqrt(clamp(squared, 1e-24, no_limit)); };
  return dot * inverse_norm(words.squared_norms()) * gather(inverse_norm(sum(c_hat * c_hat, {2})), 1, cluster);
}

// §3.1 and the losses, on words whose padding is zeroed; keep (B, N) bool is true at real words.
NeuralClustering cluster_words(const Tensor& x, const Tensor& centroids, const Tensor& w_c, const Tensor& keep,
                               ClusteringLosses losses) {
  const int64_t C = centroids.size(-2);
  const Device device = x.device();
  const Tensor zero = zeros({}, x.options());
  // eq. 2: U_ij = exp φ(C_i, X_j W_C) / Σ_j' exp φ(C_i, X_j' W_C), φ the inner product; the sum runs
  // over the real words only (padded columns of U are exactly 0). An undefined W_C is the identity.
  // X W_C is never formed: C (X W_C)ᵀ runs as (C W_Cᵀ) Xᵀ, and eq. 3 as (U X) W_C (ProjectedWords).
  const ProjectedWords projected{x, w_c};
  const Tensor u = softmax(projected.times_transposed(centroids), unsqueeze(keep, 1));  // (B, C, N)
  // eq. 3: Ĉ_i = Σ_j U_ij X_j W_C
  const Tensor c_hat = projected.left_times(u);  // (B, C, D)
  // eq. 4: I_j = argmax_i U_ij (the first maximum on a tie). Padding gets the virtual cluster C,
  // fixed, so that it sorts behind every real word and its values decide nothing.
  // A column of U that holds a NaN has no maximum (a NaN word makes all of its sample's U NaN, a NaN
  // centroid its row), and argmax would point at the first NaN, silently a cluster: such a word gets
  // no cluster, −1, and NaN in L1 (and a NaN output row in the attention), so the NaN is seen.
  // Only tested for NaN, never differentiated: detached, so the tape does not save U for it.
  const Tensor column_max = max(u.detach(), {1});                                               // (B, N)
  const Tensor no_cluster = logical_and(keep, ne(column_max, column_max));                      // (B, N) bool
  const Tensor assignment = where(keep, where(no_cluster, full({}, -1.0, {DType::Int64, device}), argmax(u, 1)),
                                  full({}, double(C), {DType::Int64, device}));                 // (B, N)
  // eq. 6: L1 = −(1/N) Σ_j φ(word_j, Ĉ_{I_j}), in the form `losses` picks:
  //   projected: word_j = X_j W_C. The paper prints φ(X_j, Ĉ_{I_j}), but Ĉ is a combination of the
  //     rows X_j W_C (eq. 3), eq. 2 compares centroids with X_j W_C, and the paper asks φ to be
  //     "consistent with Eq. 2": we read X_j as the word in that projected space;
  //   printed: word_j = X_j, as eq. 6 prints it (X_j and Ĉ_{I_j} then live in two spaces that merely
  //     share the size D);
  //   cosine: φ(a, b) = a·b / (‖a‖‖b‖) on word_j = X_j W_C, in L1 and in L2. A departure from the
  //     paper: with the inner product both losses are unbounded below (Ĉ scales with W_C, so L1 and
  //     L2 grow quadratically with it) and, weighted into the objective, they outgrow the task's loss
  //     (docs/RESULTS.md); each cosine term lies in [−1, 1]. Eq. 2's similarity (the clustering
  //     itself) is unchanged.
  // The sum is over real words and N is the sample's length (a sample of length 0 adds 0); L1 is
  // then averaged over the batch.
  const bool cosine = losses == ClusteringLosses::Cosine;
  const ProjectedWords word{x, losses == ClusteringLosses::Printed ? Tensor() : w_c};  // X, or X W_C
  const Tensor assigned = logical_and(keep, logical_not(no_cluster));                              // (B, N)
  const Tensor cluster = where(assigned, assignment, zeros({}, {DType::Int64, device}));          // (B, N)
  const Tensor phi = similarity_to_own_centroid(word, c_hat, cluster, cosine);  // (B, N)
  const Tensor similarity = where(no_cluster, full({}, std::numeric_limits<double>::quiet_NaN(), x.options()),
                                  where(keep, phi, zero));                                         // (B, N)
  const double no_limit = std::numeric_limits<double>::infinity();
  const Tensor words = clamp(sum(to(keep, x.dtype()), {1}), 1.0, no_limit);  // (B,) real words, at least 1
  const Tensor clustering_loss = -mean(sum(similarity, {1}) / words);
  // eq. 11: L2 = −(1/C)(Σ_{i=2..C} φ(Ĉ_i, Ĉ_{i−1}) + φ(Ĉ_1, Ĉ_C)) = −(1/C) Σ_i φ(Ĉ_i, Ĉ_{(i−1) mod C}),
  // φ the inner product (projected, printed) or the cosine; for C = 1 that is −|Ĉ_1|², or −1.
  const Tensor centroid = cosine ? unit_rows(c_hat) : c_hat;  // (B, C, D)
  const Tensor sorting_loss = -mean(sum(centroid * previous_block(centroid, 1), {1, 2})) * (1.0 / double(C));

  return {u, c_hat, assignment, clustering_loss, sorting_loss};
}

// Eq. 9 over the blocks of the sorted sequence: Z^O_i = softmax(Q^O_i K^O_iᵀ / √E) V^O_i for each
// block i and head, the keys K^O_i being block i − 1's and block i's (eq. 8, the first block's previous
// the last, cyclically). A query sees the keys in slots that hold a real word (not padding, not an
// empty slot) and, with Causal::Yes (appendix B, eq. 12–13), only those whose original position is
// not after its own: M_uv = [I^K_v ≤ I^Q_u]. Eq. 14 as printed multiplies the scores by M, which only
// sets a masked score to 0 (weight e⁰ > 0), so information would still flow from later words; we
// exclude the masked keys from the softmax instead (probability exactly 0, no gradient). A row that
// sees nothing (an empty slot's) gives zeros. q, k, v: the sorted slots projected, (B, C·W, H·F);
// slot_real (B, C·W) bool; position (B, C·W), each slot's original position (N for empty slots).
// Both forms return Z^O in slot order, (B, C·W, H·M).
struct BlockAttention {
  int64_t B, C, W, H, E, M;
  Causal causal;

  // The scores of each block held, (B, H, C, W, 2W), and masked.
  Tensor composed(const Tensor& q_slots, const Tensor& k_slots, const Tensor& v_slots, const Tensor& slot_real,
                  const Tensor& position) const {
    auto heads_first = [&](const Tensor& t, int64_t per_head) {  // → (B, H, C, W, F)
      return permute(reshape(t, {B, C, W, H, per_head}), {0, 3, 1, 2, 4});
    };
    const Tensor q = heads_first(q_slots, E);                          // (B, H, C, W, E)
    const Tensor k = with_previous_block(heads_first(k_slots, E), 2);  // (B, H, C, 2W, E)
    const Tensor v = with_previous_block(heads_first(v_slots, M), 2);  // (B, H, C, 2W, M)
    Tensor visible = reshape(with_previous_block(reshape(slot_real, {B, C, W}), 1), {B, 1, C, 1, 2 * W});
    if (causal == Causal::Yes) {
      const Tensor query_position = reshape(position, {B, 1, C, W, 1});
      const Tensor key_position = reshape(with_previous_block(reshape(position, {B, C, W}), 1), {B, 1, C, 1, 2 * W});
      visible = where(le(key_position, query_position), visible, zeros({}, {DType::Bool, q.device()}));
    }
    const Tensor scores = matmul(q * (1.0 / std::sqrt(double(E))), transpose(k, -1, -2));  // (B, H, C, W, 2W)
    const Tensor z = matmul(softmax(scores, visible), v);                                   // (B, H, C, W, M)
    return reshape(permute(z, {0, 2, 3, 1, 4}), {B, C * W, H * M});
  }

  // fused_attention_rows over the B·C blocks: each block's 2W keys picked with the real ones first,
  // in the order of their original positions, so that the keys a query sees are a prefix of them;
  // the kernels read the picked rows where they lie, in X W_K and X W_V (on a GPU, gathered). Here
  // k and v are (B, N, H·F), in the words' order.
  Tensor fused(const Tensor& q_slots, const Tensor& k, const Tensor& v, const Tensor& slot_real,
               const Tensor& position) const {
    const Device device = q_slots.device();
    // Each slot's rank: its original position if it holds a real word, else past every position.
    const double past = double(C * W) + 1;
    const Tensor rank = where(slot_real, position, full({}, past, position.options()));  // (B, C·W)
    const Tensor candidates = reshape(with_previous_block(reshape(arange(0, double(C * W), 1, {DType::Int64, device}),
                                                                  {C, W}), 0),
                                      {1, C * 2 * W});                                      // (1, C·2W) slots
    const Tensor candidate_rank = reshape(gather(rank, 1, expand(candidates, {B, C * 2 * W})), {B, C, 2 * W});
    const Tensor by_rank = argsort(candidate_rank, 2);                                      // (B, C, 2W), stable
    const Tensor key_rank = gather(candidate_rank, 2, by_rank);                             // ascending
    const Tensor key_slot = reshape(gather(expand(reshape(candidates, {1, C, 2 * W}), {B, C, 2 * W}), 2, by_rank),
                                    {B, C * 2 * W});
    // (B, C·rows, H·F) → (B·C, H, rows, F), a view: the fused kernels read strided heads (ops/attention.h).
    auto blocks = [&](const Tensor& t, int64_t rows, int64_t per_head) {
      return permute(reshape(t, {B * C, rows, H, per_head}), {0, 2, 1, 3});
    };
    // The keys and values as they lie, (B, H, N, F) views; each block picks its 2W rows: its slots'
    // words (an empty slot, never seen, picks row 0).
    auto heads = [&](const Tensor& t, int64_t per_head) {
      return permute(reshape(t, {B, t.size(1), H, per_head}), {0, 2, 1, 3});
    };
    const int64_t N = k.size(1);
    const Tensor slot_row = where(lt(position, full({}, double(N), position.options())), position,
                                  zeros({}, position.options()));  // (B, C·W)
    const Tensor key_row = gather(slot_row, 1, key_slot);          // (B, C·2W)
    // A query sees the real keys (ranked below `past`) and, causal, those not after its own position
    // (every position is below `past`): a prefix of its block's keys, of `ends` keys.
    Tensor ends;  // (B, C, W)
    if (causal == Causal::Yes) {
      // ends_u = #{keys v: rank_v ≤ position_u}, without a (W × 2W) comparison: the block's key ranks
      // and query positions sorted together (stably, keys first on ties), each query's count of the
      // keys at or before it.
      const Tensor merged = argsort(concat({key_rank, reshape(position, {B, C, W})}, 2), 2);  // (B, C, 3W) → entry
      const Tensor is_key = to(lt(merged, full({}, 2.0 * W, merged.options())), DType::Int64);
      const Tensor place = argsort(merged, 2);  // entry → its place in the merged order
      ends = gather(cumsum(is_key, 2), 2, slice(place, 2, 2 * W, 3 * W));
    } else {
      const Tensor real_keys = sum(to(lt(key_rank, full({}, past, key_rank.options())), DType::Int64), {2},
                                   KeepDim::Yes);  // (B, C, 1)
      ends = expand(real_keys, {B, C, W});
    }
    const Tensor z = fused_attention_rows(blocks(q_slots, W, E), heads(k, E), heads(v, M),
                                          reshape(key_row, {B * C, 2 * W}), reshape(ends, {B * C, W}));
    // z (B·C, H, W, M): on the CPU in q's layout of heads, (B·C, W, H, M) in memory (ops/attention.h),
    // and the heads merge as a view; a GPU's contiguous z is copied by reshape.
    return reshape(permute(z, {0, 2, 1, 3}), {B, C * W, H * M});
  }
};

}  // namespace

const char* losses_name(ClusteringLosses losses) {
  switch (losses) {
    case ClusteringLosses::Projected: return "projected";
    case ClusteringLosses::Printed: return "printed";
    case ClusteringLosses::Cosine: return "cosine";
  }
  return "?";
}

ClusteringLosses losses_from_name(const std::string& name, const std::string& op) {
  std::string names;
  for (ClusteringLosses form : {ClusteringLosses::Projected, ClusteringLosses::Printed, ClusteringLosses::Cosine}) {
    if (name == losses_name(form)) return form;
    names += (names.empty() ? "" : ", ") + std::string(losses_name(form));
  }
  fail(op, "losses must be one of ", names, ", got '", name, "'");
}

NeuralClustering neural_clustering(const Tensor& x, const Tensor& centroids, const Tensor& w_c,
                                   const Tensor& lengths, ClusteringLosses losses) {
  if (autocast_enabled()) {  // in float32 under autocast, products included (docs/MIXED-PRECISION.md)
    const Tensor x32 = autocast_float32(x), centroids32 = autocast_float32(centroids);
    const AutocastScope off(false);
    return neural_clustering(x32, centroids32, w_c, lengths, losses);
  }
  check_clustering_inputs(kClusterOp, x, centroids);
  if (w_c.defined()) check_matrix(kClusterOp, "w_c", w_c, x.size(2), x.size(2), x);
  const Tensor keep = valid_positions(lengths, x.size(0), x.size(1), x.device(), kClusterOp);  // (B, N) bool
  return cluster_words(zero_padding(x, keep, lengths), centroids, w_c, keep, losses);
}

NeuralClusteringResult neural_clustering_attention(const Tensor& x_in, const Tensor& centroids,
                                                   const NeuralClusteringWeights& w, int64_t heads,
                                                   const Tensor& lengths, Causal causal, ClusteringLosses losses,
                                                   Fused fused) {
  if (autocast_enabled()) {  // in float32 under autocast, products included (docs/MIXED-PRECISION.md)
    const Tensor x32 = autocast_float32(x_in), centroids32 = autocast_float32(centroids);
    const AutocastScope off(false);
    return neural_clustering_attention(x32, centroids32, w, heads, lengths, causal, losses, fused);
  }
  check_inputs(x_in, centroids, w, heads);
  const int64_t B = x_in.size(0), N = x_in.size(1), C = centroids.size(-2);
  const int64_t E = w.w_q.size(1) / heads, M = w.w_v.size(1) / heads;
  const int64_t W = (N + C - 1) / C;  // block width ⌈N/C⌉; W = 1 when C ≥ N
  const int64_t slots = C * W;         // the sorted sequence padded to C equal blocks
  const Device device = x_in.device();
  const Tensor keep = valid_positions(lengths, B, N, device, kOp);  // (B, N) bool, true at real words
  const Tensor x = zero_padding(x_in, keep, lengths);               // (B, N, D)

  // ---- neural clustering (§3.1, eq. 2–4, 6, 11) ----
  const NeuralClustering clustering = cluster_words(x, centroids, w.w_c, keep, losses);
  const Tensor& assignment = clustering.assignment;  // (B, N)
  // eq. 5: X^S, I′ = Sort(X, I), stable: a cluster keeps its words in their original order. Only the
  // order I′ is formed; eq. 7 below sorts the projections' rows instead of X's.
  const Tensor order = argsort(assignment, 1);                              // (B, N) sorted → original

  // ---- neural clustering attention (§3.2) ----
  // eq. 7: Q^S, K^S, V^S = X^S W_Q, X^S W_K, X^S W_V; eq. 8: chunked into C blocks of W = ⌈N/C⌉ (the
  // last ones padded with empty, zero slots); eq. 9 per block and head, below. Sorting rows commutes
  // with the projections: Q^S is X W_Q's rows sorted, and the blocks take K^S's and V^S's rows from
  // X W_K and X W_V through the order (the fused blocks read them there; the composed ones gather
  // them). X, which the clustering keeps, is the products' input: X^S is never formed.
  const auto in_slots = [&](const Tensor& t) {  // (B, N, F), in the words' order → sorted, (B, C·W, F)
    const Tensor sorted = rows_of(t, order);
    return slots == N ? sorted : pad(sorted, {0, 0, 0, slots - N});
  };
  const Tensor slot_real = pad(gather(keep, 1, order), {0, slots - N}, 0.0);  // (B, C·W) bool: holds a real word
  const Tensor position = pad(order, {0, slots - N}, double(N));              // (B, C·W); empty slots: N
  const Tensor q = in_slots(matmul(x, w.w_q));                                // Q^S, (B, C·W, H·E)
  const Tensor k = matmul(x, w.w_k), v = matmul(x, w.w_v);                    // (B, N, H·F), unsorted
  const BlockAttention blocks{B, C, W, heads, E, M, causal};
  // A GPU's fused kernels take head dims up to kFusedAttentionMaxHeadDim; beyond, the scores are held.
  const bool fits = !device.is_cuda() || std::max(E, M) <= kFusedAttentionMaxHeadDim;
  const Tensor z_slots = fused == Fused::Yes && fits
                             ? blocks.fused(q, k, v, slot_real, position)
                             : blocks.composed(q, in_slots(k), in_slots(v), slot_real, position);
  const Tensor z_sorted = slice(z_slots, 1, 0, N);  // (B, N, H·M)
  // eq. 10: Z = Resort(Z^O, I′): the row at sorted position p goes back to position I′_p, i.e. row
  // j of Z is row inverse_j of Z^O, with inverse = I′⁻¹. Resorting rows commutes with W_O, so the
  // output projection runs on Z^O, which the blocks' attention keeps anyway, and its product is
  // resorted: Z itself is never held.
  const Tensor inverse = argsort(order, 1);                                                   // (B, N)
  const Tensor projected = rows_of(matmul(z_sorted, w.w_o), inverse);                         // Z W_O, (B, N, D)
  // A word without a cluster (−1: a NaN in its sample or in a centroid) gets a NaN row, not an
  // output computed from an arbitrary grouping.
  const Tensor unclustered = unsqueeze(eq(assignment, full({}, -1.0, {DType::Int64, device})), 2);  // (B, N, 1)
  const Tensor output =
      where(unclustered, full({}, std::numeric_limits<double>::quiet_NaN(), x.options()), projected);  // (B, N, D)

  return {output, clustering.centroids, clustering.clustering_loss, clustering.sorting_loss, assignment, order,
          clustering.u};
}

}  // namespace tapestry::attention
