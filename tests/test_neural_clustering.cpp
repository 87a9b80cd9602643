// Neural clustering attention (ClusterFormer §3.1–3.2, appendix B): gradients, losses against
// explicit loops, the sort and resort, the blocks against a loop reference, the fused blocks against
// the composed ones and their memory, full attention as the one-cluster case, causality, padding and
// bad input.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>
#include <vector>

#include "core/device.h"
#include "tests/attention_checks.h"
#include "tests/oracle.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using tapestry::attention::Causal;
using tapestry::attention::ClusteringLosses;
using tapestry::attention::NeuralClusteringResult;
using tapestry::attention::NeuralClusteringWeights;

namespace {

// Shapes of one problem: B batch, N words, D model dim, C clusters, H heads, E and M head dims.
struct Sizes {
  int64_t B = 2, N = 7, D = 4, C = 3, H = 2, E = 2, M = 2;
};

// x, centroids and weights, in the order the gradchecks take them.
struct Problem {
  Tensor x, centroids;
  NeuralClusteringWeights w;
  std::vector<Tensor> inputs() const { return {x, centroids, w.w_c, w.w_q, w.w_k, w.w_v, w.w_o}; }
};

Problem make_problem(const Sizes& s, uint64_t seed, bool batched_centroids = false) {
  Problem p;
  p.x = uniform({s.B, s.N, s.D}, seed);
  p.centroids = batched_centroids ? uniform({s.B, s.C, s.D}, seed + 1) : uniform({s.C, s.D}, seed + 1);
  p.w.w_c = uniform({s.D, s.D}, seed + 2);
  p.w.w_q = uniform({s.D, s.H * s.E}, seed + 3);
  p.w.w_k = uniform({s.D, s.H * s.E}, seed + 4);
  p.w.w_v = uniform({s.D, s.H * s.M}, seed + 5);
  p.w.w_o = uniform({s.H * s.M, s.D}, seed + 6);
  return p;
}

// The attention under test, its losses in the form `losses`: projected unless a test says otherwise
// (the reference loops below compute every form).
NeuralClusteringResult run_attention(const Tensor& x, const Tensor& centroids, const NeuralClusteringWeights& w,
                                     int64_t heads, const Tensor& lengths, Causal causal,
                                     ClusteringLosses losses = ClusteringLosses::Projected) {
  return attention::neural_clustering_attention(x, centroids, w, heads, lengths, causal, losses);
}

NeuralClusteringWeights weights_of(const std::vector<Tensor>& in) { return {in[2], in[3], in[4], in[5], in[6]}; }

enum class Part { Output, ClusteringLoss, SortingLoss };

// The function of {x, centroids, w_c, w_q, w_k, w_v, w_o} that a gradcheck differentiates.
std::function<Tensor(const std::vector<Tensor>&)> part_of(Part part, int64_t heads, const Tensor& lengths,
                                                          Causal causal,
                                                          ClusteringLosses losses = ClusteringLosses::Projected) {
  return [=](const std::vector<Tensor>& in) {
    const NeuralClusteringResult r = run_attention(in[0], in[1], weights_of(in), heads, lengths, causal, losses);
    if (part == Part::ClusteringLoss) return r.clustering_loss;
    if (part == Part::SortingLoss) return r.sorting_loss;
    return r.output;
  };
}

// The n × n identity, float64.
Tensor identity(int64_t n) {
  std::vector<double> v(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) v[i * n + i] = 1.0;
  return from_vector<double>(v, {n, n});
}

Tensor lengths_of(const std::vector<int64_t>& lengths) {
  return from_vector<int64_t>(lengths, {static_cast<int64_t>(lengths.size())});
}

// ---- the reference: explicit loops over plain vectors ----

// A row-major float64 tensor read as nested indices.
struct Array {
  std::vector<double> v;
  Shape shape;
  explicit Array(const Tensor& t) : v(t.to_vector<double>()), shape(t.shape()) {}
  double operator()(int64_t i, int64_t j) const { return v[i * shape[1] + j]; }
  double operator()(int64_t i, int64_t j, int64_t k) const { return v[(i * shape[1] + j) * shape[2] + k]; }
};

struct Clustering {
  std::vector<std::vector<std::vector<double>>> xw, u, c_hat;  // [b][j][e], [b][i][j], [b][i][e]
  std::vector<std::vector<int64_t>> assignment, order;          // [b][j], [b][p]
  double clustering_loss = 0, sorting_loss = 0;
};

// Eq. 2–6 and 11 by loops, with the readings of the implementation: U over the real words only,
// padding in the virtual cluster C, sample length as N; the losses in the form `losses`: φ the inner
// product against X_j W_C (projected) or X_j (printed), or the cosine against X_j W_C.
Clustering reference_clustering(const Tensor& x_t, const Tensor& c_t, const Tensor& w_c_t,
                                const std::vector<int64_t>& lengths,
                                ClusteringLosses losses = ClusteringLosses::Projected) {
  const Array x(x_t), c(c_t), w_c(w_c_t);
  const int64_t B = x.shape[0], N = x.shape[1], D = x.shape[2], C = c_t.size(-2);
  const bool batched = c_t.dim() == 3;
  auto centroid = [&](int64_t b, int64_t i, int64_t e) { return batched ? c(b, i, e) : c(i, e); };
  Clustering r;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lengths[b];
    std::vector<std::vector<double>> xw(N, std::vector<double>(D, 0.0));
    for (int64_t j = 0; j < len; ++j)
      for (int64_t e = 0; e < D; ++e)
        for (int64_t d = 0; d < D; ++d) xw[j][e] += x(b, j, d) * w_c(d, e);
    std::vector<std::vector<double>> u(C, std::vector<double>(N, 0.0)), c_hat(C, std::vector<double>(D, 0.0));
    for (int64_t i = 0; i < C; ++i) {
      std::vector<double> s(len, 0.0);
      for (int64_t j = 0; j < len; ++j)
        for (int64_t e = 0; e < D; ++e) s[j] += centroid(b, i, e) * xw[j][e];
      const double top = len > 0 ? *std::max_element(s.begin(), s.end()) : 0.0;
      double total = 0;
      for (int64_t j = 0; j < len; ++j) total += std::exp(s[j] - top);
      for (int64_t j = 0; j < len; ++j) u[i][j] = std::exp(s[j] - top) / total;
      for (int64_t j = 0; j < len; ++j)
        for (int64_t e = 0; e < D; ++e) c_hat[i][e] += u[i][j] * xw[j][e];
    }
    std::vector<int64_t> assignment(N, C);
    for (int64_t j = 0; j < len; ++j) {
      int64_t best = 0;
      for (int64_t i = 1; i < C; ++i)
        if (u[i][j] > u[best][j]) best = i;
      assignment[j] = best;
    }
    std::vector<int64_t> order(N);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t z) { return assignment[a] < assignment[z]; });

    auto dot = [D](const std::vector<double>& a, const std::vector<double>& z) {
      double t = 0;
      for (int64_t e = 0; e < D; ++e) t += a[e] * z[e];
      return t;
    };
    auto phi = [&](const std::vector<double>& a, const std::vector<double>& z) {
      if (losses != ClusteringLosses::Cosine) return dot(a, z);
      return dot(a, z) / std::max(std::sqrt(dot(a, a)), 1e-12) / std::max(std::sqrt(dot(z, z)), 1e-12);
    };
    double l1 = 0;
    for (int64_t j = 0; j < len; ++j) {
      std::vector<double> word = xw[j];
      if (losses == ClusteringLosses::Printed)
        for (int64_t e = 0; e < D; ++e) word[e] = x(b, j, e);
      l1 += phi(word, c_hat[assignment[j]]);
    }
    r.clustering_loss += -l1 / double(std::max<int64_t>(len, 1)) / double(B);
    double l2 = phi(c_hat[0], c_hat[C - 1]);  // φ(Ĉ_1, Ĉ_k)
    for (int64_t i = 1; i < C; ++i) l2 += phi(c_hat[i], c_hat[i - 1]);
    r.sorting_loss += -l2 / double(C) / double(B);

    r.xw.push_back(xw);
    r.u.push_back(u);
    r.c_hat.push_back(c_hat);
    r.assignment.push_back(assignment);
    r.order.push_back(order);
  }
  return r;
}

