// The data readers on small files written here: what they return, and every bad input refused with
// a message that names the file, the line and the field.
#include <sndfile.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <cstdlib>
#include <fstream>
#include <filesystem>

#include "data/audio.h"
#include "data/classification.h"
#include "data/datasets.h"
#include "data/idx.h"
#include "data/parallel_text.h"
#include "data/speech.h"
#include "data/text_lines.h"
#include "testing.h"

using namespace std::string_literals;
using namespace tapestry;
using namespace tapestry::data;
using tapestry::testing::check_error;
using tapestry::testing::read_text;
using tapestry::testing::TempDir;

namespace {

void write(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  REQUIRE(out.good());
}

void write_gzip(const std::string& path, const std::string& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  REQUIRE(file != nullptr);
  CHECK(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  CHECK(gzclose(file) == Z_OK);
}

// An IDX header (magic, dtype 0x08, dims) followed by `data`.
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::string& data, uint8_t dtype = 0x08) {
  std::string bytes = {0, 0, static_cast<char>(dtype), static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<char>((d >> shift) & 0xFF));
  }
  return bytes + data;
}

// A 16-bit PCM WAV of `frames` frames and `channels` channels; sample (t, c) is (t + 10 c) / 100.
void write_wav(const std::string& path, int64_t frames, int channels, int rate = 16000) {
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = channels;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  REQUIRE_MESSAGE(file != nullptr, std::string(sf_strerror(nullptr)));
  std::vector<float> samples(frames * channels);
  for (int64_t t = 0; t < frames; ++t) {
    for (int c = 0; c < channels; ++c) samples[t * channels + c] = static_cast<float>(t + 10 * c) / 100.0f;
  }
  CHECK(sf_writef_float(file, samples.data(), frames) == frames);
  CHECK(sf_close(file) == 0);
}

// A 32-bit float mono WAV of `samples` (float encodings hold any value, NaN included).
void write_float_wav(const std::string& path, const std::vector<float>& samples) {
  SF_INFO info{};
  info.samplerate = 16000;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  REQUIRE_MESSAGE(file != nullptr, std::string(sf_strerror(nullptr)));
  sf_command(file, SFC_SET_CLIPPING, nullptr, SF_FALSE);
  CHECK(sf_writef_float(file, samples.data(), sf_count_t(samples.size())) == sf_count_t(samples.size()));
  CHECK(sf_close(file) == 0);
}

// Sets an environment variable for the scope, restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      ::unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace

// ---- the data directory -------------------------------------------------------------------------

TEST_CASE("readers: data_directory reads TAPESTRY_DATA, else HOME/.cache/tapestry/data") {
  {
    ScopedEnv data("TAPESTRY_DATA", "/srv/tapestry-data");
    CHECK(data_directory() == "/srv/tapestry-data");
  }
  {
    ScopedEnv data("TAPESTRY_DATA", "");
    ScopedEnv home("HOME", "/home/someone");
    CHECK(data_directory() == "/home/someone/.cache/tapestry/data");
  }
  {
    ScopedEnv data("TAPESTRY_DATA", nullptr);
    ScopedEnv home("HOME", nullptr);
    check_error([] { data_directory(); }, {"TAPESTRY_DATA", "HOME"});
  }
  TempDir dir;
  std::string root = dir.file("");
  root.pop_back();  // no trailing '/'
  ScopedEnv data("TAPESTRY_DATA", root.c_str());
  CHECK_FALSE(dataset_prepared("de-en"));
  check_error([] { dataset_directory("de-en"); }, {"de-en", dir.file("de-en"), "make data"});
  write(dir.file("de-en/.stamp"), "trans-de-en 1.9-6\n");
  CHECK(dataset_prepared("de-en"));
  CHECK(dataset_directory("de-en") == dir.file("de-en"));
}

// ---- text lines -----------------------------------------------------------------------------------

