#include "data/speech.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "data/audio.h"
#include "data/text_lines.h"

namespace tapestry::data {

namespace {
constexpr const char* kReader = "speech";
}  // namespace

std::vector<std::string> read_symbol_inventory(const std::string& path) {
  const std::vector<std::string> lines = read_lines(kReader, path, Utf8::Check);
  std::vector<std::string> symbols;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& s = lines[i];
    TP_CHECK(!s.empty() && s.find_first_of(" \t\r") == std::string::npos, kReader, path, ", line ", i + 1,
             ": a symbol is non-empty and has no blanks, got '", s, "'");
    TP_CHECK(std::find(symbols.begin(), symbols.end(), s) == symbols.end(), kReader, path, ", line ", i + 1,
             ": symbol '", s, "' is listed twice");
    symbols.push_back(s);
  }
  TP_CHECK(!symbols.empty(), kReader, path, ": no symbols");
  return symbols;
}

int64_t ctc_positions_needed(const std::vector<int64_t>& labels) {
  int64_t needed = int64_t(labels.size());
  for (size_t i = 1; i < labels.size(); ++i) needed += labels[i] == labels[i - 1];
  return needed;
}

std::vector<float> filterbank_features(const std::vector<float>& samples, const FilterbankOptions& filterbank,
                                       const std::string& where) {
  const auto window = int64_t(filterbank.window_ms * double(filterbank.sample_rate) / 1000.0 + 0.5);
  TP_CHECK(int64_t(samples.size()) >= window, kReader, where, ": ", samples.size(), " samples, shorter than one ",
           filterbank.window_ms, " ms window (", window, " samples)");
  return log_mel_filterbank(samples, filterbank).to_vector<float>();
}

LabelledUtterances read_labelled_utterances(const std::string& list, const std::vector<std::string>& inventory,
                                            const SpeechListOptions& options) {
  std::map<std::string, int64_t> ids;
  for (size_t i = 0; i < inventory.size(); ++i) ids[inventory[i]] = int64_t(i) + 1;
  const int64_t stack = options.stack, bins = options.filterbank.mel_bins;
  TP_CHECK(stack >= 1, kReader, "stack must be at least 1, got ", stack);
  LabelledUtterances u;
  for (Utterance& utterance :
       read_audio_list(list, {MultiChannel::Refuse, options.filterbank.sample_rate}, options.limit)) {
    const std::string where = list + ", line " + std::to_string(utterance.line);
    std::vector<int64_t> labels;
    for (const std::string& symbol : words(utterance.transcript)) {
      const auto id = ids.find(symbol);
      TP_CHECK(id != ids.end(), kReader, where, ", field 2: symbol '", symbol, "' is not in the inventory");
      labels.push_back(id->second);
    }
    std::vector<float> features =
        filterbank_features(utterance.samples, options.filterbank, where + " (" + utterance.path + ")");
    utterance.samples = {};
    const int64_t frames = int64_t(features.size()) / bins;
    if ((frames + stack - 1) / stack < ctc_positions_needed(labels)) {
      if (u.infeasible++ == 0) u.first_infeasible = utterance.path;
      continue;
    }
    u.features.push_back(std::move(features));
    u.frames.push_back(frames);
    u.labels.push_back(std::move(labels));
  }
  // The stack is named: it is a setting (--stack), not the audio, that leaves every utterance out.
  TP_CHECK(u.size() > 0, kReader, list, ": no utterance long enough for its labels at a stack of ", stack,
           " frames a position (", u.infeasible, " too short, e.g. ", u.first_infeasible, "): a smaller stack gives "
           "more positions");
  return u;
}

}  // namespace tapestry::data
