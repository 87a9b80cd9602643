// Log-mel filterbanks with FFTW. Shapes: samples (N), frame buffer (n_fft), spectrum (n_fft/2 + 1),
// filters (M, n_fft/2 + 1), features (F, M).
#include "data/features.h"

#include <fftw3.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>

#include "core/creation.h"
#include "core/error.h"
#include "ops/creation.h"

namespace tapestry::data {

namespace {

constexpr const char* kOp = "log_mel_filterbank";
constexpr double kPi = 3.14159265358979323846;

double hz_to_mel(double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); }
double mel_to_hz(double mel) { return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0); }

int64_t samples_for(double ms, int64_t sample_rate) {
  return static_cast<int64_t>(std::llround(ms * static_cast<double>(sample_rate) / 1000.0));
}

double upper_corner(const FilterbankOptions& o) {
  return o.high_hz > 0 ? o.high_hz : static_cast<double>(o.sample_rate) / 2.0;
}

void check_options(const FilterbankOptions& o) {
  TP_CHECK(o.sample_rate > 0, kOp, "sample_rate must be positive, got ", o.sample_rate);
  TP_CHECK(samples_for(o.window_ms, o.sample_rate) >= 1, kOp, "the window of ", o.window_ms, " ms at ",
           o.sample_rate, " Hz is under one sample");
  TP_CHECK(samples_for(o.hop_ms, o.sample_rate) >= 1, kOp, "the hop of ", o.hop_ms, " ms at ", o.sample_rate,
           " Hz is under one sample");
  TP_CHECK(o.mel_bins >= 1, kOp, "mel_bins must be at least 1, got ", o.mel_bins);
  TP_CHECK(o.log_floor > 0, kOp, "log_floor must be positive, got ", o.log_floor);
  const double nyquist = static_cast<double>(o.sample_rate) / 2.0, high = upper_corner(o);
  TP_CHECK(o.low_hz >= 0 && o.low_hz < high && high <= nyquist, kOp, "the filters' range must satisfy 0 ≤ low_hz < ",
           "high_hz ≤ sample_rate / 2 = ", nyquist, ", got low_hz = ", o.low_hz, ", high_hz = ", high);
}

// M + 2 corner frequencies in Hz, equally spaced in mel.
std::vector<double> corners(const FilterbankOptions& o) {
  const double lo = hz_to_mel(o.low_hz), hi = hz_to_mel(upper_corner(o));
  std::vector<double> c(static_cast<size_t>(o.mel_bins + 2));
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = mel_to_hz(lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(o.mel_bins + 1));
  return c;
}

// FFTW's planner is not thread-safe; execution is.
std::mutex& planner_mutex() {
  static std::mutex m;
  return m;
}

struct PlanDeleter {
  void operator()(fftwf_plan_s* p) const {
    const std::lock_guard<std::mutex> lock(planner_mutex());
    fftwf_destroy_plan(p);
  }
};
struct FftwFree {
  void operator()(void* p) const { fftwf_free(p); }
};

}  // namespace

std::vector<double> mel_filter_centers(const FilterbankOptions& options) {
  check_options(options);
  const std::vector<double> c = corners(options);
  return std::vector<double>(c.begin() + 1, c.end() - 1);
}