TEST_CASE("readers: UTF-8 validation finds the first bad byte") {
  CHECK(invalid_utf8_offset("plain ascii") == std::string_view::npos);
  CHECK(invalid_utf8_offset("Grüße, “quotes”, 𝄞") == std::string_view::npos);
  CHECK(invalid_utf8_offset("ab\x80") == 2);               // a lone continuation byte
  CHECK(invalid_utf8_offset("a\xC3") == 1);                // truncated sequence
  CHECK(invalid_utf8_offset("a\xC0\xAF") == 1);            // overlong '/'
  CHECK(invalid_utf8_offset("\xED\xA0\x80") == 0);         // a UTF-16 surrogate
  CHECK(invalid_utf8_offset("x\xF4\x90\x80\x80") == 1);    // above U+10FFFF
  CHECK(invalid_utf8_offset("ok \xFF") == 3);
}

// ---- parallel text --------------------------------------------------------------------------------

TEST_CASE("readers: words splits a line on whitespace") {
  CHECK(words("  a\tbb  c\n") == std::vector<std::string>{"a", "bb", "c"});
  CHECK(words("").empty());
  CHECK(words(" \t ").empty());
  CHECK(words("one") == std::vector<std::string>{"one"});
}

TEST_CASE("readers: parallel text pairs line i with line i") {
  TempDir dir;
  write(dir.file("train.de"), "\xEF\xBB\xBFGuten Morgen.\r\nWie geht's?\n\nDanke!");
  write(dir.file("train.en"), "Good morning.\nHow are you?\n\nThanks!\n");
  const std::vector<SentencePair> pairs = read_parallel_text(dir.file("train.de"), dir.file("train.en"));
  REQUIRE(pairs.size() == 4);
  CHECK(pairs[0].source == "Guten Morgen.");  // byte-order mark and CR dropped
  CHECK(pairs[0].target == "Good morning.");
  CHECK(pairs[1].source == "Wie geht's?");
  CHECK(pairs[2].source.empty());
  CHECK(pairs[2].target.empty());
  CHECK(pairs[3].source == "Danke!");  // no final newline
  CHECK(pairs[3].target == "Thanks!");
}

TEST_CASE("readers: parallel text refuses missing, empty, misaligned and non-text files") {
  TempDir dir;
  write(dir.file("a.de"), "eins\nzwei\ndrei\n");
  write(dir.file("a.en"), "one\ntwo\n");
  write(dir.file("empty.en"), "");
  write(dir.file("nul.en"), "one\ntw\0o\nthree\n"s);
  write(dir.file("latin1.en"), "one\ntwo\nGr\xFC\xDF" "e\n");
  check_error([&] { read_parallel_text(dir.file("a.de"), dir.file("missing.en")); },
              {"parallel text: ", dir.file("missing.en"), "no such file"});
  check_error([&] { read_parallel_text(dir.file("a.de"), dir.file("empty.en")); },
              {"parallel text: ", dir.file("empty.en"), "empty file"});
  check_error([&] { read_parallel_text(dir.file("a.de"), dir.file("a.en")); },
              {"parallel text: ", dir.file("a.en") + " has 2 lines but " + dir.file("a.de") + " has 3"});
  check_error([&] { read_parallel_text(dir.file("a.de"), dir.file("nul.en")); },
              {dir.file("nul.en"), "line 2", "byte 3", "NUL"});
  check_error([&] { read_parallel_text(dir.file("a.de"), dir.file("latin1.en")); },
              {dir.file("latin1.en"), "line 3", "byte 3", "not valid UTF-8"});
  check_error([&] { read_parallel_text(dir.file(""), dir.file("a.en")); }, {"is a folder"});
}

TEST_CASE("readers: a line longer than kMaxLineBytes is refused as soon as it is, naming the file and line") {
  TempDir dir;
  write(dir.file("a.de"), "eins\n" + std::string(kMaxLineBytes, 'x') + "\ndrei\n");  // the limit itself is fine
  write(dir.file("a.en"), "one\n" + std::string(kMaxLineBytes + 1, 'y') + "\nthree\n");
  CHECK(read_lines("test", dir.file("a.de"), Utf8::Check)[1].size() == kMaxLineBytes);
  check_error([&] { read_parallel_text(dir.file("a.de"), dir.file("a.en")); },
              {dir.file("a.en"), "line 2", "longer than the limit of 65536 bytes"});
  // An endless stream: refused at its first bytes, without reading on (a bound on memory and time).
  check_error([] { read_lines("test", "/dev/zero", Utf8::Check); }, {"/dev/zero", "line 1", "byte 1", "NUL"});
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> ones(popen("yes 1 | tr -d '\\n'", "r"), &pclose);
  REQUIRE(ones);
  LineReader endless("test", "the input", ones.get(), Utf8::Check);
  std::string line;
  check_error([&] { endless.next(line); }, {"the input", "line 1", "longer than the limit"});
}

