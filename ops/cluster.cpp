#include "ops/cluster.h"

#include "core/tape_graph.h"

#include <array>
#include <cmath>
#include <vector>

#include "core/autograd.h"
#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/cluster.h"
#include "ops/cuda/index.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/shape.h"
#include "ops/softmax.h"

namespace tapestry {

namespace {

constexpr int64_t kParallelWork = 32768;  // multiply-adds below which a loop stays on one thread

// kSpread[b]: byte i is bit i of b (0 or 1). Adding kSpread[byte] to a word of eight byte-wide
// counters counts eight bits of a code at once.
constexpr std::array<uint64_t, 256> spread_bits() {
  std::array<uint64_t, 256> table{};
  for (uint64_t b = 0; b < 256; ++b)
    for (int i = 0; i < 8; ++i) table[b] |= ((b >> i) & 1) << (8 * i);
  return table;
}
constexpr std::array<uint64_t, 256> kSpread = spread_bits();

// Per cluster, its members and how many of them have each bit of their code set. Eight bits are
// counted at a time into byte-wide counters (kSpread), emptied into the totals before they can
// overflow, every 255 members of a cluster: a ninth of the operations of a shift and an add per bit.
class BitCounts {
 public:
  BitCounts(int64_t C, int64_t bits)
      : C_(C), bits_(bits), words_((bits + 7) / 8), ones_(C * bits), size_(C), lanes_(C * 8), pending_(C) {}
  // Adds `code` to cluster j.
  void add(int64_t j, uint64_t code) {
    ++size_[j];
    for (int64_t w = 0; w < words_; ++w) lanes_[j * 8 + w] += kSpread[(code >> (8 * w)) & 0xFF];
    if (++pending_[j] == 255) empty(j);
  }
  // After the adds: the counts, read by ones and size.
  void finish() {
    for (int64_t j = 0; j < C_; ++j) empty(j);
  }
  int64_t ones(int64_t j, int64_t r) const { return ones_[j * bits_ + r]; }
  int64_t size(int64_t j) const { return size_[j]; }
  // Back to no members.
  void clear() {
    std::fill(ones_.begin(), ones_.end(), 0);
    std::fill(size_.begin(), size_.end(), 0);
  }