Tensor log_mel_filterbank(const std::vector<float>& samples, const FilterbankOptions& o) {
  check_options(o);
  const int64_t N = static_cast<int64_t>(samples.size());
  const int64_t W = samples_for(o.window_ms, o.sample_rate), H = samples_for(o.hop_ms, o.sample_rate);
  const int64_t M = o.mel_bins;
  TP_CHECK(N > 0, kOp, "got an empty signal");
  TP_CHECK(N >= W, kOp, "the signal of ", N, " samples is shorter than one window of ", W, " samples (",
           o.window_ms, " ms at ", o.sample_rate, " Hz): no frame");
  const int64_t F = 1 + (N - W) / H;
  int64_t n_fft = 1;
  while (n_fft < W) n_fft *= 2;
  const int64_t K = n_fft / 2 + 1;

  std::vector<double> window(static_cast<size_t>(W), 1.0);  // (W), Hamming
  if (W > 1)
    for (int64_t n = 0; n < W; ++n)
      window[static_cast<size_t>(n)] = 0.54 - 0.46 * std::cos(2 * kPi * static_cast<double>(n) / static_cast<double>(W - 1));

  const std::vector<double> c = corners(o);
  std::vector<double> filters(static_cast<size_t>(M * K), 0.0);  // (M, K)
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) {
      const double f = static_cast<double>(k) * static_cast<double>(o.sample_rate) / static_cast<double>(n_fft);
      const double left = c[static_cast<size_t>(m)], centre = c[static_cast<size_t>(m + 1)],
                   right = c[static_cast<size_t>(m + 2)];
      double w = 0;
      if (f > left && f <= centre) w = (f - left) / (centre - left);
      else if (f > centre && f < right) w = (right - f) / (right - centre);
      filters[static_cast<size_t>(m * K + k)] = w;
    }

  std::unique_ptr<float, FftwFree> in(static_cast<float*>(fftwf_malloc(sizeof(float) * static_cast<size_t>(n_fft))));
  std::unique_ptr<fftwf_complex, FftwFree> out(
      static_cast<fftwf_complex*>(fftwf_malloc(sizeof(fftwf_complex) * static_cast<size_t>(K))));
  TP_CHECK(in && out, kOp, "out of memory for an FFT of ", n_fft, " points");
  std::unique_ptr<fftwf_plan_s, PlanDeleter> plan;
  {
    const std::lock_guard<std::mutex> lock(planner_mutex());
    plan.reset(fftwf_plan_dft_r2c_1d(static_cast<int>(n_fft), in.get(), out.get(), FFTW_ESTIMATE));
  }
  TP_CHECK(plan != nullptr, kOp, "FFTW could not plan an FFT of ", n_fft, " points");

  std::vector<float> features(static_cast<size_t>(F * M));  // (F, M)
  std::vector<double> power(static_cast<size_t>(K));        // (K)
  for (int64_t f = 0; f < F; ++f) {
    const float* x = samples.data() + f * H;
    for (int64_t n = 0; n < n_fft; ++n)
      in.get()[n] = n < W ? static_cast<float>(x[n] * window[static_cast<size_t>(n)]) : 0.0f;
    fftwf_execute(plan.get());
    for (int64_t k = 0; k < K; ++k) {
      const double re = out.get()[k][0], im = out.get()[k][1];
      power[static_cast<size_t>(k)] = re * re + im * im;
    }
    for (int64_t m = 0; m < M; ++m) {
      double e = 0;
      for (int64_t k = 0; k < K; ++k) e += filters[static_cast<size_t>(m * K + k)] * power[static_cast<size_t>(k)];
      features[static_cast<size_t>(f * M + m)] = static_cast<float>(std::log(std::max(e, o.log_floor)));
    }
  }

  if (o.normalization == Normalization::PerUtterance)
    for (int64_t m = 0; m < M; ++m) {
      double mean = 0, var = 0;
      for (int64_t f = 0; f < F; ++f) mean += features[static_cast<size_t>(f * M + m)];
      mean /= static_cast<double>(F);
      for (int64_t f = 0; f < F; ++f) {
        const double d = features[static_cast<size_t>(f * M + m)] - mean;
        var += d * d;
      }
      const double scale = 1.0 / std::sqrt(var / static_cast<double>(F) + 1e-10);
      for (int64_t f = 0; f < F; ++f) {
        float& v = features[static_cast<size_t>(f * M + m)];
        v = static_cast<float>((v - mean) * scale);
      }
    }
  return from_vector<float>(features, {F, M});
}

Tensor spec_augment(const Tensor& features, const Tensor& lengths, const SpecAugmentOptions& o, Generator& gen) {
  const char* op = "spec_augment";
  TP_CHECK(features.defined() && features.dim() == 3 && features.dtype() == DType::Float32 && features.device().is_cpu(),
           op, "expected features (B, N, M) float32 on the CPU, got ",
           features.defined() ? to_string(features.shape()) + " " + dtype_name(features.dtype()) + " on " +
                                    to_string(features.device())
                              : std::string("an undefined tensor"));
  const int64_t B = features.size(0), N = features.size(1), M = features.size(2);
  TP_CHECK(lengths.defined() && lengths.dim() == 1 && lengths.size(0) == B && lengths.dtype() == DType::Int64, op,
           "expected lengths (", B, ") int64 for features ", to_string(features.shape()));
  TP_CHECK(o.frequency_masks >= 0 && o.frequency_width >= 0 && o.time_masks >= 0 && o.time_width >= 0, op,
           "mask counts and widths must not be negative, got ", o.frequency_masks, " x ", o.frequency_width, " and ",
           o.time_masks, " x ", o.time_width);
  TP_CHECK(o.frequency_width <= M, op, "a frequency mask of up to ", o.frequency_width, " bins does not fit ", M,
           " mel bins");
  const std::vector<int64_t> length = lengths.to_vector<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    TP_CHECK(length[size_t(b)] >= 0 && length[size_t(b)] <= N, op, "lengths[", b, "] = ", length[size_t(b)],
             " is outside [0, ", N, "]");
  std::vector<float> x = features.to_vector<float>();
  if (!o.enabled() || B == 0) return from_vector(x, features.shape());
  const int64_t masks = o.frequency_masks + o.time_masks;
  const std::vector<double> u = rand({B, masks, 2}, gen, {DType::Float64}).to_vector<double>();
  // floor(u · (n + 1)) for u in [0, 1): uniform in {0, …, n}.
  const auto below = [](double v, int64_t n) { return std::min(n, int64_t(v * double(n + 1))); };
  for (int64_t b = 0; b < B; ++b) {
    float* row = x.data() + b * N * M;
    const int64_t frames = length[size_t(b)];
    for (int64_t m = 0; m < masks; ++m) {
      const double* draw = u.data() + (b * masks + m) * 2;
      const bool frequency = m < o.frequency_masks;
      const int64_t extent = frequency ? M : frames;
      const int64_t width = below(draw[0], frequency ? o.frequency_width : std::min(o.time_width, frames));
      const int64_t start = below(draw[1], extent - width);
      for (int64_t k = start; k < start + width; ++k) {
        if (frequency) {
          for (int64_t t = 0; t < frames; ++t) row[t * M + k] = 0.0f;
        } else {
          std::fill(row + k * M, row + (k + 1) * M, 0.0f);
        }
      }
    }
  }
  return from_vector(x, features.shape());
}

}  // namespace tapestry::data