// The smallest gap, over the real words, between the largest and the second largest entry of a
// column of U: the argmax (eq. 4) is piecewise constant, and a gradcheck is only meaningful where
// a perturbation of eps moves no U entry across that gap.
double argmax_margin(const Problem& p, const std::vector<int64_t>& lengths) {
  const Clustering cl = reference_clustering(p.x, p.centroids, p.w.w_c, lengths);
  double margin = std::numeric_limits<double>::infinity();
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int64_t j = 0; j < lengths[b]; ++j) {
      std::vector<double> column;
      for (const auto& row : cl.u[b]) column.push_back(row[j]);
      std::sort(column.rbegin(), column.rend());
      if (column.size() > 1) margin = std::min(margin, column[0] - column[1]);
    }
  return margin;
}

// Eq. 7–10 and appendix B by loops: query slot p of the sorted sequence is in block p / W and sees
// the slots of block (p / W − 1) mod C, then of its own block (twice the same block when C = 1),
// that hold a real word and, when causal, a word not after it. Padded x rows count as zero.
Tensor reference_output(const Problem& p, int64_t heads, const std::vector<int64_t>& lengths, Causal causal) {
  const Clustering cl = reference_clustering(p.x, p.centroids, p.w.w_c, lengths);
  const Array x(p.x), w_q(p.w.w_q), w_k(p.w.w_k), w_v(p.w.w_v), w_o(p.w.w_o);
  const int64_t B = x.shape[0], N = x.shape[1], D = x.shape[2], C = p.centroids.size(-2);
  const int64_t E = w_q.shape[1] / heads, M = w_v.shape[1] / heads, W = (N + C - 1) / C;
  std::vector<double> out(B * N * D, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int64_t>& order = cl.order[b];
    auto project = [&](const Array& w, int64_t j) {  // row j (original position) of X W
      std::vector<double> y(w.shape[1], 0.0);
      if (j < lengths[b])
        for (int64_t f = 0; f < w.shape[1]; ++f)
          for (int64_t d = 0; d < D; ++d) y[f] += x(b, j, d) * w(d, f);
      return y;
    };
    for (int64_t qs = 0; qs < N; ++qs) {
      const int64_t block = qs / W, previous = (block + C - 1) % C;
      std::vector<int64_t> keys;  // sorted slots
      for (int64_t blk : {previous, block})
        for (int64_t ks = blk * W; ks < (blk + 1) * W; ++ks) {
          if (ks >= N || order[ks] >= lengths[b]) continue;
          if (causal == Causal::Yes && order[ks] > order[qs]) continue;
          keys.push_back(ks);
        }
      const std::vector<double> q = project(w_q, order[qs]);
      std::vector<double> z(heads * M, 0.0);
      for (int64_t h = 0; h < heads && !keys.empty(); ++h) {
        std::vector<double> s;
        for (int64_t ks : keys) {
          const std::vector<double> k = project(w_k, order[ks]);
          double t = 0;
          for (int64_t e = 0; e < E; ++e) t += q[h * E + e] * k[h * E + e];
          s.push_back(t / std::sqrt(double(E)));
        }
        const double top = *std::max_element(s.begin(), s.end());
        double total = 0;
        for (double& t : s) total += (t = std::exp(t - top));
        for (size_t n = 0; n < keys.size(); ++n) {
          const std::vector<double> v = project(w_v, order[keys[n]]);
          for (int64_t m = 0; m < M; ++m) z[h * M + m] += s[n] / total * v[h * M + m];
        }
      }
      for (int64_t d = 0; d < D; ++d)
        for (int64_t f = 0; f < heads * M; ++f) out[(b * N + order[qs]) * D + d] += z[f] * w_o(f, d);
    }
  }
  return from_vector<double>(out, {B, N, D});
}