// ---- classification -------------------------------------------------------------------------------

TEST_CASE("readers: class folders: sorted classes, one document per file, skipped entries reported") {
  TempDir dir;
  write(dir.file("corpus/spam/2.eml"), "buy now");
  write(dir.file("corpus/spam/1.eml"), "cheap pills\n");
  write(dir.file("corpus/ham/a.eml"), "meeting at 10");
  write(dir.file("corpus/ham/.hidden"), "editor state");
  write(dir.file("corpus/ham/nested/x.eml"), "deeper");
  write(dir.file("corpus/README"), "not a class");
  write(dir.file("corpus/latin1/x.eml"), "Gr\xFC\xDF" "e");
  const ClassifiedDocuments data = read_class_folders(dir.file("corpus"));
  CHECK(data.classes == std::vector<std::string>{"ham", "latin1", "spam"});
  REQUIRE(data.documents.size() == 4);
  CHECK(data.documents[0].path == dir.file("corpus/ham/a.eml"));
  CHECK(data.documents[0].label == 0);
  CHECK(data.documents[1].text == "Gr\xFC\xDF" "e");  // bytes as they are, any encoding
  CHECK(data.documents[1].label == 1);
  CHECK(data.documents[2].text == "cheap pills\n");
  CHECK(data.documents[2].label == 2);
  CHECK(data.documents[3].text == "buy now");
  REQUIRE(data.skipped.size() == 3);
  CHECK(data.skipped[0] == dir.file("corpus/README") + ": a file outside the class folders");
  CHECK(data.skipped[1] == dir.file("corpus/ham/.hidden") + ": hidden");
  CHECK(data.skipped[2] == dir.file("corpus/ham/nested") + ": a folder inside a class folder");
  // The keys a split hashes do not depend on where the corpus lies.
  CHECK(data.root == dir.file("corpus"));
  CHECK(document_keys(data) == std::vector<std::string>{"ham/a.eml", "latin1/x.eml", "spam/1.eml", "spam/2.eml"});
}

TEST_CASE("readers: class folders refuse a missing root, no classes, an empty class, binary and huge files") {
  TempDir dir;
  check_error([&] { read_class_folders(dir.file("nowhere")); }, {"classification: ", dir.file("nowhere"), "no such folder"});
  write(dir.file("file"), "x");
  check_error([&] { read_class_folders(dir.file("file")); }, {dir.file("file"), "not a folder"});
  write(dir.file("flat/a.txt"), "x");
  check_error([&] { read_class_folders(dir.file("flat")); }, {dir.file("flat"), "no class folders"});
  std::filesystem::create_directories(dir.file("emptyclass/a"));
  write(dir.file("emptyclass/b/1.txt"), "x");
  check_error([&] { read_class_folders(dir.file("emptyclass")); }, {dir.file("emptyclass/a"), "'a' has no documents"});
  write(dir.file("binary/a/1.bin"), "GIF89a\0\0"s);
  check_error([&] { read_class_folders(dir.file("binary")); }, {dir.file("binary/a/1.bin"), "byte 7 is NUL"});
  std::filesystem::create_directories(dir.file("huge/a"));
  {
    std::ofstream out(dir.file("huge/a/big.txt"), std::ios::binary);
    out.seekp(static_cast<std::streamoff>(kMaxDocumentBytes));  // a sparse file one byte over the limit
    out.put('x');
  }
  check_error([&] { read_class_folders(dir.file("huge")); },
              {dir.file("huge/a/big.txt"), "larger than the limit of 67108864 bytes"});
}

