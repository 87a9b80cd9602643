/// @file
/// Log-mel filterbank features of a speech signal, the input of the CTC speech models (the
/// clustered-attention paper's WSJ experiments use 40 of them per 10 ms frame).
///
/// Shapes: N samples, W window samples, H hop samples, F frames, M mel bins.
///
/// Per frame f (samples [f·H, f·H + W)):
///   1. multiply by a Hamming window, w[n] = 0.54 − 0.46 cos(2πn / (W − 1));
///   2. zero-pad to n_fft, the smallest power of two ≥ W (512 for 25 ms at 16 kHz), and take the
///      power spectrum |X_k|², k = 0 … n_fft/2, with FFTW (single precision);
///   3. weight it by M triangular filters whose corners are M + 2 points equally spaced on the mel
///      scale, mel(f) = 2595 log10(1 + f/700) (HTK's), between low_hz and high_hz; filter m rises
///      from corner m to 1 at corner m + 1 (its centre) and falls to 0 at corner m + 2, evaluated at
///      each bin's frequency k · sample_rate / n_fft;
///   4. log(max(energy, log_floor)): silence gives log(log_floor), never −inf.
/// Then, with Normalization::PerUtterance, every mel bin is shifted and scaled to mean 0 and
/// variance 1 over the utterance's frames: (x − μ_m) / sqrt(σ²_m + 1e-10), σ² the population
/// variance (a constant bin, or a single frame, gives zeros). No dither and no pre-emphasis, so the
/// features are a deterministic function of the samples.
#pragma once

#include <cstdint>
#include <vector>

#include "core/random.h"
#include "core/tensor.h"

namespace tapestry::data {

/// What log_mel_filterbank does to the log energies after step 4 (see above).
enum class Normalization {
  None,         ///< nothing: the log energies as they are
  PerUtterance  ///< every mel bin shifted and scaled to mean 0 and variance 1 over the utterance
};

/// The settings of log_mel_filterbank (see above).
struct FilterbankOptions {
  int64_t sample_rate = 16000;  ///< Hz
  double window_ms = 25.0;      ///< W = round(window_ms · sample_rate / 1000) samples
  double hop_ms = 10.0;         ///< H = round(hop_ms · sample_rate / 1000) samples
  int64_t mel_bins = 40;        ///< M (80 is the other common choice)
  double low_hz = 0.0;          ///< the lowest filter's lower corner
  double high_hz = 0.0;         ///< the highest filter's upper corner; 0 means sample_rate / 2
  double log_floor = 1e-10;     ///< energies below it are raised to it before the log
  Normalization normalization = Normalization::PerUtterance;  ///< what follows step 4 (the log)
};

/// The (F, M) float32 features of `samples` (mono, any scale), F = 1 + ⌊(N − W) / H⌋: only whole
/// windows are framed, a tail shorter than a hop is dropped. Refused with an Error naming
/// "log_mel_filterbank": an empty signal, a signal shorter than one window (N < W: not a single
/// frame), a sample rate ≤ 0, a window or hop under one sample, M < 1, a floor ≤ 0, and corners that
/// are not 0 ≤ low_hz < high_hz ≤ sample_rate / 2.
Tensor log_mel_filterbank(const std::vector<float>& samples, const FilterbankOptions& options = {});

/// The center frequency in Hz of each of the M filters (corner m + 1), for the options' sample rate
/// and range: where a pure tone lands.
std::vector<double> mel_filter_centers(const FilterbankOptions& options = {});

/// SpecAugment's masks for training (Park et al. 2019, §2: frequency and time masking, no time
/// warping). Each utterance of a batch gets `frequency_masks` bands of f consecutive mel bins,
/// f uniform in {0, …, frequency_width} and starting at f0 uniform in {0, …, M − f}, and `time_masks`
/// spans of t consecutive frames, t uniform in {0, …, min(time_width, length)} and starting at t0
/// uniform in {0, …, length − t}. Masked values become 0, the mean of per-utterance-normalised
/// features. All zero (the default): no masking.
struct SpecAugmentOptions {
  int64_t frequency_masks = 0;  ///< bands of mel bins masked per utterance
  int64_t frequency_width = 0;  ///< F in the paper
  int64_t time_masks = 0;  ///< spans of frames masked per utterance
  int64_t time_width = 0;       ///< T in the paper
  /// Whether any mask can be drawn: a count and a width both positive, for frequency or time.
  bool enabled() const { return (frequency_masks > 0 && frequency_width > 0) || (time_masks > 0 && time_width > 0); }
};

/// features (B, N, M) float32 on the CPU with lengths (B) int64 (frames ≥ lengths[b] are padding and
/// are left as they are): a masked copy, as above. Draws from gen: per utterance, two uniforms per
/// mask (width, then start), frequency masks first. Refused with an Error naming "spec_augment":
/// other shapes or dtypes, a length outside [0, N], a negative count or width, a frequency width
/// above M.
Tensor spec_augment(const Tensor& features, const Tensor& lengths, const SpecAugmentOptions& options, Generator& gen);

}  // namespace tapestry::data
