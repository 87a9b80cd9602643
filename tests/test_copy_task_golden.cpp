// The copy task on the training harness reproduces, bit for bit, what the copy-task app computed
// before it was moved onto the harness: the same evaluation losses and accuracies at every step and
// the same checkpoint tensors (model, optimizer buffers). The expected values were recorded from the
// app as it stood before the move (its own loop, optimizer and checkpoint code), with these options,
// on x86-64 with OpenBLAS's AVX2 (Haswell) kernels; a change to the harness that reorders a random
// draw, a reduction or an update shows up here. Three deliberate changes of arithmetic since moved
// the checkpoints' last bits, and their digests were recorded again (the evaluation values stayed the
// same to the bit): cross-entropy's exponential became ops/fast_exp.h's; a batch of matrices times
// one matrix became one product of all their rows (ops/matmul.cpp); improved-clustered's eq. 17 became
// A^c V less its top-k part (nn/attention/clustered.cpp), where it had been A^c with the top-k zeroed
// times V (the improved-clustered run's digest alone). A fourth moved one evaluation value too:
// improved-clustered's A^c V, its top keys and their weights came from fused attention with each
// centroid's log-sum-exp (A^c is no longer formed), which put the third evaluation's loss one float32
// ulp lower (0x1.1c277cp+1 before) and the run's digest with it. A fifth moved it back: layer
// norm's row sums run in eight float64 lanes (ops/norm.cpp), which put that loss at 0x1.1c277cp+1
// again and moved both runs' digests. A sixth moved the neural-clustering run's second evaluation
// loss by two float32 ulps (0x1.6c7ce4p+1 before) and its digest: W_O runs on the blocks' sorted
// output, then the product is resorted, where the output was resorted first, and W_Q, W_K and W_V
// run on the words in their order, then their products are sorted, where the words were sorted
// first (nn/attention/neural_clustering.cpp). A seventh moved that run's digest alone: each word's
// similarity to its own centroid in L1 is its column of word Ĉᵀ, a product, where it was the sum of
// the two rows' elementwise product (nn/attention/neural_clustering.cpp, similarity_to_own_centroid).
// An eighth moved it again: the clustering's products with X W_C run re-associated around W_C,
// C (X W_C)ᵀ as (C W_Cᵀ) Xᵀ and U (X W_C) as (U X) W_C, so that X W_C is never formed (ProjectedWords).
// A ninth moved the improved-clustered run's third evaluation loss one float32 ulp lower (0x1.1c277cp+1
// before) and its digest: eq. 13 and 16 became one op, clustered_sparse_attention (ops/cluster.h), whose
// backward makes the softmax again and sums its gradient's terms in another order (its forward gives the
// composition's values to the bit), and the sparse dot products sum in vector lanes (ops/cluster.cpp).
// OpenBLAS's AVX-512 kernels round differently, so the suite
// runs with OPENBLAS_CORETYPE=Haswell (ctest sets it; CMakeLists.txt), and these runs take OpenBLAS
// for their float32 products (a build with oneDNN would otherwise take oneDNN's: ops/onednn_gemm.h).
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "apps/copy_task.h"
#include "ops/onednn_gemm.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using app::CopyTaskOptions;

namespace {

// FNV-1a over a tensor's dtype, shape and bytes.
uint64_t fingerprint(const Tensor& t) {
  uint64_t h = 0xcbf29ce484222325ull;
  const auto mix = [&](const void* data, size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ bytes[i]) * 0x100000001b3ull;
  };
  const int dtype = static_cast<int>(t.dtype());
  mix(&dtype, sizeof dtype);
  for (const int64_t d : t.shape()) mix(&d, sizeof d);
  mix(t.raw_data(), size_t(t.numel()) * element_size(t.dtype()));
  return h;
}

struct Golden {
  std::vector<double> values;  // per evaluation: loss, train_loss, masked and token accuracy
  size_t tensors = 0;          // checkpoint tensors
  uint64_t digest = 0;         // FNV-1a over every tensor's name and fingerprint, in name order
};