// Multi-head softmax(QKᵀ/√E)V over the whole sequence with the same projections, from primitive
// ops; keys at positions ≥ lengths are masked, and so are later keys when causal.
Tensor full_attention(const Tensor& x, const NeuralClusteringWeights& w, int64_t heads, const Tensor& keep_keys,
                      Causal causal) {
  const int64_t B = x.size(0), N = x.size(1), E = w.w_q.size(1) / heads, M = w.w_v.size(1) / heads;
  auto split_heads = [&](const Tensor& t, int64_t f) { return permute(reshape(t, {B, N, heads, f}), {0, 2, 1, 3}); };
  const Tensor q = split_heads(matmul(x, w.w_q), E), k = split_heads(matmul(x, w.w_k), E);
  const Tensor v = split_heads(matmul(x, w.w_v), M);
  Tensor keep = reshape(keep_keys, {B, 1, 1, N});
  if (causal == Causal::Yes) {
    const Tensor position = arange(N);
    keep = where(le(reshape(position, {1, N}), reshape(position, {N, 1})), keep, zeros({}, {DType::Bool}));
  }
  const Tensor a = softmax(matmul(q, transpose(k, -1, -2)) / std::sqrt(double(E)), keep);
  return matmul(reshape(permute(matmul(a, v), {0, 2, 1, 3}), {B, N, heads * M}), w.w_o);
}

std::vector<int64_t> flat(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> all;
  for (const auto& row : rows) all.insert(all.end(), row.begin(), row.end());
  return all;
}

std::vector<double> flat(const std::vector<std::vector<std::vector<double>>>& blocks) {
  std::vector<double> all;
  for (const auto& block : blocks)
    for (const auto& row : block) all.insert(all.end(), row.begin(), row.end());
  return all;
}

// Exact equality (atol = rtol = 0) of the rows of (B, N, D) tensors at real positions.
void check_equal_at_real_positions(const Tensor& a, const Tensor& b, const std::vector<int64_t>& lengths) {
  for (int64_t s = 0; s < a.size(0); ++s) {
    INFO("sample " << s);
    check_close(slice(select(a, 0, s), 0, 0, lengths[s]), slice(select(b, 0, s), 0, 0, lengths[s]), 0, 0);
  }
}

}  // namespace

TEST_CASE("neural clustering attention: gradcheck of the output, L1 and L2 in x, C and every weight") {
  // These seeds put every U column's maximum well clear of the runner-up, so a step of
  // eps = 1e-6 flips no argmax (checked, not assumed).
  const Sizes s;
  const Problem p = make_problem(s, 10);
  const Tensor lengths = lengths_of({7, 5});
  CHECK(argmax_margin(p, {7, 5}) > 1e-3);
  for (Part part : {Part::Output, Part::ClusteringLoss, Part::SortingLoss}) {
    INFO("part " << int(part));
    check_gradients(part_of(part, s.H, lengths, Causal::No), p.inputs());
  }
  for (ClusteringLosses losses : {ClusteringLosses::Printed, ClusteringLosses::Cosine}) {
    INFO("losses=" << attention::losses_name(losses));
    check_gradients(part_of(Part::ClusteringLoss, s.H, lengths, Causal::No, losses), p.inputs());
    check_gradients(part_of(Part::SortingLoss, s.H, lengths, Causal::No, losses), p.inputs());
  }
  INFO("causal output");
  check_gradients(part_of(Part::Output, s.H, lengths, Causal::Yes), p.inputs());
  INFO("no padding, centroids per sample (B, C, D), one head");
  const Problem q = make_problem(s, 20, true);
  CHECK(argmax_margin(q, {7, 7}) > 1e-3);
  check_gradients(part_of(Part::Output, 1, {}, Causal::No), q.inputs());
  check_gradients(part_of(Part::ClusteringLoss, 1, {}, Causal::No), q.inputs());
  check_gradients(part_of(Part::SortingLoss, 1, {}, Causal::No), q.inputs());
}

TEST_CASE("neural clustering attention: the output passes no gradient to C or W_C; L1 and L2 none to W_Q..W_O") {
  const Sizes s;
  const Problem p = make_problem(s, 30);
  const ValueAndGradients out = run_backward(part_of(Part::Output, s.H, {}, Causal::No), p.inputs(),
                                             uniform({s.B, s.N, s.D}, 31));
  for (size_t i : {1, 2}) CHECK(sum(abs(out.grads[i])).item<double>() == 0.0);
  for (size_t i : {0, 3, 4, 5, 6}) CHECK(sum(abs(out.grads[i])).item<double>() > 0.0);
  const Tensor one = scalar(1.0, {DType::Float64});
  for (Part part : {Part::ClusteringLoss, Part::SortingLoss}) {
    const ValueAndGradients loss = run_backward(part_of(part, s.H, {}, Causal::No), p.inputs(), one);
    for (size_t i : {0, 1, 2}) CHECK(sum(abs(loss.grads[i])).item<double>() > 0.0);
    for (size_t i : {3, 4, 5, 6}) CHECK(sum(abs(loss.grads[i])).item<double>() == 0.0);
  }
}

TEST_CASE("neural clustering attention: Ĉ, the assignment, the order, L1 and L2 equal explicit loops over eq. 2–6, 11") {
  for (bool batched : {false, true}) {
    for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{7, 7}, std::vector<int64_t>{6, 3}}) {
      INFO("batched centroids " << batched << ", lengths " << lengths[0] << ", " << lengths[1]);
      const Sizes s;
      const Problem p = make_problem(s, 40 + batched, batched);
      for (ClusteringLosses losses :
           {ClusteringLosses::Projected, ClusteringLosses::Printed, ClusteringLosses::Cosine}) {
        INFO("losses=" << attention::losses_name(losses));
        const NeuralClusteringResult r =
            run_attention(p.x, p.centroids, p.w, s.H, lengths_of(lengths), Causal::No, losses);
        const Clustering ref = reference_clustering(p.x, p.centroids, p.w.w_c, lengths, losses);
        check_close(r.centroids, from_vector<double>(flat(ref.c_hat), {s.B, s.C, s.D}), 1e-13, 1e-12);
        CHECK(r.assignment.to_vector<int64_t>() == flat(ref.assignment));
        CHECK(r.order.to_vector<int64_t>() == flat(ref.order));
        CHECK(r.clustering_loss.shape() == Shape{});
        CHECK(r.sorting_loss.shape() == Shape{});
        check_close(r.clustering_loss, scalar(ref.clustering_loss, {DType::Float64}), 1e-13, 1e-12);
        check_close(r.sorting_loss, scalar(ref.sorting_loss, {DType::Float64}), 1e-13, 1e-12);
      }
    }
  }
  // the inputs use more than one cluster in every sample (else the sort and L1 test little)
  const Sizes s;
  const Problem p = make_problem(s, 40);
  const Clustering ref = reference_clustering(p.x, p.centroids, p.w.w_c, {7, 7});
  for (const auto& row : ref.assignment) CHECK(std::set<int64_t>(row.begin(), row.end()).size() >= 2);
}

