/// @file
/// Audio files and the WAV + transcript list layout (asterisk/list.tsv, docs/DATA.md).
///
/// Audio is decoded by libsndfile, so any format it reads works (WAV in every PCM and float
/// encoding, FLAC, AIFF, ...); samples come back as float in [-1, 1], mono.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tapestry::data {

/// What to do with a file of more than one channel: refuse it (the default: a speech corpus is
/// mono, and two channels may be two speakers), or average the channels.
enum class MultiChannel {
  Refuse,  ///< throw Error for a file of more than one channel
  Average  ///< mix the channels into one, their mean at each instant
};

/// How read_audio and read_audio_list read a file.
struct AudioOptions {
  MultiChannel multi_channel = MultiChannel::Refuse;  ///< what to do with more than one channel
  int64_t sample_rate = 0;  ///< when > 0, a file at any other rate is refused (nothing is resampled)
};

/// At most 2^28 samples (17 minutes at 256 kHz, 9 hours at 8 kHz) per file.
inline constexpr int64_t kMaxAudioSamples = int64_t{1} << 28;

/// A decoded audio file (read_audio).
struct Audio {
  std::vector<float> samples;  ///< (T) mono
  int64_t sample_rate = 0;     ///< Hz
};

/// An entry of a list file (read_audio_list): the audio and its transcript.
struct Utterance {
  std::string path;  ///< resolved from the list file
  int64_t line = 0;  ///< its line in the list file, from 1
  std::string transcript;  ///< the line's second field, as written
  std::vector<float> samples;  ///< (T) mono
  int64_t sample_rate = 0;     ///< Hz
};

/// The audio file at `path`. Throws `Error("audio: <path>: ...")` when the file is missing, not a
/// format libsndfile reads (its message is included), has no samples or more than kMaxAudioSamples,
/// more than one channel under MultiChannel::Refuse, a rate other than options.sample_rate, is
/// shorter than its header says (a WAVE file whose data chunk runs past the end of the file
/// included), or holds a sample that is NaN, infinite or outside [-1, 1] (possible in float
/// encodings); the message names the sample.
Audio read_audio(const std::string& path, const AudioOptions& options = {});

/// The list file at `list_path`: each line `path<TAB>transcript` (empty lines are ignored), path
/// absolute or relative to the list's folder, the transcript non-empty UTF-8. Errors name the list,
/// the line and the field, and read_audio's reason for a path it refuses. With limit > 0 only the
/// first `limit` entries are read.
std::vector<Utterance> read_audio_list(const std::string& list_path, const AudioOptions& options = {},
                                       int64_t limit = 0);

}  // namespace tapestry::data
