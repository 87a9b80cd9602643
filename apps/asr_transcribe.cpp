// `tapestry asr transcribe`: the phonemes an asr checkpoint hears in audio files, one line per file.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/asr.h"
#include "apps/options.h"

namespace tapestry::app {

void add_asr_transcribe(CommandLine& cli, CLI::App* group) {
  cli.add(
      "transcribe", "Print the phonemes an asr checkpoint hears in 16 kHz audio files (one line per file)",
      [](CLI::App& command) {
        auto model = std::make_shared<std::string>();
        auto files = std::make_shared<std::vector<std::string>>();
        auto options = std::make_shared<AsrOptions>();
        add_value(command, "--model", *model, "the checkpoint (tapestry asr train --save)")->required();
        // Checked here, as asr train's table checks it: a value out of range is a bad command line.
        const std::string beam_help = "0: greedy decoding; N: prefix beam search keeping N prefixes (in [0, " +
                                      std::to_string(kAsrMaxBeam) + "])";
        add_value(command, "--beam", options->beam, beam_help)->check(integer_check<int64_t>(0, kAsrMaxBeam));
        add_value(command, "--eval-attention", options->eval_attention, "attention to run with (default: the model's own)");
        add_value(command, "files", *files, "audio files (WAV, FLAC, ...: what libsndfile reads), 16 kHz mono")
            ->required();
        return [model, files, options] {
          // The checkpoint (a bad file: exit 1), then --eval-attention against its model (exit 2).
          AsrCheckpoint c;
          const int code = run_reporting_errors("asr transcribe", [&] {
            c = read_asr_checkpoint(*model, *options, "--model");
            return 0;
          });
          if (code != 0) return code;
          try {
            attentions(c.options.attention, c.options.eval_attention);
          } catch (const Error& e) {
            std::fprintf(stderr, "tapestry asr transcribe: %s\n", e.what());
            return kExitUsage;
          }
          return run_reporting_errors("asr transcribe", [&] {
            const auto phonemes = transcribe(*model, *files, *options);
            for (size_t i = 0; i < files->size(); ++i) {
              std::string line = files->size() > 1 ? (*files)[i] + "\t" : "";
              for (size_t j = 0; j < phonemes[i].size(); ++j) line += (j ? " " : "") + phonemes[i][j];
              std::printf("%s\n", line.c_str());
            }
            std::fflush(stdout);
            return 0;
          });
        };
      },
      group);
}

}  // namespace tapestry::app
