// The baseline attentions on the GPU against the CPU, values and the gradients of q, k and v:
// oracle-top, attention over listed keys, shared-QK full attention, sliding-window (local) attention,
// improved-clustered and its causal form,
// routing, Reformer's LSH attention and neural clustering attention with each form of its losses, with
// key padding and causal masks, at lengths around a warp
// and beyond one block. They are compositions of ops that run on the GPU already (matmul, softmax,
// top-k, sort, gather, the clustered sparse products), so this checks the compositions end to end.
//
// Discrete choices (top-k keys, nearest centroids, LSH buckets) are made on each device from values
// that agree to rounding; the inputs are random, so a near-tie that would flip a choice is unlikely,
// and the clusters of improved-clustered are computed once, on the CPU, for both devices.
#include "nn/attention/clustered.h"
#include "nn/attention/config.h"
#include "nn/attention/full.h"
#include "nn/attention/local.h"
#include "nn/attention/neural_clustering.h"
#include "nn/attention/reformer.h"
#include "nn/attention/routing.h"
#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::attention;
using namespace tapestry::testing;

namespace {

// Sums over E and over the kept keys in another order, and exp on the GPU's libm.
Tolerance attention_tol(DType dtype) { return dtype == DType::Float32 ? Tolerance{2e-5, 2e-4} : Tolerance{1e-11, 1e-10}; }

// Key lengths (B,) on the device of `like`: the first sample full, the second about two thirds.
Padding key_padding(int64_t B, int64_t S, const Tensor& like) {
  std::vector<int64_t> lengths(B, S);
  if (B > 1) lengths[1] = std::max<int64_t>(1, 2 * S / 3);
  return {Tensor(), from_vector<int64_t>(lengths, {B}, like.device())};
}

const std::vector<int64_t>& lengths() {
  static const std::vector<int64_t> n{1, 31, 33, 130};
  return n;
}

}  // namespace

TEST_CASE("oracle-top and shared-QK full attention: values and gradients (padding, causal)") {
  uint64_t seed = 1;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : lengths())
      for (Causal causal : {Causal::No, Causal::Yes}) {
        INFO(dtype << " N " << n << " causal " << (causal == Causal::Yes));
        const std::vector<Tensor> qkv{input({2, 3, n, 8}, ++seed, dtype), input({2, 3, n, 8}, ++seed, dtype),
                                      input({2, 3, n, 5}, ++seed, dtype)};
        check_parity([&](const std::vector<Tensor>& in) {
          return oracle_top_attention(in[0], in[1], in[2], 7, key_padding(2, n, in[0]), causal);
        }, qkv, attention_tol(dtype));
        const AttentionConfig shared = AttentionConfig::parse("full:shared-qk=1");
        check_parity([&](const std::vector<Tensor>& in) {
          Generator gen(0);
          return attend(shared, in[0], in[0], in[2], key_padding(2, n, in[0]), causal, gen);
        }, qkv, attention_tol(dtype));
      }
}

TEST_CASE("local attention: values and gradients (windows, padding, causal)") {
  uint64_t seed = 200;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : lengths())
      for (int64_t window : {0, 5, 40})
        for (Causal causal : {Causal::No, Causal::Yes}) {
          INFO(dtype << " N " << n << " window " << window << " causal " << (causal == Causal::Yes));
          const std::vector<Tensor> qkv{input({2, 3, n, 8}, ++seed, dtype), input({2, 3, n, 8}, ++seed, dtype),
                                        input({2, 3, n, 5}, ++seed, dtype)};
          check_parity([&](const std::vector<Tensor>& in) {
            return local_attention(in[0], in[1], in[2], window, key_padding(2, n, in[0]), causal);
          }, qkv, attention_tol(dtype));
        }
}

TEST_CASE("improved-clustered: values and gradients with the CPU's clusters") {
  // Eq. 17's rest as A^c V less its top-k part (nn/attention/clustered.cpp), with padded keys, more
  // top keys than some rows have, and more clusters than queries.
  uint64_t seed = 300;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : lengths()) {
      INFO(dtype << " N " << n);
      const Tensor q = input({2, 2, n, 8}, ++seed, dtype);
      Generator gen(5);
      const QueryClusters clusters = cluster_queries(q, Tensor(), {4, 63, 3}, gen);
      check_parity([&](const std::vector<Tensor>& in) {
        const QueryClusters here{to(clusters.ids, in[0].device()), clusters.count};
        return improved_clustered_attention(in[0], in[1], in[2], here, 5, key_padding(2, n, in[0]));
      }, {q, input({2, 2, n, 8}, ++seed, dtype), input({2, 2, n, 4}, ++seed, dtype)}, attention_tol(dtype));
    }
}

