// `tapestry bench ops`: how close single ops come to what the machine can do, measured in one run.
//
// Memory-bound ops (forward only, no tape): achieved bandwidth = (bytes read + bytes written) / time,
// and its fraction of a plain copy's bandwidth measured in the same run (cudaMemcpyAsync device to
// device on a GPU; memcpy in OpenMP chunks on the CPU) — the ceiling for such ops.
//   copy        clone(x)                       reads n, writes n
//   copy_       copy_(y, x) into an existing y reads n, writes n
//   add_        add_(y, x) into an existing y  reads 2n, writes n
//   add, mul    a + b, a * b                   reads 2n, writes n
//   exp         exp(x)                         reads n, writes n
//   softmax     rows of 1024                   reads n, writes n
//   layer_norm  rows of 384, weight and bias   reads n, writes n
// Matmul: GFLOP/s (2·B·M·K·N flops / time) against a direct BLAS call of the same shape
// (cblas_sgemm per batch on the CPU; cublasGemmStridedBatchedEx with Tapestry's float32 compute
// mode on a GPU), reported as Tapestry's time / the reference's time.
//
// Every timed region is bracketed by the device's synchronize(); all data is float32.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <limits>
#include <memory>

#include "apps/bench.h"
#include "tapestry.h"

#ifdef TAPESTRY_HAS_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#endif

namespace tapestry::app::bench {
namespace {

constexpr int64_t kSoftmaxWidth = 1024;   // an attention row at N = 1024
constexpr int64_t kLayerNormWidth = 384;  // the attention benchmark's D

struct OpsOptions {
  CommonOptions common;
  int64_t elements = 0;  // 0: the device's default
  std::string matmul;    // empty: the device's default
};

// "1024x1024x1024" (M×K×N) or "6x1024x64x1024" (B×M×K×N) -> {B, M, K, N}; empty when malformed.
std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> dims;
  for (const std::string& part : split_at(text, 'x')) {
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 9) return {};
    dims.push_back(std::stoll(part));
    if (dims.back() < 1) return {};
  }
  if (dims.size() == 3) dims.insert(dims.begin(), 1);
  return dims.size() == 4 ? dims : std::vector<int64_t>{};
}

std::string check_shapes(const std::string& text) {
  for (const std::string& shape : split_at(text, ','))
    if (parse_shape(shape).empty()) return "expected shapes MxKxN or BxMxKxN separated by commas, got '" + shape + "'";
  return {};
}

// Square products, the attention benchmark's feed-forward (B·N = 4096 tokens, D = 384 -> F = 1536),
// and its per-head products at N = 1024 (scores QKᵀ, then A·V).
std::string default_shapes(Device device) {
  return std::string(device.is_cuda() ? "4096x4096x4096," : "") + "1024x1024x1024,4096x384x1536,6x1024x64x1024,6x1024x1024x64";
}

const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A plain copy of `bytes` bytes between two buffers of `device`: the bandwidth ceiling.
void reference_copy(void* dst, const void* src, size_t bytes, Device device) {
#ifdef TAPESTRY_HAS_CUDA
  if (device.is_cuda()) {
    TP_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, nullptr) == cudaSuccess &&
                 cudaStreamSynchronize(nullptr) == cudaSuccess,
             "bench ops", "cudaMemcpyAsync failed");
    return;
  }
#endif
  (void)device;
  const int chunks = omp_get_max_threads();
  const size_t chunk = (bytes + chunks - 1) / chunks;
#pragma omp parallel for schedule(static)
  for (int c = 0; c < chunks; ++c) {
    const size_t begin = std::min(bytes, size_t(c) * chunk), end = std::min(bytes, begin + chunk);
    std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin, end - begin);
  }
}

