// Log-mel filterbank features: frame count, a pure tone in its mel bin, silence at the floor, the
// per-utterance normalisation, determinism, and bad input.
#include <cmath>

#include "data/features.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using data::FilterbankOptions;
using data::log_mel_filterbank;
using data::Normalization;

namespace {

std::vector<float> sine(double hz, int64_t n, int64_t rate, double amplitude = 0.5) {
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    x[static_cast<size_t>(i)] = static_cast<float>(amplitude * std::sin(2 * 3.14159265358979323846 * hz * static_cast<double>(i) / static_cast<double>(rate)));
  return x;
}

FilterbankOptions raw(int64_t bins = 40) {
  FilterbankOptions o;
  o.mel_bins = bins;
  o.normalization = Normalization::None;
  return o;
}

}  // namespace

TEST_CASE("log_mel_filterbank: 25 ms windows every 10 ms, whole windows only") {
  // 1 s at 16 kHz: W = 400, H = 160, F = 1 + (16000 − 400) / 160 = 98
  const Tensor f = log_mel_filterbank(sine(440, 16000, 16000), raw());
  CHECK(f.shape() == Shape{98, 40});
  CHECK(f.dtype() == DType::Float32);
  CHECK(log_mel_filterbank(std::vector<float>(400, 0.1f), raw(80)).shape() == Shape{1, 80});
  CHECK(log_mel_filterbank(std::vector<float>(559, 0.1f), raw()).shape() == Shape{1, 40});
  CHECK(log_mel_filterbank(std::vector<float>(560, 0.1f), raw()).shape() == Shape{2, 40});
  FilterbankOptions eight = raw();
  eight.sample_rate = 8000;  // W = 200, H = 80
  CHECK(log_mel_filterbank(std::vector<float>(8000, 0.1f), eight).shape() == Shape{98, 40});
}

TEST_CASE("log_mel_filterbank: a pure tone lands in the mel bin centred on it; silence is the floor") {
  for (int64_t bins : {40, 80})
    for (double where : {0.15, 0.4, 0.75}) {
      const FilterbankOptions o = raw(bins);
      const std::vector<double> centres = data::mel_filter_centers(o);
      REQUIRE(static_cast<int64_t>(centres.size()) == bins);
      const int64_t m = static_cast<int64_t>(where * static_cast<double>(bins));
      const double hz = centres[static_cast<size_t>(m)];
      INFO(bins << " bins, a tone at filter " << m << "'s centre, " << hz << " Hz");
      const std::vector<float> frame0 = log_mel_filterbank(sine(hz, 400, 16000), o).to_vector<float>();
      CHECK(std::max_element(frame0.begin(), frame0.end()) - frame0.begin() == m);
    }
  // the centres rise on the mel scale: equal steps in mel, 1000 Hz = 1000 mel
  const std::vector<double> c = data::mel_filter_centers(raw());
  const auto mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  CHECK(mel(1000.0) == doctest::Approx(1000.0).epsilon(1e-3));
  for (size_t i = 1; i < c.size(); ++i) CHECK(mel(c[i]) - mel(c[i - 1]) == doctest::Approx(mel(8000.0) / 41));
  // zeros: every bin at log(floor)
  FilterbankOptions o = raw();
  o.log_floor = 1e-6;
  for (float v : log_mel_filterbank(std::vector<float>(400, 0.0f), o).to_vector<float>())
    CHECK(v == doctest::Approx(std::log(1e-6)));
}

TEST_CASE("log_mel_filterbank: per-utterance normalisation, determinism") {
  // noise, louder in the first half: every bin varies over the frames
  const std::vector<double> noise = uniform({8000}, 5).to_vector<double>();
  std::vector<float> x(noise.begin(), noise.end());
  for (size_t i = 4000; i < x.size(); ++i) x[i] *= 0.1f;
  FilterbankOptions o;
  const Tensor f = log_mel_filterbank(x, o);
  const int64_t F = f.shape()[0], M = f.shape()[1];
  const std::vector<float> v = f.to_vector<float>();
  for (int64_t m = 0; m < M; ++m) {
    double mean = 0, sq = 0;
    for (int64_t t = 0; t < F; ++t) mean += v[static_cast<size_t>(t * M + m)];
    mean /= static_cast<double>(F);
    for (int64_t t = 0; t < F; ++t) sq += std::pow(v[static_cast<size_t>(t * M + m)] - mean, 2);
    CHECK(std::abs(mean) < 1e-5);
    CHECK(sq / static_cast<double>(F) == doctest::Approx(1.0).epsilon(1e-4));
  }
  CHECK(log_mel_filterbank(x, o).to_vector<float>() == v);
  // one frame: every normalised value is 0
  for (float u : log_mel_filterbank(std::vector<float>(400, 0.3f), o).to_vector<float>()) CHECK(u == 0.0f);
}

