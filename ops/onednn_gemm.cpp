// Matrix products on the CPU through oneDNN (ops/onednn_gemm.h): float32 through dnnl_sgemm, bfloat16
// through its matmul primitive. Only this file sees oneDNN: a build without it (TAPESTRY_HAS_ONEDNN
// unset, e.g. `make run`'s) says it has none, and float32 products take OpenBLAS, bfloat16 ones
// float32 (ops/matmul.cpp).
#include "ops/onednn_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "core/error.h"

#ifdef TAPESTRY_HAS_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>  // (with dnnl.h: dnnl_sgemm)
#endif

namespace tapestry {

namespace {

#ifdef TAPESTRY_HAS_ONEDNN
constexpr bool kHasOneDnn = true;
#else
constexpr bool kHasOneDnn = false;
#endif

Float32Gemm checked(Float32Gemm gemm, const char* from) {
  TP_CHECK(gemm == Float32Gemm::OpenBlas || kHasOneDnn, from,
           "this build has no oneDNN (configure with oneDNN installed: scripts/setup); float32 products take "
           "openblas");
  return gemm;
}

// The environment's choice, or oneDNN where the build has it.
Float32Gemm from_environment() {
  const char* text = std::getenv("TAPESTRY_CPU_GEMM");
  if (!text || !*text) return kHasOneDnn ? Float32Gemm::OneDnn : Float32Gemm::OpenBlas;
  for (const Float32Gemm g : {Float32Gemm::OpenBlas, Float32Gemm::OneDnn})
    if (std::strcmp(text, to_string(g)) == 0) return checked(g, "TAPESTRY_CPU_GEMM");
  fail("TAPESTRY_CPU_GEMM", "expected openblas or onednn, got '", text, "'");
}

std::atomic<int> forced{-1};  // a Float32GemmScope's choice, or -1

}  // namespace

bool cpu_onednn_available() { return kHasOneDnn; }

const char* to_string(Float32Gemm gemm) { return gemm == Float32Gemm::OneDnn ? "onednn" : "openblas"; }

Float32Gemm cpu_float32_gemm() {
  const int f = forced.load(std::memory_order_relaxed);
  if (f >= 0) return static_cast<Float32Gemm>(f);
  static const Float32Gemm chosen = from_environment();
  return chosen;
}

Float32GemmScope::Float32GemmScope(Float32Gemm gemm)
    : previous_(forced.exchange(static_cast<int>(checked(gemm, "Float32GemmScope")))) {}

Float32GemmScope::~Float32GemmScope() { forced.store(previous_); }

#ifdef TAPESTRY_HAS_ONEDNN

namespace {

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// oneDNN's description of m. A dim of size 1 takes the largest extent of the others as its stride,
// a value oneDNN accepts whatever the stride it had (0 for a broadcast dim).
dnnl::memory::desc describe(const Bf16Matrix& m) {
  dnnl::memory::dims strides(m.strides.begin(), m.strides.end());
  int64_t extent = 1;
  for (size_t d = 0; d < m.dims.size(); ++d) extent = std::max(extent, m.dims[d] * m.strides[d]);
  for (size_t d = 0; d < m.dims.size(); ++d)
    if (m.dims[d] == 1) strides[d] = extent;
  return dnnl::memory::desc(dnnl::memory::dims(m.dims.begin(), m.dims.end()), dnnl::memory::data_type::bf16, strides);
}

}  // namespace

void onednn_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                  int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  const dnnl_status_t status =
      dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  TP_CHECK(status == dnnl_success, "matmul", "oneDNN's float32 product (", m, " × ", k, " by ", k, " × ", n,
           ") failed with status ", static_cast<int>(status));
}

bool cpu_bf16_gemm_available() {
  static const bool available = __builtin_cpu_supports("avx512bf16");
  return available;
}

bool cpu_bf16_gemm(const Bf16Matrix& a, const Bf16Matrix& b, const Bf16Matrix& out, float beta) {
  if (!cpu_bf16_gemm_available() || out.dims.size() > DNNL_MAX_NDIMS) return false;
  dnnl::primitive_attr attr;
  if (beta != 0.0f) {
    dnnl::post_ops sum;
    sum.append_sum(beta);  // out = result + beta · out, in float32 before the rounding
    attr.set_post_ops(sum);
  }
  dnnl::matmul::primitive_desc pd;
  try {  // creating a primitive costs microseconds; oneDNN caches the kernels it generates
    pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(describe(a), describe(b), describe(out)), attr, cpu_engine());
  } catch (const dnnl::error&) {
    return false;  // no kernel for these layouts: the caller's float32 path
  }
  const dnnl::engine& engine = cpu_engine();
  try {
    dnnl::stream stream(engine);
    dnnl::matmul(pd).execute(stream, {{DNNL_ARG_SRC, dnnl::memory(pd.src_desc(), engine, a.data)},
                                      {DNNL_ARG_WEIGHTS, dnnl::memory(pd.weights_desc(), engine, b.data)},
                                      {DNNL_ARG_DST, dnnl::memory(pd.dst_desc(), engine, out.data)}});
    stream.wait();
  } catch (const dnnl::error& e) {
    fail("matmul", "oneDNN's bfloat16 product failed: ", e.what());
  }
  return true;
}

#else

void onednn_sgemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t, float,
                  float*, int64_t) {
  fail("matmul", "this build has no oneDNN");
}

bool cpu_bf16_gemm_available() { return false; }

bool cpu_bf16_gemm(const Bf16Matrix&, const Bf16Matrix&, const Bf16Matrix&, float) { return false; }

#endif

}  // namespace tapestry
