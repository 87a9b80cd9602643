// bfloat16 matrix products on the CPU through oneDNN's matmul primitive (ops/bf16_gemm.h). Only this file
// sees oneDNN: a build without it (TAPESTRY_HAS_ONEDNN unset, e.g. `make run`'s) says it has none,
// and matmul computes bfloat16 products in float32 instead (ops/matmul.cpp).
#include "ops/bf16_gemm.h"

#include "core/error.h"

#ifdef TAPESTRY_HAS_ONEDNN
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#endif

namespace tapestry {

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

bool cpu_bf16_gemm_available() { return false; }

bool cpu_bf16_gemm(const Bf16Matrix&, const Bf16Matrix&, const Bf16Matrix&, float) { return false; }

#endif

}  // namespace tapestry