TEST_CASE("neural clustering losses: the inner products grow as W_C does, the cosines do not") {
  // W_C·s with C/s leaves C (X W_C)ᵀ, so U, the assignment and the attention, exactly as they are,
  // and scales X W_C and Ĉ by s: the projected L1 and L2 by s², without bound (the collapse
  // docs/RESULTS.md measured is this direction), while each cosine term stays what it was, in [−1, 1].
  const Sizes s;
  const Problem p = make_problem(s, 45);
  const Tensor lengths = lengths_of({7, 5});
  for (ClusteringLosses losses : {ClusteringLosses::Projected, ClusteringLosses::Printed, ClusteringLosses::Cosine}) {
    INFO("losses=" << attention::losses_name(losses));
    const NeuralClusteringResult base = run_attention(p.x, p.centroids, p.w, s.H, lengths, Causal::No, losses);
    for (double scale : {10.0, 1000.0}) {
      INFO("scale " << scale);
      NeuralClusteringWeights w = p.w;
      w.w_c = p.w.w_c * scale;
      const NeuralClusteringResult r = run_attention(p.x, p.centroids / scale, w, s.H, lengths, Causal::No, losses);
      CHECK(r.assignment.to_vector<int64_t>() == base.assignment.to_vector<int64_t>());
      check_close(r.output, base.output, 1e-12, 1e-9);
      // printed: L1 = X·Ĉ grows as s, L2 = Ĉ·Ĉ as s²
      const double l1_growth = losses == ClusteringLosses::Cosine ? 1.0
                               : losses == ClusteringLosses::Printed ? scale : scale * scale;
      const double l2_growth = losses == ClusteringLosses::Cosine ? 1.0 : scale * scale;
      check_close(r.clustering_loss, base.clustering_loss * l1_growth, 1e-12, 1e-9);
      check_close(r.sorting_loss, base.sorting_loss * l2_growth, 1e-12, 1e-9);
      if (losses == ClusteringLosses::Cosine)
        for (const Tensor& loss : {r.clustering_loss, r.sorting_loss})
          CHECK(std::abs(loss.item<double>()) <= 1.0);
    }
  }
}

TEST_CASE("neural clustering attention: the blocks (own + cyclic previous) equal an explicit loop, both variants") {
  // C = 3 clusters over N = 8 words: blocks of W = 3 with one empty slot at the end; sample 1 has
  // padding. Padded x rows count as zero in the reference, so every row, padded ones included, agrees.
  Sizes s;
  s.N = 8;
  s.M = 3;
  const Problem p = make_problem(s, 50);
  const std::vector<int64_t> lengths{8, 5};
  for (Causal causal : {Causal::No, Causal::Yes}) {
    INFO("causal " << int(causal));
    const NeuralClusteringResult r = run_attention(p.x, p.centroids, p.w, s.H, lengths_of(lengths), causal);
    check_close(r.output, reference_output(p, s.H, lengths, causal), 1e-13, 1e-11);
  }
  // more clusters than words (C = 5 > N = 3: W = 1, two empty blocks), and one cluster
  for (int64_t clusters : {5, 1}) {
    Sizes t;
    t.N = 3;
    t.C = clusters;
    const Problem q = make_problem(t, 55);
    for (Causal causal : {Causal::No, Causal::Yes}) {
      INFO("C = " << clusters << ", causal " << int(causal));
      const NeuralClusteringResult r = run_attention(q.x, q.centroids, q.w, t.H, {}, causal);
      check_close(r.output, reference_output(q, t.H, {3, 3}, causal), 1e-13, 1e-11);
    }
  }
}

TEST_CASE("neural clustering attention: the fused blocks and the composed ones give one function, values and gradients") {
  // Padding, causal, N not a multiple of C (empty slots), C > N, one cluster (a block its own previous).
  using attention::Fused;
  struct Case {
    int64_t N, C;
    std::vector<int64_t> lengths;
  };
  for (const Case& c : {Case{8, 3, {8, 5}}, Case{9, 3, {9, 9}}, Case{3, 5, {3, 1}}, Case{6, 1, {6, 4}},
                        Case{13, 4, {0, 11}}}) {
    Sizes s;
    s.N = c.N;
    s.C = c.C;
    s.M = 3;
    const Problem p = make_problem(s, 60 + c.N);
    for (Causal causal : {Causal::No, Causal::Yes}) {
      INFO("N " << c.N << " C " << c.C << " causal " << int(causal));
      auto run = [&](Fused fused) {
        return [=](const std::vector<Tensor>& in) {
          return attention::neural_clustering_attention(in[0], in[1], weights_of(in), s.H, lengths_of(c.lengths),
                                                        causal, ClusteringLosses::Projected, fused)
              .output;
        };
      };
      check_same_function(run(Fused::Yes), run(Fused::No), p.inputs(), 1e-12, 1e-10);
    }
  }
}