#ifdef TAPESTRY_HAS_CUDA
// A cuBLAS handle of the benchmark's own, on the default stream, independent of Tapestry's context.
class DirectCublas {
 public:
  explicit DirectCublas(int index) {
    TP_CHECK(cudaSetDevice(index) == cudaSuccess && cublasCreate(&handle_) == CUBLAS_STATUS_SUCCESS, "bench ops",
             "cannot create a cuBLAS handle on cuda:", index);
  }
  ~DirectCublas() { cublasDestroy(handle_); }
  DirectCublas(const DirectCublas&) = delete;
  DirectCublas& operator=(const DirectCublas&) = delete;

  // Row-major c (B, M, N) = a (B, M, K) · b (B, K, N), as column-major cᵀ = bᵀ aᵀ; waits until done.
  void gemm(const float* a, const float* b, float* c, int64_t batch, int64_t m, int64_t k, int64_t n, int index) {
    const float one = 1.0f, zero = 0.0f;
    const cublasComputeType_t compute = cuda::float32_matmul(index) == cuda::Float32Matmul::TF32
                                            ? CUBLAS_COMPUTE_32F_FAST_TF32
                                            : CUBLAS_COMPUTE_32F;
    const cublasStatus_t status = cublasGemmStridedBatchedEx(
        handle_, CUBLAS_OP_N, CUBLAS_OP_N, int(n), int(m), int(k), &one, b, CUDA_R_32F, int(n), k * n, a, CUDA_R_32F,
        int(k), m * k, &zero, c, CUDA_R_32F, int(n), m * n, int(batch), compute, CUBLAS_GEMM_DEFAULT);
    TP_CHECK(status == CUBLAS_STATUS_SUCCESS && cudaStreamSynchronize(nullptr) == cudaSuccess, "bench ops",
             "cublasGemmStridedBatchedEx failed (status ", int(status), ")");
  }

 private:
  cublasHandle_t handle_ = nullptr;
};
#endif

// The direct BLAS call of the same product: c = a · b, row-major, per batch.
void reference_gemm(const Tensor& a, const Tensor& b, const Tensor& c, const std::vector<int64_t>& s) {
  const int64_t batch = s[0], m = s[1], k = s[2], n = s[3];
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = c.data<float>();
#ifdef TAPESTRY_HAS_CUDA
  if (a.device().is_cuda()) {
    static DirectCublas cublas(a.device().index);
    cublas.gemm(pa, pb, pc, batch, m, k, n, a.device().index);
    return;
  }
#endif
  for (int64_t i = 0; i < batch; ++i)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(n), int(k), 1.0f, pa + i * m * k, int(k),
                pb + i * k * n, int(n), 0.0f, pc + i * m * n, int(n));
}

const char* reference_gemm_name(Device device) {
  return device.is_cuda() ? "cublasGemmStridedBatchedEx" : "cblas_sgemm";
}

// One bandwidth row: `run` moves `bytes` bytes.
nlohmann::json bandwidth_row(const std::string& op, const Shape& shape, double bytes, const OpsOptions& o, Device device,
                             Profiler* profiler, const std::function<void()>& run) {
  nlohmann::json row = {{"op", op}, {"shape", shape}, {"bytes", bytes}};
  try {
    const Timing timing = time_runs(device, o.common.warmup, o.common.repeats, run, {}, profiler);
    row["status"] = "ok";
    row["ms"] = timing.median();
    row["ms_runs"] = timing.ms;
    row["gb_per_s"] = bytes / (timing.median() * 1e-3) / 1e9;
  } catch (const std::exception& e) {
    row["status"] = failure_status(e);
    row["ms"] = kNaN;
  }
  return row;
}

