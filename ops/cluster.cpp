#include "ops/cluster.h"

#include "core/tape_graph.h"

#include <array>
#include <vector>

#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/cluster.h"
#include "ops/cuda/index.h"
#include "ops/dispatch.h"
#include "ops/shape.h"

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

// The rows a query reads: key[g, topk[g, ids[g, i], t]] for t < k, or none for an invalid query.
struct Rows {
  const int64_t* topk;
  const int64_t* ids;
  int64_t N, S, C, k;
  // Pointer to the k key indices of query i of group g, or nullptr.
  const int64_t* of(int64_t g, int64_t i) const {
    const int64_t c = ids[g * N + i];
    return c == C ? nullptr : topk + (g * C + c) * k;
  }
};

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
  const Tensor topk = contiguous(topk_in), ids = contiguous(ids_in);
  const int64_t G = q.size(0), N = q.size(1), E = q.size(2), S = key.size(1), C = topk.size(1), k = topk.size(2);
  Tensor y = zeros({G, N, k}, q.options());
  // On a GPU the queries are grouped by cluster once, here, and the backward reuses that layout.
  cuda::QueryLayout layout;
  const auto on_gpu = [&] {
    layout = cuda::queries_by_cluster(ids, C);
    cuda::gather_dot(y, q, key, topk, layout);
  };
  if (!on_cuda(op, q, on_gpu)) {
    const Rows rows{topk.data<int64_t>(), ids.data<int64_t>(), N, S, C, k};
    visit_floating(q.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      const T* pq = q.data<T>();
      const T* pk = key.data<T>();
      T* py = y.data<T>();
#pragma omp parallel for collapse(2) schedule(static) if (G * N * k * E > kParallelWork)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t i = 0; i < N; ++i) {
          const int64_t* keys = rows.of(g, i);
          if (!keys) continue;
          const T* qi = pq + (g * N + i) * E;
          for (int64_t t = 0; t < k; ++t) {
            const T* ks = pk + (g * S + keys[t]) * E;
            T acc = 0;
            for (int64_t e = 0; e < E; ++e) acc += qi[e] * ks[e];
            py[(g * N + i) * k + t] = acc;
          }
        }
    });
  }
  // dq[g, i] += Σ_t dy[g, i, t] · key[g, s_t];   dkey[g, s_t] += Σ_{i,t} dy[g, i, t] · q[g, i]
  record(op, {q_in, key_in, topk_in, ids_in}, {y},
         [rows_shape = Shape{G, N, E, S, C, k}, qs = Saved(q), ks = Saved(key), ts = Saved(topk), is = Saved(ids),
          layout](const std::vector<Tensor>& grads_out, Gradients& g) {
           const Tensor dy = contiguous(grads_out[0]);
           const Tensor& q = qs.get();
           const Tensor& key = ks.get();
           const Tensor& topk = ts.get();
           const Tensor& ids = is.get();  // refuses ids changed in place (a GPU's layout was built from them)
           const int64_t G = rows_shape[0], N = rows_shape[1], E = rows_shape[2], S = rows_shape[3],
                         C = rows_shape[4], k = rows_shape[5];
           Tensor dq = g.needs(0) ? zeros(q.shape(), q.options()) : Tensor();
           Tensor dkey = g.needs(1) ? zeros(key.shape(), key.options()) : Tensor();
           const auto on_gpu = [&] {
             if (dq.defined()) cuda::weighted_rows(dq, dy, key, topk, layout);
             if (dkey.defined()) cuda::scatter_outer(dkey, dy, q, topk, layout);
           };
           if (!on_cuda("clustered_sparse_dot", dy, on_gpu)) {
             const Rows rows{topk.data<int64_t>(), ids.data<int64_t>(), N, S, C, k};
             visit_floating(q.dtype(), "clustered_sparse_dot", [&](auto tag) {
               using T = decltype(tag);
               const T* pq = q.data<T>();
               const T* pk = key.data<T>();
               const T* pdy = dy.data<T>();
               T* pdq = dq.defined() ? dq.data<T>() : nullptr;
               T* pdk = dkey.defined() ? dkey.data<T>() : nullptr;
               // One thread per group: the key gradient of a group is summed in query order.
#pragma omp parallel for schedule(static) if (G > 1 && G * N * k * E > kParallelWork)
               for (int64_t gi = 0; gi < G; ++gi)
                 for (int64_t i = 0; i < N; ++i) {
                   const int64_t* keys = rows.of(gi, i);
                   if (!keys) continue;
                   for (int64_t t = 0; t < k; ++t) {
                     const T d = pdy[(gi * N + i) * k + t];
                     const int64_t row = (gi * S + keys[t]) * E;
                     for (int64_t e = 0; e < E; ++e) {
                       if (pdq) pdq[(gi * N + i) * E + e] += d * pk[row + e];
                       if (pdk) pdk[row + e] += d * pq[(gi * N + i) * E + e];
                     }
                   }
                 }
             });
           }
           if (dq.defined()) g.accumulate(0, dq);
           if (dkey.defined()) g.accumulate(1, dkey);
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
  const Tensor topk = contiguous(topk_in), ids = contiguous(ids_in);
  const int64_t G = w.size(0), N = w.size(1), S = value.size(1), M = value.size(2), C = topk.size(1), k = topk.size(2);
  Tensor y = zeros({G, N, M}, w.options());
  // On a GPU the queries are grouped by cluster once, here, and the backward reuses that layout.
  cuda::QueryLayout layout;
  const auto on_gpu = [&] {
    layout = cuda::queries_by_cluster(ids, C);
    cuda::weighted_rows(y, w, value, topk, layout);
  };
  if (!on_cuda(op, w, on_gpu)) {
    const Rows rows{topk.data<int64_t>(), ids.data<int64_t>(), N, S, C, k};
    visit_floating(w.dtype(), op, [&](auto tag) {
      using T = decltype(tag);
      const T* pw = w.data<T>();
      const T* pv = value.data<T>();
      T* py = y.data<T>();
#pragma omp parallel for collapse(2) schedule(static) if (G * N * k * M > kParallelWork)
      for (int64_t g = 0; g < G; ++g)
        for (int64_t i = 0; i < N; ++i) {
          const int64_t* keys = rows.of(g, i);
          if (!keys) continue;
          T* yi = py + (g * N + i) * M;
          for (int64_t t = 0; t < k; ++t) {
            const T a = pw[(g * N + i) * k + t];
            const T* vs = pv + (g * S + keys[t]) * M;
            for (int64_t m = 0; m < M; ++m) yi[m] += a * vs[m];
          }
        }
    });
  }
  // dw[g, i, t] += dy[g, i] · value[g, s_t];   dvalue[g, s_t] += Σ_{i,t} w[g, i, t] · dy[g, i]
  record(op, {w_in, value_in, topk_in, ids_in}, {y},
         [dims = Shape{G, N, M, S, C, k}, ws = Saved(w), vs = Saved(value), ts = Saved(topk), is = Saved(ids),
          layout](const std::vector<Tensor>& grads_out, Gradients& g) {
           const Tensor dy = contiguous(grads_out[0]);
           const Tensor& w = ws.get();
           const Tensor& value = vs.get();
           const Tensor& topk = ts.get();
           const Tensor& ids = is.get();  // refuses ids changed in place (a GPU's layout was built from them)
           const int64_t G = dims[0], N = dims[1], M = dims[2], S = dims[3], C = dims[4], k = dims[5];
           Tensor dw = g.needs(0) ? zeros(w.shape(), w.options()) : Tensor();
           Tensor dv = g.needs(1) ? zeros(value.shape(), value.options()) : Tensor();
           const auto on_gpu = [&] {
             if (dw.defined()) cuda::gather_dot(dw, dy, value, topk, layout);
             if (dv.defined()) cuda::scatter_outer(dv, w, dy, topk, layout);
           };
           if (!on_cuda("clustered_sparse_weighted_sum", dy, on_gpu)) {
             const Rows rows{topk.data<int64_t>(), ids.data<int64_t>(), N, S, C, k};
             visit_floating(w.dtype(), "clustered_sparse_weighted_sum", [&](auto tag) {
               using T = decltype(tag);
               const T* pw = w.data<T>();
               const T* pv = value.data<T>();
               const T* pdy = dy.data<T>();
               T* pdw = dw.defined() ? dw.data<T>() : nullptr;
               T* pdv = dv.defined() ? dv.data<T>() : nullptr;
#pragma omp parallel for schedule(static) if (G > 1 && G * N * k * M > kParallelWork)
               for (int64_t gi = 0; gi < G; ++gi)
                 for (int64_t i = 0; i < N; ++i) {
                   const int64_t* keys = rows.of(gi, i);
                   if (!keys) continue;
                   const T* dyi = pdy + (gi * N + i) * M;
                   for (int64_t t = 0; t < k; ++t) {
                     const int64_t row = (gi * S + keys[t]) * M;
                     const T a = pw[(gi * N + i) * k + t];
                     T acc = 0;
                     for (int64_t m = 0; m < M; ++m) {
                       acc += dyi[m] * pv[row + m];
                       if (pdv) pdv[row + m] += a * dyi[m];
                     }
                     if (pdw) pdw[(gi * N + i) * k + t] += acc;
                   }
                 }
             });
           }
           if (dw.defined()) g.accumulate(0, dw);
           if (dv.defined()) g.accumulate(1, dv);
         });
  return y;
}

}  // namespace tapestry