TEST_CASE("neural clustering attention, fused: its step's peak at N = 2048 is a fraction of the composed blocks'") {
  using attention::Fused;
  const int64_t B = 1, N = 2048, D = 32, C = 3, H = 2;
  Generator gen(61);
  const auto param = [&](int64_t rows, int64_t cols) {
    return (rand({rows, cols}, gen, {DType::Float32}) - 0.5).set_requires_grad(true);
  };
  const Tensor x = rand({B, N, D}, gen, {DType::Float32}) - 0.5, centroids = param(C, D);
  const NeuralClusteringWeights w{param(D, D), param(D, D), param(D, D), param(D, D), param(D, D)};
  auto peak = [&](Fused fused) {
    Allocator& alloc = context(Device::cpu()).allocator();
    const int64_t before = alloc.stats().in_use;
    alloc.reset_peak();
    sum(attention::neural_clustering_attention(x, centroids, w, H, {}, Causal::No,
                                               ClusteringLosses::Cosine, fused)
            .output)
        .backward();
    for (const Tensor& t : {centroids, w.w_c, w.w_q, w.w_k, w.w_v, w.w_o}) t.zero_grad();
    return alloc.stats().peak - before;
  };
  const int64_t composed = peak(Fused::No), fused = peak(Fused::Yes);
  INFO("peak bytes: composed " << composed << ", fused " << fused);
  const int64_t W = (N + C - 1) / C;
  CHECK(composed >= 2 * H * C * W * 2 * W * 4);  // the blocks' scores and their softmax, at least
  CHECK(fused * 4 < composed);
}

TEST_CASE("neural clustering attention, fused: what its forward keeps, counted in (N, D) float32 tensors") {
  // Kept for the backward, besides the inputs: Q^S, X W_K and X W_V (which the blocks read through
  // their picked rows, fused_attention_rows), Z^O (W_O's input), the output, and the small U, Ĉ and
  // sorts: 5.4 (N, D) tensors measured. Before the clustering's products ran re-associated around W_C
  // (C W_Cᵀ Xᵀ, U X W_C), X W_C was kept too: 6.4; before L1 took each word's similarity to its own
  // centroid as its column of word Ĉᵀ, the gathered own centroids Ĉ_{I_j} were kept too: 7.4; before
  // the projections ran on X, the sorted X^S was kept as their input: 8.4; before W_O ran on Z^O, the
  // resorted Z was kept as its input too: 9.4; before the blocks picked their rows, each block's 2W
  // keys and values were gathered, every slot twice (4 tensors where K^S and V^S are 2): 11.4; and
  // before that Ĉ_{I_j} was gathered through an int64 index of B·N·D elements, kept for gather's
  // backward: 13.4. The cosine losses keep as much: their unit rows, once kept for the product of the
  // two (2 more), are never formed.
  const int64_t B = 1, N = 1024, D = 64, C = 4, H = 2;
  Generator gen(67);
  const auto param = [&](int64_t rows, int64_t cols) {
    return (rand({rows, cols}, gen, {DType::Float32}) - 0.5).set_requires_grad(true);
  };
  const Tensor x = rand({B, N, D}, gen, {DType::Float32}) - 0.5, centroids = param(C, D);
  const NeuralClusteringWeights w{param(D, D), param(D, D), param(D, D), param(D, D), param(D, D)};
  Allocator& alloc = context(Device::cpu()).allocator();
  for (const ClusteringLosses losses : {ClusteringLosses::Projected, ClusteringLosses::Cosine}) {
    const int64_t before = alloc.stats().in_use;
    const NeuralClusteringResult r =
        attention::neural_clustering_attention(x, centroids, w, H, {}, Causal::No, losses);
    const double kept = double(alloc.stats().in_use - before) / double(N * D * 4);
    INFO(std::string(attention::losses_name(losses)) << " losses, kept: " << kept << " (N, D) float32 tensors");
    CHECK(kept >= 4.5);  // what the forward needs: the count above is not vacuous
    CHECK(kept <= 6.0);
  }
}

TEST_CASE("neural clustering attention: order is a stable sort by cluster and resort undoes it") {
  Sizes s;
  s.B = 3;
  s.N = 9;
  const Problem p = make_problem(s, 60);
  const std::vector<int64_t> lengths{9, 6, 1};
  const NeuralClusteringResult r = run_attention(p.x, p.centroids, p.w, s.H, lengths_of(lengths), Causal::No);
  CHECK(r.assignment.dtype() == DType::Int64);
  CHECK(r.order.dtype() == DType::Int64);
  CHECK(r.assignment.shape() == Shape{s.B, s.N});
  const Array assignment(to(r.assignment, DType::Float64)), order(to(r.order, DType::Float64));
  for (int64_t b = 0; b < s.B; ++b) {
    INFO("sample " << b);
    std::vector<int64_t> seen;
    for (int64_t j = 0; j < s.N; ++j) {
      CHECK((j < lengths[b] ? assignment(b, j) < s.C : assignment(b, j) == s.C));  // padding: cluster C
      seen.push_back(int64_t(order(b, j)));
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int64_t> positions(s.N);
    std::iota(positions.begin(), positions.end(), 0);
    CHECK(seen == positions);  // a permutation
    for (int64_t j = 1; j < s.N; ++j) {
      const double before = assignment(b, int64_t(order(b, j - 1))), now = assignment(b, int64_t(order(b, j)));
      CHECK(before <= now);                                     // grouped by ascending cluster
      if (before == now) CHECK(order(b, j - 1) < order(b, j));  // stable within a cluster
    }
  }

  // Resort ∘ sort = identity. Words are scaled unit vectors x_j = 12·e_j (D = N), W_Q = W_K = I and
  // one head: a word's score with itself is 144/√D ≈ 59 and 0 with any other word, so it attends
  // to itself up to e^-59 ≈ 1e-26; with W_V = W_O = I the output is x itself, at every position,
  // whatever the clusters (C = 3: several clusters and blocks) and in both variants.
  const int64_t n = 6;
  Problem u;
  u.x = reshape(identity(n) * 12.0, {1, n, n});
  u.centroids = uniform({3, n}, 61);
  u.w.w_c = uniform({n, n}, 62);
  u.w.w_q = u.w.w_k = u.w.w_v = u.w.w_o = identity(n);
  for (Causal causal : {Causal::No, Causal::Yes}) {
    const NeuralClusteringResult id = run_attention(u.x, u.centroids, u.w, 1, {}, causal);
    CHECK(id.order.to_vector<int64_t>() != std::vector<int64_t>{0, 1, 2, 3, 4, 5});  // the sort did move words
    check_close(id.output, u.x, 1e-12, 0);
  }
}

TEST_CASE("neural clustering attention with one cluster is full multi-head attention, values and gradients") {
  // With C = 1 every word is in cluster 0, the stable sort keeps the order, and the one block of
  // W = N words is its own (cyclic) previous block: every key appears twice. Duplicating every key
  // leaves a softmax-weighted average unchanged, e^s / Σ 2e^s' = (1/2) softmax(s), summed over two
  // copies of each value. First that reasoning on its own:
  const Tensor scores = uniform({5}, 70, -2, 2), values = uniform({5, 3}, 71);
  check_close(matmul(softmax(concat({scores, scores}, 0)), concat({values, values}, 0)),
              matmul(softmax(scores), values), 1e-15, 1e-13);
  // then the whole function, without and with padding, non-causal and causal.
  Sizes s;
  s.C = 1;
  s.N = 6;
  s.M = 3;
  const Problem p = make_problem(s, 72);
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{6, 6}, std::vector<int64_t>{6, 4}}) {
    const Tensor lengths_t = lengths_of(lengths);
    // compare real positions only: the output at padded queries is meaningless
    const Tensor keep = attention::valid_positions(lengths_t, s.B, s.N, Device::cpu(), "test");
    const Tensor real = unsqueeze(keep, 2), zero = zeros({}, {DType::Float64});
    for (Causal causal : {Causal::No, Causal::Yes}) {
      INFO("lengths " << lengths[0] << ", " << lengths[1] << ", causal " << int(causal));
      check_matches_reference(
          [&](const std::vector<Tensor>& in) {
            return where(real, run_attention(in[0], in[1], weights_of(in), s.H, lengths_t, causal).output, zero);
          },
          [&](const std::vector<Tensor>& in) { return where(real, full_attention(in[0], weights_of(in), s.H, keep, causal), zero); },
          p.inputs(), 1e-13, 1e-11);
    }
  }
}