TEST_CASE("readers: list file: paths relative to the list, classes from the labels or given") {
  TempDir dir;
  write(dir.file("texts/ca01.txt"), "The Fulton County Grand Jury said Friday ...\n");
  write(dir.file("texts/cb01.txt"), "Assembly session brought much good\n");
  write(dir.file("abs.txt"), "absolute");
  write(dir.file("labels.tsv"), "texts/ca01.txt\tnews\ntexts/cb01.txt\teditorial\n\n" + dir.file("abs.txt") + "\tnews\n");
  const ClassifiedDocuments data = read_class_list(dir.file("labels.tsv"));
  CHECK(data.classes == std::vector<std::string>{"editorial", "news"});
  REQUIRE(data.documents.size() == 3);
  CHECK(data.documents[0].path == dir.file("texts/ca01.txt"));
  CHECK(data.documents[0].label == 1);
  CHECK(data.documents[1].label == 0);
  CHECK(data.documents[1].text == "Assembly session brought much good\n");
  CHECK(data.documents[2].text == "absolute");
  CHECK(data.skipped.empty());
  CHECK(document_keys(data) == std::vector<std::string>{"texts/ca01.txt", "texts/cb01.txt", "abs.txt"});

  const ClassifiedDocuments given = read_class_list(dir.file("labels.tsv"), {"reviews", "news", "editorial"});
  CHECK(given.classes == std::vector<std::string>{"editorial", "news", "reviews"});
  CHECK(given.documents[0].label == 1);
}

TEST_CASE("readers: list file errors name the list, the line and the field") {
  TempDir dir;
  write(dir.file("a.txt"), "text");
  const std::string list = dir.file("list.tsv");
  write(list, "a.txt\tnews\nmissing.txt\tnews\n");
  check_error([&] { read_class_list(list); },
              {"classification: ", list, "line 2", "field 1 (path)", dir.file("missing.txt"), "no such file"});
  write(list, "a.txt\tnews\na.txt news\n");
  check_error([&] { read_class_list(list); }, {list, "line 2", "no TAB"});
  write(list, "a.txt\tnews\textra\n");
  check_error([&] { read_class_list(list); }, {list, "line 1", "more than 2 fields"});
  write(list, "\tnews\n");
  check_error([&] { read_class_list(list); }, {list, "line 1", "field 1 (path) is empty"});
  write(list, "a.txt\t\n");
  check_error([&] { read_class_list(list); }, {list, "line 1", "field 2 (label) is empty"});
  write(list, "a.txt\tnews\na.txt\tsports\n");
  check_error([&] { read_class_list(list, {"news", "editorial"}); },
              {list, "line 2", "field 2 (label)", "'sports' is not one of the 2 classes"});
  write(list, "\n\n");
  check_error([&] { read_class_list(list); }, {list, "no entries"});
  write(list, "");
  check_error([&] { read_class_list(list); }, {list, "no entries"});
  check_error([&] { read_class_list(dir.file("nolist.tsv")); }, {dir.file("nolist.tsv"), "no such file"});
}

// ---- audio -----------------------------------------------------------------------------------------

TEST_CASE("readers: audio: a WAV file through libsndfile, mono, and a list of utterances") {
  TempDir dir;
  write_wav(dir.file("wav/one.wav"), 50, 1);
  write_wav(dir.file("wav/two.wav"), 30, 1);
  const Audio audio = read_audio(dir.file("wav/one.wav"));
  CHECK(audio.sample_rate == 16000);
  REQUIRE(audio.samples.size() == 50);
  for (int t = 0; t < 50; t += 7) CHECK(audio.samples[t] == doctest::Approx(t / 100.0).epsilon(1e-4));

  write(dir.file("list.tsv"), "wav/one.wav\tHello world.\nwav/two.wav\tGoodbye.\n");
  const std::vector<Utterance> utterances = read_audio_list(dir.file("list.tsv"), {MultiChannel::Refuse, 16000});
  REQUIRE(utterances.size() == 2);
  CHECK(utterances[0].path == dir.file("wav/one.wav"));
  CHECK(utterances[0].transcript == "Hello world.");
  CHECK(utterances[0].samples.size() == 50);
  CHECK(utterances[1].transcript == "Goodbye.");
  CHECK(utterances[1].samples.size() == 30);
  CHECK(utterances[1].sample_rate == 16000);
}

