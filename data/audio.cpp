#include "data/audio.h"

#include <sndfile.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <system_error>

#include "core/error.h"
#include "data/text_lines.h"

namespace tapestry::data {

namespace {

constexpr const char* kReader = "audio";

// A RIFF/WAVE file's data chunk: the bytes its header declares and the bytes the file holds after
// that header (both 0 when the file is no WAVE file or has no data chunk). libsndfile quietly
// shortens a data chunk that runs past the end of the file, so a truncated recording would
// otherwise read as a shorter one.
struct DataChunk {
  uint64_t declared = 0, present = 0;
};
DataChunk wave_data_chunk(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char riff[12] = {};
  if (!in.read(riff, 12) || std::memcmp(riff, "RIFF", 4) != 0 || std::memcmp(riff + 8, "WAVE", 4) != 0) return {};
  const uint64_t size = std::filesystem::file_size(path);
  uint64_t at = 12;
  for (int chunks = 0; chunks < 64 && at + 8 <= size; ++chunks) {  // a few chunks precede the data
    unsigned char header[8];
    in.seekg(std::streamoff(at));
    if (!in.read(reinterpret_cast<char*>(header), 8)) return {};
    const uint64_t length = uint64_t(header[4]) | uint64_t(header[5]) << 8 | uint64_t(header[6]) << 16 |
                            uint64_t(header[7]) << 24;
    if (std::memcmp(header, "data", 4) == 0) return {length, size - at - 8};
    at += 8 + length + (length & 1);  // chunks are padded to an even length
  }
  return {};
}

// read_audio with errors that start with `where` (the path, or the list entry that gave it).
Audio read_audio_at(const std::string& path, const std::string& where, const AudioOptions& options) {
  std::error_code ec;
  TP_CHECK(std::filesystem::exists(path, ec), kReader, where, ": no such file");
  TP_CHECK(!std::filesystem::is_directory(path, ec), kReader, where, ": is a folder, not an audio file");
  SF_INFO info{};
  std::unique_ptr<SNDFILE, int (*)(SNDFILE*)> file(sf_open(path.c_str(), SFM_READ, &info), &sf_close);
  TP_CHECK(file, kReader, where, ": not an audio file libsndfile can read (", sf_strerror(nullptr), ")");
  TP_CHECK(info.channels >= 1, kReader, where, ": header says ", info.channels, " channels");
  TP_CHECK(info.channels == 1 || options.multi_channel == MultiChannel::Average, kReader, where, ": ",
           info.channels, " channels; expected mono (MultiChannel::Average averages the channels)");
  TP_CHECK(info.samplerate > 0, kReader, where, ": header says a sample rate of ", info.samplerate, " Hz");
  TP_CHECK(options.sample_rate <= 0 || info.samplerate == options.sample_rate, kReader, where, ": sampled at ",
           info.samplerate, " Hz; expected ", options.sample_rate, " Hz");
  TP_CHECK(info.frames > 0, kReader, where, ": no samples");
  TP_CHECK(info.frames <= kMaxAudioSamples / info.channels, kReader, where, ": ", info.frames, " frames of ",
           info.channels, " channels, more than the limit of ", kMaxAudioSamples, " samples");

  // A streamed WAVE file declares 0 or 2^32 − 1 bytes: its length is unknown, not wrong.
  const DataChunk chunk = wave_data_chunk(path);
  TP_CHECK(chunk.declared == 0 || chunk.declared == 0xFFFFFFFFu || chunk.declared <= chunk.present, kReader, where,
           ": truncated: the header says ", chunk.declared, " bytes of samples but the file holds ", chunk.present);

  std::vector<float> interleaved(static_cast<size_t>(info.frames) * info.channels);  // (T, channels)
  const sf_count_t read = sf_readf_float(file.get(), interleaved.data(), info.frames);
  TP_CHECK(read == info.frames, kReader, where, ": header says ", info.frames, " frames but ", read,
           " could be read (", sf_strerror(file.get()), ")");
  // Float encodings can hold anything: NaN, infinities, or values far outside [-1, 1] that would
  // reach the features as NaN or overflow.
  for (size_t i = 0; i < interleaved.size(); ++i)
    TP_CHECK(std::isfinite(interleaved[i]) && std::fabs(interleaved[i]) <= 1.0f, kReader, where, ": sample ",
             i / size_t(info.channels) + 1, " is ", interleaved[i], ", outside [-1, 1]");
  Audio audio;
  audio.sample_rate = info.samplerate;
  if (info.channels == 1) {
    audio.samples = std::move(interleaved);
    return audio;
  }
  audio.samples.resize(static_cast<size_t>(info.frames));
  for (size_t t = 0; t < audio.samples.size(); ++t) {
    float sum = 0;
    for (int c = 0; c < info.channels; ++c) sum += interleaved[t * info.channels + c];
    audio.samples[t] = sum / static_cast<float>(info.channels);
  }
  return audio;
}

}  // namespace

Audio read_audio(const std::string& path, const AudioOptions& options) { return read_audio_at(path, path, options); }

std::vector<Utterance> read_audio_list(const std::string& list_path, const AudioOptions& options, int64_t limit) {
  const std::vector<std::string> lines = read_lines(kReader, list_path, Utf8::Check);
  std::vector<Utterance> utterances;
  for (size_t i = 0; i < lines.size() && (limit <= 0 || int64_t(utterances.size()) < limit); ++i) {
    const std::string& line = lines[i];
    if (line.empty()) continue;
    const size_t tab = line.find('\t');
    TP_CHECK(tab != std::string::npos, kReader, list_path, ", line ", i + 1,
             ": no TAB between field 1 (path) and field 2 (transcript)");
    TP_CHECK(line.find('\t', tab + 1) == std::string::npos, kReader, list_path, ", line ", i + 1,
             ": more than 2 fields (expected path<TAB>transcript)");
    TP_CHECK(tab > 0, kReader, list_path, ", line ", i + 1, ": field 1 (path) is empty");
    TP_CHECK(tab + 1 < line.size(), kReader, list_path, ", line ", i + 1, ": field 2 (transcript) is empty");
    const std::string path = resolve_listed_path(list_path, line.substr(0, tab));
    Audio audio = read_audio_at(path, detail::concat(list_path, ", line ", i + 1, ", field 1 (path) ", path), options);
    utterances.push_back({path, int64_t(i + 1), line.substr(tab + 1), std::move(audio.samples), audio.sample_rate});
  }
  TP_CHECK(!utterances.empty(), kReader, list_path, ": no entries (expected lines path<TAB>transcript)");
  return utterances;
}

}  // namespace tapestry::data