TEST_CASE("neural clustering attention, causal: no gradient from an output position reaches a later word") {
  Sizes s;
  s.N = 9;
  const Problem p = make_problem(s, 80);
  const Tensor lengths = lengths_of({9, 7});
  for (Causal causal : {Causal::Yes, Causal::No}) {
    for (int64_t t : {0, 2, 4, 6}) {
      INFO("causal " << int(causal) << ", position " << t);
      Tensor x = clone(p.x);
      x.set_requires_grad(true);
      const NeuralClusteringResult r = run_attention(x, p.centroids, p.w, s.H, lengths, causal);
      // seed: ones at output position t of both samples, zero elsewhere
      const Tensor position = reshape(arange(s.N), {1, s.N, 1});
      const Tensor seed = to(expand(eq(position, scalar(double(t), {DType::Int64})), {s.B, s.N, s.D}), DType::Float64);
      r.output.backward(seed);
      const Tensor later = slice(x.grad(), 1, t + 1, s.N);  // (B, N − t − 1, D)
      const double leak = sum(abs(later)).item<double>();
      if (causal == Causal::Yes) CHECK(leak == 0.0);  // exactly
      else if (t == 0) CHECK(leak > 0.0);             // the check can fail: without the mask it does
      CHECK(sum(abs(select(x.grad(), 1, t))).item<double>() > 0.0);  // a word's own query does count
    }
  }
}

TEST_CASE("neural clustering attention: padding changes no real output, no centroid, no loss") {
  Sizes s;
  s.N = 8;
  const Problem p = make_problem(s, 90);
  const std::vector<int64_t> lengths{5, 3};
  // the same problem with different padding: other values, huge ones, inf and NaN
  Problem q = p;
  {
    std::vector<double> x = p.x.to_vector<double>();
    const double odd[] = {1e6, -3.5, std::numeric_limits<double>::infinity(), std::nan(""), 42.0};
    int n = 0;
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t j = lengths[b]; j < s.N; ++j)
        for (int64_t d = 0; d < s.D; ++d) x[(b * s.N + j) * s.D + d] = odd[n++ % 5];
    q.x = from_vector<double>(x, p.x.shape());
  }
  for (Causal causal : {Causal::No, Causal::Yes}) {
    INFO("causal " << int(causal));
    const NeuralClusteringResult a = run_attention(p.x, p.centroids, p.w, s.H, lengths_of(lengths), causal);
    const NeuralClusteringResult b = run_attention(q.x, q.centroids, q.w, s.H, lengths_of(lengths), causal);
    check_equal_at_real_positions(a.output, b.output, lengths);
    CHECK(std::isfinite(sum(b.output).item<double>()));  // padded rows too: finite, if meaningless
    check_close(a.centroids, b.centroids, 0, 0);
    check_close(a.clustering_loss, b.clustering_loss, 0, 0);
    check_close(a.sorting_loss, b.sorting_loss, 0, 0);
    CHECK(a.assignment.to_vector<int64_t>() == b.assignment.to_vector<int64_t>());
    CHECK(a.order.to_vector<int64_t>() == b.order.to_vector<int64_t>());
    // the padded words sit at the end of the order
    const std::vector<int64_t> order = a.order.to_vector<int64_t>();
    for (int64_t b2 = 0; b2 < s.B; ++b2)
      for (int64_t j = lengths[b2]; j < s.N; ++j) CHECK(order[b2 * s.N + j] >= lengths[b2]);
  }
  // lengths equal to N give exactly what no lengths give
  const NeuralClusteringResult none = run_attention(p.x, p.centroids, p.w, s.H, {}, Causal::No);
  const NeuralClusteringResult all = run_attention(p.x, p.centroids, p.w, s.H, lengths_of({8, 8}), Causal::No);
  check_close(none.output, all.output, 0, 0);
  check_close(none.clustering_loss, all.clustering_loss, 0, 0);
}