TEST_CASE("causal improved-clustered: values and gradients with the CPU's clusters") {
  uint64_t seed = 100;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : lengths()) {
      INFO(dtype << " N " << n);
      const Tensor q = input({2, 2, n, 8}, ++seed, dtype);
      Generator gen(3);
      const QueryClusters clusters = cluster_queries_causal(q, Tensor(), {4, 63, 0}, gen);
      check_parity([&](const std::vector<Tensor>& in) {
        const QueryClusters here{to(clusters.ids, in[0].device()), clusters.count};
        return causal_improved_clustered_attention(in[0], in[1], in[2], here, 5, key_padding(2, n, in[0]));
      }, {q, input({2, 2, n, 8}, ++seed, dtype), input({2, 2, n, 4}, ++seed, dtype)}, attention_tol(dtype));
      // the grouping itself: integer ids, the same on both devices
      check_values([](const std::vector<Tensor>& in) {
        Generator g(4);
        return cluster_queries_causal(in[0], Tensor(), {4, 63, 0}, g).ids;
      }, {q}, kExact);
    }
}

TEST_CASE("routing attention: values and gradients, balanced and causal; the centroid update") {
  uint64_t seed = 200;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : lengths())
      for (Causal causal : {Causal::No, Causal::Yes}) {
        INFO(dtype << " N " << n << " causal " << (causal == Causal::Yes));
        Generator init(5);
        const Tensor mu = to(initial_routing_centroids(3, 4, 8, init), dtype);
        check_parity([&](const std::vector<Tensor>& in) {
          return routing_attention(in[0], in[1], in[2], to(mu, in[0].device()), key_padding(2, n, in[0]), causal);
        }, {input({2, 3, n, 8}, ++seed, dtype), input({2, 3, n, 8}, ++seed, dtype), input({2, 3, n, 5}, ++seed, dtype)},
                     attention_tol(dtype));
        check_values([&](const std::vector<Tensor>& in) {
          return update_routing_centroids(in[0], in[1], to(mu, in[0].device()), key_padding(2, n, in[0]), 0.9);
        }, {input({2, 3, n, 8}, ++seed, dtype), input({2, 3, n, 8}, ++seed, dtype)}, attention_tol(dtype));
      }
}

TEST_CASE("reformer attention: values and gradients (rounds, padding, causal)") {
  uint64_t seed = 300;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : lengths())
      for (Causal causal : {Causal::No, Causal::Yes}) {
        INFO(dtype << " N " << n << " causal " << (causal == Causal::Yes));
        const AttentionConfig config = AttentionConfig::parse("reformer:rounds=3,bucket=8");
        check_parity([&](const std::vector<Tensor>& in) {
          Generator gen(6);  // the same Philox stream on both devices
          return attend(config, in[0], in[0], in[1], key_padding(2, n, in[0]), causal, gen);
        }, {input({2, 2, n, 8}, ++seed, dtype), input({2, 2, n, 4}, ++seed, dtype)}, attention_tol(dtype));
      }
}

TEST_CASE("neural clustering attention: output, Ĉ, L1 and L2 with every loss form, values and gradients") {
  // The argmax of U decides the sort; random inputs leave no near-tie at these sizes, and both devices
  // must agree on the assignment exactly.
  uint64_t seed = 400;
  const int64_t B = 2, D = 8, C = 3, H = 2;
  for (DType dtype : {DType::Float32, DType::Float64})
    for (int64_t n : lengths())
      for (ClusteringLosses losses : {ClusteringLosses::Projected, ClusteringLosses::Printed, ClusteringLosses::Cosine})
        for (Causal causal : {Causal::No, Causal::Yes}) {
          INFO(dtype << " N " << n << " losses=" << losses_name(losses) << " causal " << (causal == Causal::Yes));
          const std::vector<Tensor> inputs{input({B, n, D}, ++seed, dtype), input({C, D}, ++seed, dtype),
                                           input({D, D}, ++seed, dtype),    input({D, D}, ++seed, dtype),
                                           input({D, D}, ++seed, dtype),    input({D, D}, ++seed, dtype),
                                           input({D, D}, ++seed, dtype)};
          // Its blocks fused (the default), and for the output also composed (Fused::No).
          auto run = [&](const std::vector<Tensor>& in, Fused fused = Fused::Yes) {
            const Tensor lengths = from_vector<int64_t>({n, std::max<int64_t>(1, 2 * n / 3)}, {B}, in[0].device());
            return neural_clustering_attention(in[0], in[1], {in[2], in[3], in[4], in[5], in[6]}, H, lengths, causal,
                                               losses, fused);
          };
          check_values([&](const std::vector<Tensor>& in) { return run(in).assignment; }, inputs, kExact);
          check_parity([&](const std::vector<Tensor>& in) { return run(in).output; }, inputs, attention_tol(dtype));
          check_parity([&](const std::vector<Tensor>& in) { return run(in, Fused::No).output; }, inputs,
                       attention_tol(dtype));
          check_parity([&](const std::vector<Tensor>& in) { return run(in).centroids; }, inputs, attention_tol(dtype));
          check_parity([&](const std::vector<Tensor>& in) {
            const NeuralClusteringResult r = run(in);
            return r.clustering_loss + r.sorting_loss * 0.5;
          }, inputs, attention_tol(dtype));
        }
}
