// `tapestry translate run`: a translate checkpoint, loaded once, on the lines of stdin, each
// translation printed as its line comes (LineTranslator).
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/options.h"
#include "apps/translate.h"
#include "data/text_lines.h"
#include "data/translation_corpus.h"
#include "models/translation.h"

namespace tapestry::app {

namespace {

constexpr const char* kTask = "translate";

}  // namespace

LineTranslator::LineTranslator(const TranslateOptions& o)
    : o_(o),
      sp_(std::make_unique<data::SentencePiece>(translate_vocabulary(o))),
      device_(train::resolve_device(o.train.device)),
      decoding_(train::derived_seed(o.train.seed, 2)) {
  const attention::AttentionConfig evaluated = check_translate_options(o).eval;
  TP_CHECK(!o.train.resume.empty(), "--resume", "translating needs a checkpoint");
  Generator gen(o.train.seed);
  model_ = std::make_unique<models::Translator>(translator_options(o), gen);
  train::ResumedRun(o.train.resume, translate_table()->identity(kTask, o), train::Compare::ModelOnly)
      .restore_model(*model_);
  model_->to(device_);
  model_->set_encoder_attention(evaluated);
}

LineTranslator::~LineTranslator() = default;

std::vector<std::string> LineTranslator::translate(const std::vector<std::string>& lines, int64_t first_line) {
  const train::ScopedThreads threads(o_.train.threads);
  const data::SourceLines in = data::encode_source_lines(*sp_, lines, first_line, "translate run", kTask);
  const std::vector<std::string> translated =
      models::translate_sources(*model_, *sp_, in.sources, translation_search(o_), device_, decoding_);
  std::vector<std::string> out(lines.size());
  for (size_t i = 0; i < in.lines.size(); ++i) out[in.lines[i]] = translated[i];
  return out;
}

std::vector<std::string> translate_lines(const TranslateOptions& o, const std::vector<std::string>& lines) {
  return LineTranslator(o).translate(lines);
}

void add_translate_run(CommandLine& cli, CLI::App* group) {
  cli.add(
      "run", "Translate the lines of stdin to stdout with the --resume checkpoint (an empty line stays empty)",
      [](CLI::App& command) {
        TrainingApp<TranslateOptions> run_app;
        run_app.name = "run";
        run_app.table = translate_table();
        run_app.flags = {"--resume", "--eval-attention", "--beam", "--lenpen", "--max-ratio", "--cache", "--max-tokens",
                         "--seed", "--device", "--threads"};
        run_app.check = check_translate_options;
        read_settings_from_resume(run_app, kTask);
        run_app.table->add_to(command, run_app.flags);
        return [run_app]() {
          TranslateOptions o;
          if (const int code = resolve_options(run_app, "translate run", o); code != 0) return code;
          return run_reporting_errors("translate run", [&] {
            // Line by line: at a terminal each translation appears as its line is typed.
            LineTranslator translator(o);
            data::LineReader input("translate run", "the input", stdin, data::Utf8::Check);
            for (std::string line; input.next(line);) {
              std::printf("%s\n", translator.translate({line}, input.line_number())[0].c_str());
              std::fflush(stdout);
            }
            return 0;
          });
        };
      },
      group);
}

}  // namespace tapestry::app