 private:
  void empty(int64_t j) {
    for (int64_t r = 0; r < bits_; ++r) ones_[j * bits_ + r] += (lanes_[j * 8 + r / 8] >> (8 * (r % 8))) & 0xFF;
    std::fill(lanes_.begin() + j * 8, lanes_.begin() + j * 8 + 8, 0);
    pending_[j] = 0;
  }
  int64_t C_, bits_, words_;
  std::vector<int64_t> ones_, size_;  // C × bits, C
  std::vector<uint64_t> lanes_;       // C × 8 words; bit 8w + i of a code counts in byte i of word w
  std::vector<int32_t> pending_;      // members added to each cluster since its counters were emptied
};

// One group: Lloyd's algorithm in Hamming space (§3.2.2). Its time is the popcounts of the
// assignments; x86-64's baseline has no popcount instruction (GCC calls a bit-twiddling routine), so
// the function is also compiled for CPUs with POPCNT and the loader picks the version that runs.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("popcnt", "default")))
#endif
void kmeans_group(const int64_t* codes, const bool* valid, int64_t n_all, int64_t C, int64_t bits,
                  int64_t iterations, int64_t* ids, int64_t* centroids_out) {
  std::vector<int64_t> members;  // indices of the valid queries, in order
  for (int64_t i = 0; i < n_all; ++i)
    if (valid[i]) members.push_back(i);
  const int64_t n = static_cast<int64_t>(members.size());

  // The first min(C, n) centroids are seeded with members' codes and take part; the others (fewer
  // members than clusters) stay empty.
  std::vector<uint64_t> centroids(C, 0);
  const int64_t seeded = std::min(C, n);
  for (int64_t j = 0; j < seeded; ++j) centroids[j] = static_cast<uint64_t>(codes[members[j * n / seeded]]);
  // Each member to its nearest seeded centroid by Hamming distance; ties go to the lowest index. (In
  // this function, so that its popcounts are compiled with POPCNT in that version.)
  auto assign = [&] {
    for (int64_t i : members) {
      const uint64_t code = static_cast<uint64_t>(codes[i]);
      int64_t best = 0;
      int best_distance = 65;
      for (int64_t j = 0; j < seeded; ++j) {
        const int d = __builtin_popcountll(code ^ centroids[j]);
        if (d < best_distance) best = j, best_distance = d;
      }
      ids[i] = best;
    }
  };
  for (int64_t i = 0; i < n_all; ++i) ids[i] = C;
  assign();
  BitCounts counts(C, bits);
  for (int64_t it = 0; it < iterations; ++it) {
    // Update: each centroid bit is the majority of its members' bits.
    counts.clear();
    for (int64_t i : members) counts.add(ids[i], static_cast<uint64_t>(codes[i]));
    counts.finish();
    for (int64_t j = 0; j < C; ++j) {
      for (int64_t r = 0; r < bits; ++r) {
        const int64_t set = 2 * counts.ones(j, r);
        if (set > counts.size(j)) centroids[j] |= uint64_t{1} << r;
        else if (set < counts.size(j)) centroids[j] &= ~(uint64_t{1} << r);
      }
    }
    assign();
  }
  for (int64_t j = 0; j < C; ++j) centroids_out[j] = static_cast<int64_t>(centroids[j]);
}

void check_ids_topk(const char* op, const Tensor& q, const Tensor& key, const Tensor& topk, const Tensor& ids) {
  TP_CHECK(q.dim() == 3 && key.dim() == 3 && topk.dim() == 3 && ids.dim() == 2, op,
           "expected q (G, N, E), key/value (G, S, ·), topk (G, C, k), ids (G, N); got ",
           to_string(q.shape()), ", ", to_string(key.shape()), ", ", to_string(topk.shape()), ", ",
           to_string(ids.shape()));
  const int64_t G = q.size(0), N = q.size(1), S = key.size(1), C = topk.size(1);
  TP_CHECK(key.size(0) == G && topk.size(0) == G && ids.size(0) == G && ids.size(1) == N, op,
           "group and query counts disagree: ", to_string(q.shape()), ", ", to_string(key.shape()),
           ", ", to_string(topk.shape()), ", ", to_string(ids.shape()));
  TP_CHECK(topk.dtype() == DType::Int64 && ids.dtype() == DType::Int64, op,
           "topk and ids must be int64, got ", topk.dtype(), " and ", ids.dtype());
  const auto on_gpu = [&] {  // the first offender, found on the device
    const cuda::OutOfRange key = cuda::first_out_of_range(op, contiguous(topk), 0, S);
    TP_CHECK(key.position == topk.numel(), op, "top-k key index ", key.value, " is outside [0, ", S, ")");
    const cuda::OutOfRange id = cuda::first_out_of_range(op, contiguous(ids), 0, C + 1);
    TP_CHECK(id.position == ids.numel(), op, "cluster id ", id.value, " is outside [0, ", C, "]");
  };
  if (on_cuda(op, q, on_gpu)) return;
  for (int64_t s : topk.to_vector<int64_t>())
    TP_CHECK(s >= 0 && s < S, op, "top-k key index ", s, " is outside [0, ", S, ")");
  for (int64_t c : ids.to_vector<int64_t>())
    TP_CHECK(c >= 0 && c <= C, op, "cluster id ", c, " is outside [0, ", C, "]");
}

// The rows each query reads, rows[g, topk[g, ids[g, i], t]] for t < k, or none for an invalid query
// (ids[g, i] = C): topk (G, C, k) and ids (G, N), contiguous, with, on a GPU, its kernels' sort of the
// queries by cluster (made once in the forward, reused by the backward).
class SparseRows {
 public:
  SparseRows(const Tensor& topk, const Tensor& ids)
      : topk_(contiguous(topk)), ids_(contiguous(ids)), topk_saved_(topk_), ids_saved_(ids_) {
    on_cuda("clustered_sparse_dot", ids_, [&] { layout_ = cuda::queries_by_cluster(ids_, clusters()); });
  }
  int64_t k() const { return topk_.size(2); }
  int64_t clusters() const { return topk_.size(1); }
  // Refuses topk or ids changed in place since the forward (a GPU's layout was built from them).
  void check_unchanged() const { topk_saved_.get(), ids_saved_.get(); }
  // The k row indices query i of group g reads, or nullptr (CPU).
  const int64_t* of(int64_t g, int64_t i) const {
    const int64_t N = ids_.size(1), C = clusters();
    const int64_t c = ids_.data<int64_t>()[g * N + i];
    return c == C ? nullptr : topk_.data<int64_t>() + (g * C + c) * k();
  }
  const Tensor& topk() const { return topk_; }
  const cuda::QueryLayout& layout() const { return layout_; }
  // Calls f(q, its k row indices) for every valid query q = g · N + i in parallel (CPU), for the
  // products whose output rows are the queries'; `work`: multiply-adds a query.
  template <class F>
  void for_each_query(int64_t work, F f) const {
    const int64_t queries = ids_.numel();
#pragma omp parallel for schedule(static) if (queries * work > kParallelWork)
    for (int64_t q = 0; q < queries; ++q)
      if (const int64_t* keys = of(q / ids_.size(1), q % ids_.size(1))) f(q, keys);
  }