TEST_CASE("readers: audio: several channels are refused, or averaged when asked") {
  TempDir dir;
  write_wav(dir.file("stereo.wav"), 20, 2);
  check_error([&] { read_audio(dir.file("stereo.wav")); }, {"audio: ", dir.file("stereo.wav"), "2 channels", "mono"});
  const Audio audio = read_audio(dir.file("stereo.wav"), {MultiChannel::Average});
  REQUIRE(audio.samples.size() == 20);
  for (int t = 0; t < 20; ++t) CHECK(audio.samples[t] == doctest::Approx((t + 5) / 100.0).epsilon(1e-4));
}

TEST_CASE("readers: audio refuses a truncated WAV, and NaN, infinite or out-of-range samples") {
  TempDir dir;
  write_wav(dir.file("whole.wav"), 400, 1);
  CHECK(read_audio(dir.file("whole.wav")).samples.size() == 400);
  std::string bytes = read_text(dir.file("whole.wav"));
  write(dir.file("half.wav"), bytes.substr(0, 44 + 400));  // half of the 800 bytes the header declares
  check_error([&] { read_audio(dir.file("half.wav")); },
              {"audio: ", dir.file("half.wav"), "truncated", "800 bytes", "holds 400"});
  write_float_wav(dir.file("fine.wav"), {0.5f, -1.0f, 1.0f, 0.0f});
  CHECK(read_audio(dir.file("fine.wav")).samples.size() == 4);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  for (const auto& [name, bad] : std::vector<std::pair<std::string, float>>{{"nan", nan}, {"inf", inf}, {"huge", 1e30f},
                                                                            {"loud", -1.5f}}) {
    CAPTURE(name);
    write_float_wav(dir.file(name + ".wav"), {0.1f, 0.2f, bad, 0.3f});
    check_error([&] { read_audio(dir.file(name + ".wav")); }, {dir.file(name + ".wav"), "sample 3", "outside [-1, 1]"});
  }
}

TEST_CASE("readers: audio refuses missing, empty, non-WAV files, another rate, and bad list lines") {
  TempDir dir;
  write_wav(dir.file("ok.wav"), 10, 1, 8000);
  write(dir.file("empty.wav"), "");
  write(dir.file("text.wav"), "this is not audio at all, just some text\n");
  std::string truncated_header(44, '\0');
  truncated_header.replace(0, 4, "RIFF");
  write(dir.file("zeros.wav"), truncated_header.substr(0, 20));
  check_error([&] { read_audio(dir.file("missing.wav")); }, {"audio: ", dir.file("missing.wav"), "no such file"});
  check_error([&] { read_audio(dir.file("empty.wav")); }, {dir.file("empty.wav"), "libsndfile"});
  check_error([&] { read_audio(dir.file("text.wav")); }, {dir.file("text.wav"), "not an audio file"});
  check_error([&] { read_audio(dir.file("zeros.wav")); }, {dir.file("zeros.wav"), "not an audio file"});
  check_error([&] { read_audio(dir.file("ok.wav"), {MultiChannel::Refuse, 16000}); },
              {dir.file("ok.wav"), "8000 Hz", "expected 16000 Hz"});

  const std::string list = dir.file("list.tsv");
  write(list, "ok.wav\thello\ntext.wav\tworld\n");
  check_error([&] { read_audio_list(list); },
              {"audio: ", list, "line 2", "field 1 (path)", dir.file("text.wav"), "not an audio file"});
  write(list, "ok.wav hello\n");
  check_error([&] { read_audio_list(list); }, {list, "line 1", "no TAB"});
  write(list, "ok.wav\t\n");
  check_error([&] { read_audio_list(list); }, {list, "line 1", "field 2 (transcript) is empty"});
  write(list, "ok.wav\tGr\xFC\xDF" "e\n");
  check_error([&] { read_audio_list(list); }, {list, "line 1", "not valid UTF-8"});
  write(list, "");
  check_error([&] { read_audio_list(list); }, {list, "no entries"});
}