nlohmann::json bandwidth_rows(const OpsOptions& o, Device device, Profiler* profiler, int64_t n) {
  NoGradGuard no_grad;
  Generator gen(o.common.seed);
  const Options options{DType::Float32, device};
  const Tensor a = randn({n}, gen, options), b = randn({n}, gen, options);
  const double bytes2 = 2.0 * 4 * double(n), bytes3 = 3.0 * 4 * double(n);
  nlohmann::json rows = nlohmann::json::array();
  const auto add_row = [&](const std::string& op, const Shape& shape, double bytes, const std::function<void()>& run) {
    rows.push_back(bandwidth_row(op, shape, bytes, o, device, profiler, run));
  };
  {
    const Tensor dst = empty({n}, options);
    add_row(device.is_cuda() ? "cudaMemcpy (reference)" : "memcpy (reference)", {n}, bytes2,
            [&] { reference_copy(dst.raw_data(), a.raw_data(), size_t(n) * 4, device); });
  }
  add_row("copy", {n}, bytes2, [&] { clone(a); });
  {
    // The in-place forms write into memory that already exists: against the rows above they show
    // what allocating each output costs.
    const Tensor dst = empty({n}, options), sum = clone(a);
    add_row("copy_ (in place)", {n}, bytes2, [&] { copy_(dst, a); });
    add_row("add_ (in place)", {n}, bytes3, [&] { add_(sum, b); });
  }
  add_row("add", {n}, bytes3, [&] { add(a, b); });
  add_row("mul", {n}, bytes3, [&] { mul(a, b); });
  add_row("exp", {n}, bytes2, [&] { exp(a); });
  const int64_t softmax_rows = std::max<int64_t>(1, n / kSoftmaxWidth);
  const Tensor scores = randn({softmax_rows, kSoftmaxWidth}, gen, options);
  add_row("softmax", scores.shape(), 2.0 * 4 * double(scores.numel()), [&] { softmax(scores); });
  const int64_t norm_rows = std::max<int64_t>(1, n / kLayerNormWidth);
  const Tensor hidden = randn({norm_rows, kLayerNormWidth}, gen, options);
  const Tensor weight = ones({kLayerNormWidth}, options), bias = zeros({kLayerNormWidth}, options);
  add_row("layer_norm", hidden.shape(), 2.0 * 4 * double(hidden.numel()), [&] { layer_norm(hidden, weight, bias); });
  const double copy = rows[0]["status"] == "ok" ? rows[0]["gb_per_s"].get<double>() : kNaN;
  for (auto& row : rows)
    row["fraction_of_copy"] = row["status"] == "ok" ? row["gb_per_s"].get<double>() / copy : kNaN;
  return rows;
}

nlohmann::json matmul_row(const std::vector<int64_t>& s, const OpsOptions& o, Device device, Profiler* profiler) {
  const int64_t batch = s[0], m = s[1], k = s[2], n = s[3];
  const double flops = 2.0 * double(batch) * double(m) * double(k) * double(n);
  nlohmann::json row = {{"op", "matmul"}, {"shape", s}, {"flops", flops}, {"reference", reference_gemm_name(device)}};
  try {
    NoGradGuard no_grad;
    Generator gen(o.common.seed);
    const Options options{DType::Float32, device};
    const Tensor a = randn({batch, m, k}, gen, options), b = randn({batch, k, n}, gen, options);
    const Tensor c = empty({batch, m, n}, options);
    const Timing ours = time_runs(device, o.common.warmup, o.common.repeats, [&] { matmul(a, b); }, {}, profiler);
    const Timing reference =
        time_runs(device, o.common.warmup, o.common.repeats, [&] { reference_gemm(a, b, c, s); });
    row["status"] = "ok";
    row["ms"] = ours.median();
    row["ms_runs"] = ours.ms;
    row["gflop_per_s"] = flops / (ours.median() * 1e-3) / 1e9;
    row["reference_ms"] = reference.median();
    row["reference_gflop_per_s"] = flops / (reference.median() * 1e-3) / 1e9;
    row["time_vs_reference"] = ours.median() / reference.median();
  } catch (const std::exception& e) {
    row["status"] = failure_status(e);
    row["ms"] = kNaN;
  }
  context(device).allocator().empty_cache();
  return row;
}