TEST_CASE("neural clustering attention: more clusters than words, a sample of length 0, float32") {
  Sizes s;
  s.N = 4;
  s.C = 9;  // W = 1: blocks 4..8 are empty, at most 4 clusters used
  const Problem p = make_problem(s, 100);
  const Tensor lengths = lengths_of({4, 0});
  for (Causal causal : {Causal::No, Causal::Yes}) {
    const NeuralClusteringResult r = run_attention(p.x, p.centroids, p.w, s.H, lengths, causal);
    CHECK(std::isfinite(sum(r.output).item<double>()));
    CHECK(r.centroids.shape() == Shape{s.B, s.C, s.D});
    CHECK(sum(abs(select(r.centroids, 0, 1))).item<double>() == 0.0);  // length 0: Ĉ = 0
    CHECK(std::isfinite(r.clustering_loss.item<double>()));
    CHECK(std::isfinite(r.sorting_loss.item<double>()));
    // the empty sample adds 0 to L1 and to L2, the batch mean still divides by B
    const Clustering ref = reference_clustering(p.x, p.centroids, p.w.w_c, {4, 0});
    check_close(r.clustering_loss, scalar(ref.clustering_loss, {DType::Float64}), 1e-13, 1e-12);
    check_close(r.sorting_loss, scalar(ref.sorting_loss, {DType::Float64}), 1e-13, 1e-12);
  }
  CHECK(argmax_margin(p, {4, 0}) > 1e-3);
  check_gradients(part_of(Part::Output, s.H, lengths, Causal::No), p.inputs());
  check_gradients(part_of(Part::ClusteringLoss, s.H, lengths, Causal::Yes), p.inputs());

  // float32 gives float64's result within float32 precision (the same clusters here)
  Sizes t;
  const Problem d = make_problem(t, 110);
  const NeuralClusteringResult r64 = run_attention(d.x, d.centroids, d.w, t.H, {}, Causal::Yes);
  auto f32 = [](const Tensor& x) { return to(x, DType::Float32); };
  const NeuralClusteringWeights w32{f32(d.w.w_c), f32(d.w.w_q), f32(d.w.w_k), f32(d.w.w_v), f32(d.w.w_o)};
  const NeuralClusteringResult r32 = run_attention(f32(d.x), f32(d.centroids), w32, t.H, {}, Causal::Yes);
  CHECK(r32.output.dtype() == DType::Float32);
  CHECK(r32.order.to_vector<int64_t>() == r64.order.to_vector<int64_t>());
  check_close(r32.output, r64.output, 1e-5, 1e-4);
  check_close(r32.clustering_loss, r64.clustering_loss, 1e-5, 1e-4);
  check_close(r32.sorting_loss, r64.sorting_loss, 1e-5, 1e-4);
}

TEST_CASE("neural clustering with a NaN word or centroid: no cluster (−1, never 0), NaN output rows and losses") {
  const Sizes s;
  const Problem p = make_problem(s, 120);
  const NeuralClusteringResult clean = run_attention(p.x, p.centroids, p.w, s.H, {}, Causal::No);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const int64_t at : {0, 3, 6}) {  // the NaN at the first, a middle and the last word of sample 0
    CAPTURE(at);
    std::vector<double> xv = p.x.to_vector<double>();
    xv[size_t((0 * s.N + at) * s.D + 1)] = nan;
    const Tensor x = from_vector(xv, p.x.shape());
    for (Causal causal : {Causal::No, Causal::Yes}) {
      const NeuralClusteringResult r = run_attention(x, p.centroids, p.w, s.H, {}, causal);
      const NeuralClusteringResult ref = run_attention(p.x, p.centroids, p.w, s.H, {}, causal);
      // Sample 0: every word's column of U is NaN, so no word has a cluster and every output row is NaN.
      for (const int64_t a : select(r.assignment, 0, 0).to_vector<int64_t>()) CHECK(a == -1);
      for (const double v : select(r.output, 0, 0).to_vector<double>()) CHECK(std::isnan(v));
      for (const double v : select(r.centroids, 0, 0).to_vector<double>()) CHECK(std::isnan(v));
      CHECK(std::isnan(r.clustering_loss.item<double>()));
      CHECK(std::isnan(r.sorting_loss.item<double>()));
      // Sample 1 never sees it.
      CHECK(select(r.assignment, 0, 1).to_vector<int64_t>() == select(ref.assignment, 0, 1).to_vector<int64_t>());
      check_close(select(r.output, 0, 1), select(ref.output, 0, 1), 0, 0);
      check_close(select(r.centroids, 0, 1), select(ref.centroids, 0, 1), 0, 0);
    }
  }
  // A NaN centroid: every column of U holds it, so no word of any sample has a cluster.
  std::vector<double> cv = p.centroids.to_vector<double>();
  cv[size_t(1 * s.D)] = nan;
  const Tensor centroids = from_vector(cv, p.centroids.shape());
  const NeuralClusteringResult r = run_attention(p.x, centroids, p.w, s.H, {}, Causal::No);
  for (const int64_t a : r.assignment.to_vector<int64_t>()) CHECK(a == -1);
  for (const double v : r.output.to_vector<double>()) CHECK(std::isnan(v));
  CHECK(std::isnan(r.clustering_loss.item<double>()));
  // The clustering alone says the same.
  const attention::NeuralClustering c =
      attention::neural_clustering(p.x, centroids, p.w.w_c, {}, ClusteringLosses::Projected);
  for (const int64_t a : c.assignment.to_vector<int64_t>()) CHECK(a == -1);
  CHECK(std::isnan(c.clustering_loss.item<double>()));
  // A NaN in padding changes nothing (padding is zeroed on entry), and the clean run is finite.
  std::vector<double> xv = p.x.to_vector<double>();
  xv[size_t((1 * s.N + 6) * s.D)] = nan;
  const Tensor lengths = lengths_of({7, 6});
  const NeuralClusteringResult padded = run_attention(from_vector(xv, p.x.shape()), p.centroids, p.w, s.H,
                                                                    lengths, Causal::No);
  const NeuralClusteringResult padded_ref = run_attention(p.x, p.centroids, p.w, s.H, lengths, Causal::No);
  CHECK(padded.assignment.to_vector<int64_t>() == padded_ref.assignment.to_vector<int64_t>());
  check_close(padded.output, padded_ref.output, 0, 0);
  for (const int64_t a : clean.assignment.to_vector<int64_t>()) CHECK((a >= 0 && a < s.C));
}