// ---- speech: an inventory and labelled utterances ------------------------------------------------

TEST_CASE("readers: speech: an inventory, utterances as features with class ids, and CTC's need") {
  TempDir dir;
  write(dir.file("phonemes.txt"), "a\nb\nsh\n");
  const std::vector<std::string> inventory = read_symbol_inventory(dir.file("phonemes.txt"));
  CHECK(inventory == std::vector<std::string>{"a", "b", "sh"});

  CHECK(ctc_positions_needed({}) == 0);
  CHECK(ctc_positions_needed({1, 2, 3}) == 3);
  CHECK(ctc_positions_needed({1, 1, 2, 2, 2}) == 5 + 3);

  // 0.1 s at 16 kHz: 1 + (1600 - 400) / 160 = 8 frames; with stack 4, 2 positions.
  write_wav(dir.file("wav/long.wav"), 1600, 1);
  write_wav(dir.file("wav/short.wav"), 400, 1);  // one frame, one position
  write(dir.file("list.tsv"), "wav/long.wav\tsh a a\nwav/short.wav\tb\nwav/short.wav\ta b\nwav/long.wav\tb\n");
  SpeechListOptions options;
  options.filterbank.mel_bins = 8;
  options.stack = 1;
  LabelledUtterances u = read_labelled_utterances(dir.file("list.tsv"), inventory, options);
  REQUIRE(u.size() == 3);  // "a b" needs 2 positions, the short file has 1
  CHECK(u.infeasible == 1);
  CHECK(u.first_infeasible == dir.file("wav/short.wav"));
  CHECK(u.frames == std::vector<int64_t>{8, 1, 8});
  CHECK(u.labels == std::vector<std::vector<int64_t>>{{3, 1, 1}, {2}, {2}});
  CHECK(u.features[0].size() == 8 * 8);
  CHECK(u.features[0] == log_mel_filterbank(read_audio(dir.file("wav/long.wav")).samples, options.filterbank)
                             .to_vector<float>());

  options.stack = 4;  // 2 positions: "sh a a" needs 4, "b" fits; the short files fit "b" only
  u = read_labelled_utterances(dir.file("list.tsv"), inventory, options);
  CHECK(u.size() == 2);
  CHECK(u.infeasible == 2);
  CHECK(u.first_infeasible == dir.file("wav/long.wav"));
  options.limit = 1;
  check_error([&] { read_labelled_utterances(dir.file("list.tsv"), inventory, options); },
              {"speech: ", dir.file("list.tsv"), "no utterance long enough for its labels at a stack of 4 frames",
               "1 too short", "a smaller stack"});
}

TEST_CASE("readers: speech refuses bad inventories, unknown symbols and files shorter than a window") {
  TempDir dir;
  const std::string path = dir.file("phonemes.txt");
  write(path, "a\nb\na\n");
  check_error([&] { read_symbol_inventory(path); }, {"speech: ", path, "line 3", "'a' is listed twice"});
  write(path, "a\nb c\n");
  check_error([&] { read_symbol_inventory(path); }, {path, "line 2", "no blanks", "'b c'"});
  write(path, "a\n\nb\n");
  check_error([&] { read_symbol_inventory(path); }, {path, "line 2", "non-empty"});
  write(path, "");
  check_error([&] { read_symbol_inventory(path); }, {path});
  write(path, "a\xFF\n");
  check_error([&] { read_symbol_inventory(path); }, {path, "UTF-8"});
  check_error([&] { read_symbol_inventory(dir.file("missing.txt")); }, {dir.file("missing.txt")});

  const std::vector<std::string> inventory = {"a", "b"};
  write_wav(dir.file("ok.wav"), 1600, 1);
  write_wav(dir.file("click.wav"), 399, 1);
  const std::string list = dir.file("list.tsv");
  SpeechListOptions options;
  write(list, "ok.wav\ta b\nok.wav\ta x b\n");
  check_error([&] { read_labelled_utterances(list, inventory, options); },
              {"speech: ", list, "line 2", "field 2", "symbol 'x'", "not in the inventory"});
  write(list, "click.wav\ta\n");
  check_error([&] { read_labelled_utterances(list, inventory, options); },
              {list, "line 1", dir.file("click.wav"), "399 samples", "shorter than one 25 ms window (400 samples)"});
  write_wav(dir.file("phone.wav"), 1600, 1, 8000);
  write(list, "phone.wav\ta\n");
  check_error([&] { read_labelled_utterances(list, inventory, options); }, {list, "line 1", "8000 Hz"});
  options.stack = 0;
  check_error([&] { read_labelled_utterances(list, inventory, options); }, {"speech", "stack", "got 0"});
}