 private:
  Tensor topk_, ids_;
  Saved topk_saved_, ids_saved_;
  cuda::QueryLayout layout_;
};

// ---- the three sparse products, contiguous operands; ops/cuda/cluster.h has their CUDA forms ----

// out (G, N, k): out[g, i, t] = a[g, i] · rows[g, s_t]   (a (G, N, E), rows (G, S, E))
void gather_dot(const Tensor& out, const Tensor& a, const Tensor& rows, const SparseRows& sparse) {
  if (on_cuda("clustered_sparse_dot", a, [&] { cuda::gather_dot(out, a, rows, sparse.topk(), sparse.layout()); }))
    return;
  const int64_t N = a.size(1), E = a.size(2), S = rows.size(1), k = sparse.k();
  visit_floating(a.dtype(), "clustered_sparse_dot", [&](auto tag) {
    using T = decltype(tag);
    const T* pa = a.data<T>();
    const T* pr = rows.data<T>();
    T* py = out.data<T>();
    sparse.for_each_query(k * E, [&](int64_t q, const int64_t* keys) {
      const T* aq = pa + q * E;
      for (int64_t t = 0; t < k; ++t) {
        const T* rs = pr + (q / N * S + keys[t]) * E;
        // In vector lanes, then their sum: this file is compiled for the x86-64 baseline, so every
        // x86-64 CPU sums in this one order. A sum in order was a chain of dependent adds: the
        // product took twice as long.
        T acc = 0;
#pragma omp simd reduction(+ : acc)
        for (int64_t e = 0; e < E; ++e) acc += aq[e] * rs[e];
        py[q * k + t] = acc;
      }
    });
  });
}

// out (G, N, E) += Σ_t coef[g, i, t] · rows[g, s_t]   (coef (G, N, k), rows (G, S, E))
void weighted_rows(const Tensor& out, const Tensor& coef, const Tensor& rows, const SparseRows& sparse) {
  if (on_cuda("clustered_sparse_weighted_sum", coef,
              [&] { cuda::weighted_rows(out, coef, rows, sparse.topk(), sparse.layout()); }))
    return;
  const int64_t N = coef.size(1), S = rows.size(1), E = rows.size(2), k = sparse.k();
  visit_floating(coef.dtype(), "clustered_sparse_weighted_sum", [&](auto tag) {
    using T = decltype(tag);
    const T* pc = coef.data<T>();
    const T* pr = rows.data<T>();
    T* py = out.data<T>();
    sparse.for_each_query(k * E, [&](int64_t q, const int64_t* keys) {
      T* yq = py + q * E;
      for (int64_t t = 0; t < k; ++t) {
        const T c = pc[q * k + t];
        const T* rs = pr + (q / N * S + keys[t]) * E;
        for (int64_t e = 0; e < E; ++e) yq[e] += c * rs[e];
      }
    });
  });
}

// grad_rows (G, S, E) += Σ_{i, t: s_t = s} coef[g, i, t] · a[g, i]   (coef (G, N, k), a (G, N, E)); one
// thread per group, so that each row's sum runs in query order.
void scatter_outer(const Tensor& grad_rows, const Tensor& coef, const Tensor& a, const SparseRows& sparse) {
  if (on_cuda("clustered_sparse_dot", coef,
              [&] { cuda::scatter_outer(grad_rows, coef, a, sparse.topk(), sparse.layout()); }))
    return;
  const int64_t G = coef.size(0), N = coef.size(1), S = grad_rows.size(1), E = a.size(2), k = sparse.k();
  visit_floating(coef.dtype(), "clustered_sparse_dot", [&](auto tag) {
    using T = decltype(tag);
    const T* pc = coef.data<T>();
    const T* pa = a.data<T>();
    T* pg = grad_rows.data<T>();
#pragma omp parallel for schedule(static) if (G > 1 && G * N * k * E > kParallelWork)
    for (int64_t g = 0; g < G; ++g)
      for (int64_t i = 0; i < N; ++i) {
        const int64_t* keys = sparse.of(g, i);
        if (!keys) continue;
        const T* ai = pa + (g * N + i) * E;
        for (int64_t t = 0; t < k; ++t) {
          const T c = pc[(g * N + i) * k + t];
          T* row = pg + (g * S + keys[t]) * E;
          for (int64_t e = 0; e < E; ++e) row[e] += c * ai[e];
        }
      }
  });
}

// Input i's gradient, when it wants one: `product` adds it into zeros of like's shape (the sparse
// products accumulate).
template <class Product>
void sparse_gradient(Gradients& g, size_t i, const Tensor& like, Product product) {
  if (!g.needs(i)) return;
  Tensor grad = zeros(like.shape(), like.options());
  product(grad);
  g.accumulate(i, grad);
}

}  // namespace

HammingClusters hamming_kmeans(const Tensor& codes, const Tensor& valid, int64_t clusters,
                               int64_t bits, int64_t iterations) {
  const char* op = "hamming_kmeans";
  TP_CHECK(codes.defined() && valid.defined(), op, "got an undefined tensor");
  TP_CHECK(codes.dtype() == DType::Int64 && codes.dim() == 2, op, "codes must be int64 (G, N), got ",
           codes.dtype(), " ", to_string(codes.shape()));
  TP_CHECK(valid.dtype() == DType::Bool && valid.shape() == codes.shape(), op,
           "valid must be bool of the codes' shape ", to_string(codes.shape()), ", got ",
           valid.dtype(), " ", to_string(valid.shape()));
  TP_CHECK(clusters >= 1, op, "needs at least one cluster, got ", clusters);
  TP_CHECK(bits >= 1 && bits <= 64, op, "bits must be in [1, 64], got ", bits);
  TP_CHECK(iterations >= 0, op, "iterations must be non-negative, got ", iterations);
  check_same_device(op, {&codes, &valid});
  const Tensor c = contiguous(codes), v = contiguous(valid);
  const int64_t G = codes.size(0), N = codes.size(1);
  const Options options{DType::Int64, codes.device()};
  HammingClusters out{empty({G, N}, options), empty({G, clusters}, options)};
  if (on_cuda(op, codes, [&] { cuda::hamming_kmeans(c, v, clusters, bits, iterations, out.ids, out.centroids); })) {
    record_cut(op, {codes, valid}, {out.ids, out.centroids});
    return out;
  }
  const int64_t* pc = c.data<int64_t>();
  const bool* pv = v.data<bool>();
  int64_t* ids = out.ids.data<int64_t>();
  int64_t* cents = out.centroids.data<int64_t>();
#pragma omp parallel for schedule(dynamic) if (G > 1 && G * N * clusters > kParallelWork)
  for (int64_t g = 0; g < G; ++g)
    kmeans_group(pc + g * N, pv + g * N, N, clusters, bits, iterations, ids + g * N, cents + g * clusters);
  record_cut(op, {codes, valid}, {out.ids, out.centroids});
  return out;
}

Tensor clustered_sparse_dot(const Tensor& q_in, const Tensor& key_in, const Tensor& topk_in, const Tensor& ids_in) {
  if (autocast_widens({&q_in, &key_in}))  // ops/autocast.h
    return clustered_sparse_dot(autocast_float32(q_in), autocast_float32(key_in), topk_in, ids_in);
  const char* op = "clustered_sparse_dot";
  check_same_device(op, {&q_in, &key_in, &topk_in, &ids_in});
  check_floating(op, q_in);
  check_same_dtype(op, q_in, key_in);
  check_ids_topk(op, q_in, key_in, topk_in, ids_in);
  TP_CHECK(q_in.size(2) == key_in.size(2), op, "queries and keys differ in E: ",
           to_string(q_in.shape()), " and ", to_string(key_in.shape()));
  const Tensor q = contiguous(q_in.detach()), key = contiguous(key_in.detach());
  const SparseRows rows(topk_in, ids_in);
  Tensor y = zeros({q.size(0), q.size(1), rows.k()}, q.options());
  gather_dot(y, q, key, rows);
  // dq[g, i] += Σ_t dy[g, i, t] · key[g, s_t];   dkey[g, s_t] += Σ_{i,t} dy[g, i, t] · q[g, i]
  record(op, {q_in, key_in, topk_in, ids_in}, {y},
         [qs = Saved(q), ks = Saved(key), rows](const std::vector<Tensor>& grads_out, Gradients& g) {
           const Tensor dy = contiguous(grads_out[0]);
           const Tensor& q = qs.get();
           const Tensor& key = ks.get();
           rows.check_unchanged();
           sparse_gradient(g, 0, q, [&](const Tensor& dq) { weighted_rows(dq, dy, key, rows); });
           sparse_gradient(g, 1, key, [&](const Tensor& dkey) { scatter_outer(dkey, dy, q, rows); });
         });
  return y;
}

Tensor clustered_sparse_weighted_sum(const Tensor& w_in, const Tensor& value_in, const Tensor& topk_in, const Tensor& ids_in) {
  if (autocast_widens({&w_in, &value_in}))  // ops/autocast.h
    return clustered_sparse_weighted_sum(autocast_float32(w_in), autocast_float32(value_in), topk_in, ids_in);
  const char* op = "clustered_sparse_weighted_sum";
  check_same_device(op, {&w_in, &value_in, &topk_in, &ids_in});
  check_floating(op, w_in);
  check_same_dtype(op, w_in, value_in);
  check_ids_topk(op, w_in, value_in, topk_in, ids_in);
  TP_CHECK(w_in.size(2) == topk_in.size(2), op, "weights have ", w_in.size(2), " entries per query but topk has ",
           topk_in.size(2), " keys per cluster");
  const Tensor w = contiguous(w_in.detach()), value = contiguous(value_in.detach());
  const SparseRows rows(topk_in, ids_in);
  Tensor y = zeros({w.size(0), w.size(1), value.size(2)}, w.options());
  weighted_rows(y, w, value, rows);
  // dw[g, i, t] += dy[g, i] · value[g, s_t];   dvalue[g, s_t] += Σ_{i,t} w[g, i, t] · dy[g, i]
  record(op, {w_in, value_in, topk_in, ids_in}, {y},
         [ws = Saved(w), vs = Saved(value), rows](const std::vector<Tensor>& grads_out, Gradients& g) {
           const Tensor dy = contiguous(grads_out[0]);
           const Tensor& w = ws.get();
           const Tensor& value = vs.get();
           rows.check_unchanged();
           sparse_gradient(g, 0, w, [&](const Tensor& dw) { gather_dot(dw, dy, value, rows); });
           sparse_gradient(g, 1, value, [&](const Tensor& dv) { scatter_outer(dv, w, dy, rows); });
         });
  return y;
}

Tensor clustered_sparse_attention(const Tensor& q_in, const Tensor& key_in, const Tensor& value_in,
                                  const Tensor& topk_in, const Tensor& ids_in, const Tensor& mass_in,
                                  const Tensor& keep_in) {
  const char* op = "clustered_sparse_attention";
  TP_CHECK(q_in.defined() && key_in.defined() && value_in.defined() && mass_in.defined(), op,
           "got an undefined tensor among q, key, value, mass");
  if (autocast_widens({&q_in, &key_in, &value_in, &mass_in}))  // ops/autocast.h
    return clustered_sparse_attention(autocast_float32(q_in), autocast_float32(key_in), autocast_float32(value_in),
                                      topk_in, ids_in, autocast_float32(mass_in), keep_in);
  check_same_device(op, {&q_in, &key_in, &value_in, &topk_in, &ids_in, &mass_in});
  check_floating(op, q_in);
  for (const Tensor* t : {&key_in, &value_in, &mass_in}) check_same_dtype(op, q_in, *t);
  check_ids_topk(op, q_in, key_in, topk_in, ids_in);
  const int64_t G = q_in.size(0), N = q_in.size(1), E = q_in.size(2), k = topk_in.size(2);
  TP_CHECK(key_in.size(2) == E, op, "queries and keys differ in E: ", to_string(q_in.shape()), " and ",
           to_string(key_in.shape()));
  TP_CHECK(value_in.dim() == 3 && value_in.size(0) == G && value_in.size(1) == key_in.size(1), op,
           "value must be (G, S, M) with keys ", to_string(key_in.shape()), ", got ", to_string(value_in.shape()));
  TP_CHECK(mass_in.shape() == (Shape{G, N, 1}), op, "mass must be (G, N, 1) = ", to_string({G, N, 1}), ", got ",
           to_string(mass_in.shape()));
  if (keep_in.defined()) {
    check_same_device(op, {&q_in, &keep_in});
    TP_CHECK(keep_in.dtype() == DType::Bool && keep_in.shape() == (Shape{G, N, k}), op,
             "keep must be bool (G, N, k) = ", to_string({G, N, k}), ", got ", keep_in.dtype(), " ",
             to_string(keep_in.shape()));
  }
  const Tensor q = contiguous(q_in.detach()), key = contiguous(key_in.detach()),
               value = contiguous(value_in.detach()), mass = mass_in.detach(),
               keep = keep_in.defined() ? keep_in.detach() : Tensor();
  const SparseRows rows(topk_in, ids_in);
  // p = softmax(q_i · k_{s_t} / √E) over the kept t, as the composition computes it: (G, N, k), made again
  // by the backward rather than held.
  const auto probabilities = [E, rows](const Tensor& q, const Tensor& key, const Tensor& keep) {
    Tensor dots = zeros({q.size(0), q.size(1), rows.k()}, q.options());
    gather_dot(dots, q, key, rows);
    return softmax(dots / std::sqrt(static_cast<double>(E)), keep);
  };
  Tensor y;
  {
    NoGradGuard no_grad;
    y = zeros({G, N, value.size(2)}, q.options());
    weighted_rows(y, probabilities(q, key, keep) * mass, value, rows);
  }
  // With w = p · m: dvalue[s_t] += Σ w_t dy_i; dw_t = dy_i · value[s_t]; dm_i = Σ_t p_t dw_t;
  // ds = p ⊙ (dp − Σ_t p_t dp_t) with dp = m dw (softmax's backward); dq_i = Σ_t ds_t key[s_t] / √E;
  // dkey[s_t] += ds_t q_i / √E.
  record(op, {q_in, key_in, value_in, mass_in, topk_in, ids_in}, {y},
         [qs = Saved(q), ks = Saved(key), vs = Saved(value), ms = Saved(mass), keep, rows, E,
          probabilities](const std::vector<Tensor>& grads_out, Gradients& g) {
           const Tensor dy = contiguous(grads_out[0]);
           const Tensor& q = qs.get();
           const Tensor& key = ks.get();
           const Tensor& value = vs.get();
           const Tensor& mass = ms.get();
           rows.check_unchanged();
           const Tensor p = probabilities(q, key, keep);
           Tensor dw = zeros(p.shape(), p.options());
           gather_dot(dw, dy, value, rows);
           sparse_gradient(g, 2, value, [&](const Tensor& dv) { scatter_outer(dv, p * mass, dy, rows); });
           if (g.needs(3)) g.accumulate(3, sum(p * dw, {-1}, KeepDim::Yes));
           if (!g.needs(0) && !g.needs(1)) return;
           const Tensor dp = dw * mass;
           const Tensor ds = p * (dp - sum(p * dp, {-1}, KeepDim::Yes)) / std::sqrt(static_cast<double>(E));
           sparse_gradient(g, 0, q, [&](const Tensor& dq) { weighted_rows(dq, ds, key, rows); });
           sparse_gradient(g, 1, key, [&](const Tensor& dkey) { scatter_outer(dkey, ds, q, rows); });
         });
  return y;
}

}  // namespace tapestry