TEST_CASE("neural clustering attention: bad input") {
  const Sizes s;
  const Problem p = make_problem(s, 120);
  const char* op = "neural_clustering_attention";
  auto call = [&](const Tensor& x, const Tensor& c, const NeuralClusteringWeights& w, int64_t heads,
                  const Tensor& lengths = {}) {
    return [=] { run_attention(x, c, w, heads, lengths, Causal::No); };
  };
  auto with = [&](Tensor NeuralClusteringWeights::*field, const Tensor& value) {
    NeuralClusteringWeights w = p.w;
    w.*field = value;
    return w;
  };
  const int64_t H = s.H;
  // x
  check_error(call({}, p.centroids, p.w, H), {op, "x is undefined"});
  check_error(call(select(p.x, 0, 0), p.centroids, p.w, H), {op, "x must be (B, N, D)", "(7, 4)"});
  check_error(call(to(p.x, DType::Int64), p.centroids, p.w, H), {op, "float32 or float64", "int64"});
  check_error(call(zeros({2, 0, 4}, {DType::Float64}), p.centroids, p.w, H), {op, "at least one word", "(2, 0, 4)"});
  check_error(call(zeros({0, 7, 4}, {DType::Float64}), p.centroids, p.w, H), {op, "at least one sample", "(0, 7, 4)"});
  // centroids
  check_error(call(p.x, {}, p.w, H), {op, "centroids is undefined"});
  check_error(call(p.x, uniform({3, 5}, 1), p.w, H), {op, "centroids must be (C, D) or (B, C, D)", "(3, 5)"});
  check_error(call(p.x, uniform({3, 3, 4}, 1), p.w, H), {op, "B = 2", "(3, 3, 4)"});
  check_error(call(p.x, uniform({4}, 1), p.w, H), {op, "centroids must be", "(4,)"});
  check_error(call(p.x, zeros({0, 4}, {DType::Float64}), p.w, H), {op, "at least one cluster", "(0, 4)"});
  check_error(call(p.x, to(p.centroids, DType::Float32), p.w, H), {op, "centroids must have x's dtype", "float32"});
  // heads and weights
  check_error(call(p.x, p.centroids, p.w, 0), {op, "heads must be at least 1", "0"});
  check_error(call(p.x, p.centroids, p.w, 3), {op, "heads = 3 must divide", "w_q"});
  check_error(call(p.x, p.centroids, p.w, 5), {op, "heads = 5 must divide", "w_q"});
  check_error(call(p.x, p.centroids, with(&NeuralClusteringWeights::w_c, {}), H), {op, "w_c is undefined"});
  check_error(call(p.x, p.centroids, with(&NeuralClusteringWeights::w_c, uniform({4, 3}, 1)), H),
              {op, "w_c must have shape (4, 4)", "(4, 3)"});
  check_error(call(p.x, p.centroids, with(&NeuralClusteringWeights::w_q, uniform({3, 4}, 1)), H),
              {op, "w_q must have shape (4, any)", "(3, 4)"});
  check_error(call(p.x, p.centroids, with(&NeuralClusteringWeights::w_k, uniform({4, 6}, 1)), H),
              {op, "w_k must have shape (4, 4)", "(4, 6)"});
  check_error(call(p.x, p.centroids, with(&NeuralClusteringWeights::w_v, uniform({4, 3}, 1)), H),
              {op, "heads = 2 must divide", "w_v", "(4, 3)"});
  check_error(call(p.x, p.centroids, with(&NeuralClusteringWeights::w_o, uniform({4, 5}, 1)), H),
              {op, "w_o must have shape (4, 4)", "(4, 5)"});
  check_error(call(p.x, p.centroids, with(&NeuralClusteringWeights::w_o, uniform({4}, 1)), H), {op, "w_o must have shape"});
  check_error(call(p.x, p.centroids, with(&NeuralClusteringWeights::w_v, to(p.w.w_v, DType::Float32)), H),
              {op, "w_v must have x's dtype float64", "float32"});
  // lengths (the shared check, named after this function)
  check_error(call(p.x, p.centroids, p.w, H, from_vector<double>({7, 7}, {2})), {op, "lengths must be int64 or int32", "float64"});
  check_error(call(p.x, p.centroids, p.w, H, lengths_of({7, 7, 7})), {op, "lengths must be int64 or int32 of shape (2,)", "(3,)"});
  check_error(call(p.x, p.centroids, p.w, H, from_vector<int32_t>({8, 7}, {2})), {op, "a length of 8", "[0, 7]"});
  check_error(call(p.x, p.centroids, p.w, H, lengths_of({8, 7})), {op, "a length of 8", "[0, 7]"});
  check_error(call(p.x, p.centroids, p.w, H, lengths_of({-1, 7})), {op, "a length of -1"});
  // a good call passes
  CHECK_NOTHROW(call(p.x, p.centroids, p.w, H, lengths_of({7, 0}))());
}

TEST_CASE("neural clustering attention: a training step holds no memory after it ends") {
  // Forward and backward again and again, as training does: once the step's tensors are gone, the
  // device holds what it held before (the inputs and their gradients), however many steps ran.
  const Sizes s{3, 9, 4, 20, 2, 2, 2};
  const Problem p = make_problem(s, 91);
  for (Tensor t : p.inputs()) t.set_requires_grad(true);
  const Tensor lengths = from_vector<int64_t>({9, 5, 7}, {3});
  Allocator& allocator = context(Device::cpu()).allocator();
  const auto step = [&] {
    const NeuralClusteringResult r = run_attention(p.x, p.centroids, p.w, s.H, lengths, Causal::No);
    (sum(r.output) + r.clustering_loss + r.sorting_loss).backward();
  };
  step();
  const int64_t after_first = allocator.stats().in_use;
  for (int i = 0; i < 10; ++i) step();
  CHECK(allocator.stats().in_use == after_first);
}