// ---- IDX ---------------------------------------------------------------------------------------------

TEST_CASE("readers: IDX, plain and gzip, images with labels") {
  TempDir dir;
  std::string pixels;
  for (int i = 0; i < 3 * 2 * 4; ++i) pixels.push_back(static_cast<char>(i * 10));
  write(dir.file("images-idx3-ubyte"), idx_bytes({3, 2, 4}, pixels));
  write_gzip(dir.file("images-idx3-ubyte.gz"), idx_bytes({3, 2, 4}, pixels));
  write_gzip(dir.file("labels-idx1-ubyte.gz"), idx_bytes({3}, std::string("\x07\x00\x09", 3)));
  for (const char* name : {"images-idx3-ubyte", "images-idx3-ubyte.gz"}) {
    const IdxArray array = read_idx(dir.file(name));
    CHECK(array.shape == std::vector<int64_t>{3, 2, 4});
    REQUIRE(array.data.size() == 24);
    CHECK(array.data[23] == 230);
  }
  const LabelledImages set = read_idx_images(dir.file("images-idx3-ubyte.gz"), dir.file("labels-idx1-ubyte.gz"));
  CHECK(set.size() == 3);
  CHECK(set.rows == 2);
  CHECK(set.cols == 4);
  CHECK(set.pixels.size() == 24);
  CHECK(set.labels == std::vector<int64_t>{7, 0, 9});
  // As points to cluster: unit-length rows, evenly spaced when fewer are asked for.
  const ImagePoints all = unit_image_points(set, 0, "set");
  REQUIRE(all.x.shape() == Shape{3, 8});
  CHECK(all.labels == set.labels);
  const std::vector<float> x = all.x.to_vector<float>();
  for (size_t i = 0; i < 3; ++i) {
    double squared = 0;
    for (size_t t = 0; t < 8; ++t) squared += double(set.pixels[i * 8 + t]) * set.pixels[i * 8 + t];
    for (size_t t = 0; t < 8; ++t) CHECK(x[i * 8 + t] == doctest::Approx(set.pixels[i * 8 + t] / std::sqrt(squared)));
  }
  const ImagePoints two = unit_image_points(set, 2, "set");  // images 0 and ⌊3/2⌋ = 1
  CHECK(two.labels == std::vector<int64_t>{7, 0});
  CHECK(two.x.shape() == Shape{2, 8});
  check_error([&] { unit_image_points(LabelledImages{}, 0, "empty.idx"); }, {"empty.idx", "holds no image with a pixel"});
}

