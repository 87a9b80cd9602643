// libFuzzer target: the data readers on arbitrary files. The first byte picks the reader, the rest
// is the file: parallel text (split at the first 0xFF byte into source and target), a class list
// (whose paths may name the two documents in the work folder), an IDX file, a WAV file, a symbol
// inventory.
// Seeds: tests/fuzz/corpus/readers/.
#include <algorithm>

#include "data/audio.h"
#include "data/classification.h"
#include "data/idx.h"
#include "data/parallel_text.h"
#include "data/speech.h"
#include "tests/fuzz/fuzz_input.h"

using namespace tapestry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  fuzz::refusing([&] {
    switch (data[0] % 6) {
      case 0: {
        const size_t cut = static_cast<size_t>(std::find(body, body + n, uint8_t{0xFF}) - body);
        const std::string source = fuzz::write_file("source.txt", body, cut);
        const std::string target = fuzz::write_file("target.txt", body + std::min(cut + 1, n), n - std::min(cut + 1, n));
        (void)data::read_parallel_text(source, target);
        break;
      }
      case 1: {
        static const bool documents = [] {
          const uint8_t a[] = "a document", b[] = "another one";
          fuzz::write_file("a.txt", a, sizeof a - 1);
          fuzz::write_file("b.txt", b, sizeof b - 1);
          return true;
        }();
        (void)documents;
        (void)data::read_class_list(fuzz::write_file("labels.tsv", body, n));
        break;
      }
      case 2:
        (void)data::read_idx(fuzz::write_file("input.idx", body, n));
        break;
      case 3:
        (void)data::read_audio(fuzz::write_file("input.wav", body, n));
        break;
      case 4:
        (void)data::read_audio(fuzz::write_file("input.wav", body, n), {data::MultiChannel::Average, 0});
        break;
      default:
        (void)data::read_symbol_inventory(fuzz::write_file("phonemes.txt", body, n));
        break;
    }
  });
  return 0;
}