TEST_CASE("log_mel_filterbank refuses what it cannot frame") {
  const std::vector<float> x(1600, 0.1f);
  check_error([&] { log_mel_filterbank({}); }, {"log_mel_filterbank", "empty signal"});
  check_error([&] { log_mel_filterbank(std::vector<float>(399, 0.1f)); },
              {"log_mel_filterbank", "399 samples", "shorter than one window of 400 samples"});
  FilterbankOptions o;
  o.sample_rate = 0;
  check_error([&] { log_mel_filterbank(x, o); }, {"log_mel_filterbank", "sample_rate", "0"});
  o = {};
  o.mel_bins = 0;
  check_error([&] { log_mel_filterbank(x, o); }, {"log_mel_filterbank", "mel_bins"});
  o = {};
  o.hop_ms = 0.01;
  check_error([&] { log_mel_filterbank(x, o); }, {"log_mel_filterbank", "hop", "under one sample"});
  o = {};
  o.log_floor = 0;
  check_error([&] { log_mel_filterbank(x, o); }, {"log_mel_filterbank", "log_floor"});
  o = {};
  o.high_hz = 9000;
  check_error([&] { log_mel_filterbank(x, o); }, {"log_mel_filterbank", "high_hz = 9000", "8000"});
  o = {};
  o.low_hz = 500, o.high_hz = 400;
  check_error([&] { log_mel_filterbank(x, o); }, {"log_mel_filterbank", "low_hz = 500"});
}

TEST_CASE("spec_augment: bands of bins and spans of real frames become 0, as drawn; padding and the rest stay") {
  const int64_t B = 3, N = 20, M = 8;
  const Tensor features = to(uniform({B, N, M}, 5, 1.0, 2.0), DType::Float32);  // no value is 0
  const Tensor lengths = from_vector<int64_t>({20, 12, 0}, {B});
  data::SpecAugmentOptions o;
  o.frequency_masks = 2;
  o.frequency_width = 3;
  o.time_masks = 2;
  o.time_width = 5;
  Generator gen(7);
  const Tensor masked = data::spec_augment(features, lengths, o, gen);
  Generator again(7);
  check_close(to(data::spec_augment(features, lengths, o, again), DType::Float64), to(masked, DType::Float64), 0, 0);

  const std::vector<float> x = features.to_vector<float>(), y = masked.to_vector<float>();
  const std::vector<int64_t> len = lengths.to_vector<int64_t>();
  int64_t zeros_seen = 0;
  for (int64_t b = 0; b < B; ++b) {
    // A zero must lie in a whole masked bin (every real frame) or a whole masked frame (every bin).
    std::vector<bool> bin_masked(M, true), frame_masked(size_t(N), false);
    for (int64_t t = 0; t < len[size_t(b)]; ++t) {
      bool all = true;
      for (int64_t m = 0; m < M; ++m) all = all && y[size_t((b * N + t) * M + m)] == 0.0f;
      frame_masked[size_t(t)] = all;
    }
    for (int64_t m = 0; m < M; ++m)
      for (int64_t t = 0; t < len[size_t(b)]; ++t)
        if (!frame_masked[size_t(t)] && y[size_t((b * N + t) * M + m)] != 0.0f) bin_masked[size_t(m)] = false;
    for (int64_t t = 0; t < N; ++t)
      for (int64_t m = 0; m < M; ++m) {
        const size_t i = size_t((b * N + t) * M + m);
        if (t >= len[size_t(b)]) {
          CHECK(y[i] == x[i]);  // padding is left as it is
        } else if (y[i] == 0.0f) {
          ++zeros_seen;
          CHECK((frame_masked[size_t(t)] || (len[size_t(b)] > 0 && bin_masked[size_t(m)])));
        } else {
          CHECK(y[i] == x[i]);
        }
      }
    int64_t masked_bins = 0, masked_frames = 0;
    for (const bool v : bin_masked) masked_bins += v;
    for (const bool v : frame_masked) masked_frames += v;
    if (len[size_t(b)] > 0) CHECK(masked_bins <= o.frequency_masks * o.frequency_width);
    CHECK(masked_frames <= o.time_masks * o.time_width);
  }
  CHECK(zeros_seen > 0);  // this seed masks something

  data::SpecAugmentOptions off;
  Generator g(1);
  check_close(to(data::spec_augment(features, lengths, off, g), DType::Float64), to(features, DType::Float64), 0, 0);
  o.frequency_width = 9;
  check_error([&] { data::spec_augment(features, lengths, o, g); }, {"spec_augment", "does not fit 8 mel bins"});
  o.frequency_width = 3;
  check_error([&] { data::spec_augment(features, from_vector<int64_t>({20, 21, 0}, {B}), o, g); },
              {"spec_augment", "lengths[1] = 21"});
  check_error([&] { data::spec_augment(to(features, DType::Float64), lengths, o, g); }, {"spec_augment", "float32"});
  o.time_masks = -1;
  check_error([&] { data::spec_augment(features, lengths, o, g); }, {"spec_augment", "negative"});
}