TEST_CASE("readers: IDX refuses wrong magic, dtypes, absurd dims, truncated and corrupt files") {
  TempDir dir;
  const std::string pixels(2 * 3 * 3, '\x01');
  check_error([&] { read_idx(dir.file("missing")); }, {"idx: ", dir.file("missing"), "no such file"});
  write(dir.file("empty"), "");
  check_error([&] { read_idx(dir.file("empty")); }, {dir.file("empty"), "empty file"});
  write(dir.file("short"), std::string("\0\0", 2));
  check_error([&] { read_idx(dir.file("short")); }, {dir.file("short"), "2 bytes, too short"});
  write(dir.file("magic"), "P5\n28 28\n255\n");
  check_error([&] { read_idx(dir.file("magic")); }, {dir.file("magic"), "not an IDX file"});
  write(dir.file("float"), idx_bytes({1}, "abcd", 0x0D));
  check_error([&] { read_idx(dir.file("float")); }, {dir.file("float"), "dtype 0xd (float32) is not supported"});
  write(dir.file("nodims"), idx_bytes({}, ""));
  check_error([&] { read_idx(dir.file("nodims")); }, {dir.file("nodims"), "0 dimensions"});
  write(dir.file("header"), idx_bytes({2, 3, 3}, "").substr(0, 10));
  check_error([&] { read_idx(dir.file("header")); }, {dir.file("header"), "ends inside its header of 3 dimensions"});
  // 65536^3 bytes: each size is valid, their product is not.
  write(dir.file("absurd"), idx_bytes({65536, 65536, 65536}, ""));
  check_error([&] { read_idx(dir.file("absurd")); }, {dir.file("absurd"), "(65536, 65536, 65536)", "more than the limit"});
  write_gzip(dir.file("huge.gz"), idx_bytes({4294967295u, 4294967295u}, "x"));
  check_error([&] { read_idx(dir.file("huge.gz")); }, {dir.file("huge.gz"), "more than the limit"});

  write(dir.file("truncated"), idx_bytes({2, 3, 3}, pixels.substr(0, 11)));
  check_error([&] { read_idx(dir.file("truncated")); },
              {dir.file("truncated"), "header says shape (2, 3, 3), 18 bytes of data, but the file holds 11"});
  write(dir.file("long"), idx_bytes({2, 3, 3}, pixels + "zz"));
  check_error([&] { read_idx(dir.file("long")); }, {dir.file("long"), "18 bytes of data, but the file holds 20"});
  write_gzip(dir.file("truncated.gz"), idx_bytes({2, 3, 3}, pixels.substr(0, 5)));
  check_error([&] { read_idx(dir.file("truncated.gz")); },
              {dir.file("truncated.gz"), "18 bytes of data, but the file holds 5 (decompressed"});
  write_gzip(dir.file("long.gz"), idx_bytes({2, 3, 3}, pixels + "z"));
  check_error([&] { read_idx(dir.file("long.gz")); }, {dir.file("long.gz"), "the file holds 19 (decompressed)"});

  // A gzip file cut short, and one with damaged compressed bytes.
  std::string data;
  for (int i = 0; i < 5000; ++i) data.push_back(static_cast<char>((i * 7919) % 251));
  write_gzip(dir.file("whole.gz"), idx_bytes({5000}, data));
  std::ifstream in(dir.file("whole.gz"), std::ios::binary);
  const std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(gz.size() > 100);
  CHECK(read_idx(dir.file("whole.gz")).data.size() == 5000);
  write(dir.file("cut.gz"), gz.substr(0, gz.size() / 2));
  check_error([&] { read_idx(dir.file("cut.gz")); }, {dir.file("cut.gz"), "5000 bytes of data, but the file holds"});
  write(dir.file("notrailer.gz"), gz.substr(0, gz.size() - 4));
  check_error([&] { read_idx(dir.file("notrailer.gz")); }, {dir.file("notrailer.gz"), "gzip"});
  std::string damaged = gz;
  for (size_t i = 20; i < 60; ++i) damaged[i] = static_cast<char>(damaged[i] ^ 0x5A);
  write(dir.file("damaged.gz"), damaged);
  check_error([&] { read_idx(dir.file("damaged.gz")); }, {dir.file("damaged.gz"), "corrupt gzip data"});
}

TEST_CASE("readers: IDX images and labels must agree") {
  TempDir dir;
  write(dir.file("images"), idx_bytes({2, 2, 2}, std::string(8, '\0')));
  write(dir.file("labels"), idx_bytes({3}, std::string(3, '\0')));
  write(dir.file("flat"), idx_bytes({8}, std::string(8, '\0')));
  check_error([&] { read_idx_images(dir.file("images"), dir.file("labels")); },
              {dir.file("labels") + " has 3 labels but " + dir.file("images") + " has 2 images"});
  check_error([&] { read_idx_images(dir.file("flat"), dir.file("labels")); }, {dir.file("flat"), "expected 3 dimensions"});
  check_error([&] { read_idx_images(dir.file("images"), dir.file("images")); }, {dir.file("images"), "expected 1 dimension"});
}