Golden run(const CopyTaskOptions& options, const TempDir& dir) {
  const Float32GemmScope openblas(Float32Gemm::OpenBlas);  // the recordings' library (ops/onednn_gemm.h)
  CopyTaskOptions o = options;
  o.train.log = dir.file("golden.jsonl");
  o.train.save = dir.file("golden.ckpt");
  o.train.progress = false;
  app::run_copy_task(o);
  Golden g;
  std::ifstream log(o.train.log);
  for (std::string line; std::getline(log, line);) {
    const nlohmann::json r = nlohmann::json::parse(line);
    if (r["event"] != "eval") continue;
    for (const char* key : {"loss", "train_loss", "masked_accuracy", "token_accuracy"})
      g.values.push_back(r[key].get<double>());
  }
  g.digest = 0xcbf29ce484222325ull;
  for (const auto& [name, tensor] : load_checkpoint(o.train.save).tensors) {
    const uint64_t h = fingerprint(tensor);
    for (const char c : name + std::string(reinterpret_cast<const char*>(&h), sizeof h))
      g.digest = (g.digest ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
    ++g.tensors;
  }
  return g;
}

// Prints a run's values in the form of the tables below (for recording them anew, deliberately).
void print(const Golden& g) {
  std::printf("{{");
  for (const double v : g.values) std::printf("%a, ", v);
  std::printf("}, %zu, 0x%016" PRIx64 "ull}\n", g.tensors, g.digest);
}

void check(const Golden& got, const Golden& expected) {
  if (std::getenv("TAPESTRY_PRINT_GOLDEN")) print(got);
  const char* kernels = std::getenv("OPENBLAS_CORETYPE");
  INFO("recorded with OpenBLAS's Haswell kernels; this run has OPENBLAS_CORETYPE="
       << std::string(kernels ? kernels : "(unset)") << " (ctest sets Haswell)");
  REQUIRE(got.values.size() == expected.values.size());
  for (size_t i = 0; i < got.values.size(); ++i) {
    INFO("evaluation value " << i);
    CHECK(std::memcmp(&got.values[i], &expected.values[i], sizeof(double)) == 0);
  }
  CHECK(got.tensors == expected.tensors);
  CHECK(got.digest == expected.digest);
}

CopyTaskOptions small() {
  CopyTaskOptions o = app::copy_task_preset(app::Preset::Smoke);
  o.length = 5;
  o.layers = 2;
  o.heads = 2;
  o.head_dim = 8;
  o.ff = 16;
  o.batch = 4;
  o.train.steps = 6;
  o.train.eval_every = 2;
  o.eval_batches = 2;
  return o;
}

}  // namespace

TEST_CASE("copy-task golden: improved-clustered, Adam, clipping, dropout") {
  TempDir dir;
  CopyTaskOptions o = small();
  o.attention = attention::AttentionConfig::parse("improved-clustered:clusters=3,topk=4");
  o.dropout = 0.1;
  check(run(o, dir), Golden{{0x1.3ff0f4p+1, 0x1.61bd59p+1, 0x0p+0, 0x1p-3, 0x1.2af10fp+1, 0x1.4a63fdp+1, 0x0p+0,
                             0x1.5555555555555p-3, 0x1.1c277bp+1, 0x1.387239p+1, 0x0p+0, 0x1.5555555555555p-3},
                            105,
                            0xd00aeeb04e6be0e8ull});
}

TEST_CASE("copy-task golden: neural-clustering, RAdam, no clipping") {
  TempDir dir;
  CopyTaskOptions o = small();
  // The losses of the recording, when projected was the only form (the default is now cosine), and
  // its blocks' attention composed (fused=0; the fused form sums in another order, and is checked
  // against this one in tests/test_neural_clustering.cpp).
  o.attention = attention::AttentionConfig::parse("neural-clustering:clusters=3,losses=projected,fused=0");
  o.train.optimizer = optim::OptimizerConfig::parse("radam:lr=1e-3");
  o.train.clip = 0;
  check(run(o, dir), Golden{{0x1.6cc256p+1, 0x1.677223p+1, 0x0p+0, 0x0p+0, 0x1.6c7ce2p+1, 0x1.68ed6fp+1, 0x0p+0,
                             0x0p+0, 0x1.6c5d67p+1, 0x1.67f44bp+1, 0x0p+0, 0x0p+0},
                            90,
                            0x0537bc8b4f70558bull});
}