std::string shape_text(const nlohmann::json& shape) {
  std::string text;
  for (const auto& d : shape) text += (text.empty() ? "" : "×") + std::to_string(d.get<int64_t>());
  return text;
}

int run(const OpsOptions& o) {
  const Device device = o.common.device.resolve();
  const train::Float32MatmulScope tf32(o.common.tf32, device);
  check_json_path(o.common.json);
  const std::unique_ptr<Profiler> profiler = train::make_profiler(o.common.profile, device);
  const int64_t elements = o.elements > 0 ? o.elements : (device.is_cuda() ? int64_t(1) << 27 : int64_t(1) << 24);
  const std::string shapes = o.matmul.empty() ? default_shapes(device) : o.matmul;
  std::cout << "bench ops on " << device << " (" << device_name(device) << "), float32, median of " << o.common.repeats
            << " after " << o.common.warmup << " warm-up\n";
  nlohmann::json rows = bandwidth_rows(o, device, profiler.get(), elements);
  Table bandwidth({"op", "shape", "ms", "GB/s", "× copy"});
  for (const auto& row : rows)
    bandwidth.add({row["op"].get<std::string>(), shape_text(row["shape"]),
                   row["status"] == "ok" ? format("%.3f", number(row, "ms")) : row["status"].get<std::string>(),
                   format("%.1f", number(row, "gb_per_s")), format("%.2f", number(row, "fraction_of_copy"))});
  bandwidth.print(std::cout);
  std::cout << "\n";

  // TFLOP/s on a GPU, GFLOP/s on the CPU, in the table; the JSON always has GFLOP/s.
  const double unit = device.is_cuda() ? 1e3 : 1.0;
  const std::string flops = device.is_cuda() ? "TFLOP/s" : "GFLOP/s";
  Table products({"matmul B×M×K×N", "ms", flops, std::string(reference_gemm_name(device)) + " " + flops,
                  "time ×reference"});
  for (const std::string& text : split_at(shapes, ',')) {
    nlohmann::json row = matmul_row(parse_shape(text), o, device, profiler.get());
    products.add({shape_text(row["shape"]),
                  row["status"] == "ok" ? format("%.3f", number(row, "ms")) : row["status"].get<std::string>(),
                  format("%.2f", number(row, "gflop_per_s") / unit),
                  format("%.2f", number(row, "reference_gflop_per_s") / unit),
                  format("%.3f", number(row, "time_vs_reference"))});
    rows.push_back(std::move(row));
  }
  products.print(std::cout);
  if (!o.common.json.empty()) {
    const nlohmann::json config = {{"elements", elements},         {"softmax_width", kSoftmaxWidth},
                                   {"layer_norm_width", kLayerNormWidth}, {"matmul", split_at(shapes, ',')},
                                   {"dtype", "float32"},                  {"repeats", o.common.repeats},
                                   {"warmup", o.common.warmup},           {"seed", o.common.seed}};
    write_json(o.common.json, document("ops", device, config, rows));
  }
  if (profiler) train::write_profile(o.common.profile, *profiler);
  return 0;
}

}  // namespace

void add_ops(CommandLine& cli, CLI::App* bench) {
  const auto setup = [](CLI::App& command) {
    auto options = std::make_shared<OpsOptions>();
    add_common_options(command, options->common, Precision::Float32Only);
    command.add_option("--elements", options->elements,
                        "Elements per tensor of the memory-bound ops (default 2^24 on CPU, 2^27 on GPU)")
        ->check(integer_check<decltype(options->elements)>(1));
    add_value(command, "--matmul", options->matmul,
              "Matmul shapes MxKxN or BxMxKxN, comma-separated (default: square, feed-forward and attention shapes)")
        ->check(check_shapes);
    return [options] { return run_reporting_errors("bench ops", [&] { return run(*options); }); };
  };
  cli.add("ops", "Op micro-benchmark: GB/s of memory-bound ops, GFLOP/s of matmul", setup, bench);
}

}  // namespace tapestry::app::bench
