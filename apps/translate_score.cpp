// `tapestry translate score`: any system's translations scored as `tapestry translate eval` scores
// Tapestry's, so that a translation of the same test split from another toolkit (the PyTorch peer,
// bench/peers/translate_train.py) is compared on one metric implementation.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "apps/translate.h"
#include "data/parallel_text.h"
#include "metrics/bleu.h"
#include "metrics/chrf.h"

namespace tapestry::app {

nlohmann::json score_translations(const std::string& hypotheses_path, const std::string& references_path) {
  std::vector<std::string> hypotheses, references;
  for (data::SentencePair& pair : data::read_parallel_text(hypotheses_path, references_path)) {
    hypotheses.push_back(std::move(pair.source));
    references.push_back(std::move(pair.target));
  }
  const metrics::BleuScore bleu = metrics::corpus_bleu(hypotheses, references);
  metrics::ChrF chrf;
  for (size_t i = 0; i < hypotheses.size(); ++i) chrf.add(hypotheses[i], references[i]);
  return {{"hypotheses", hypotheses_path},
          {"references", references_path},
          {"sentences", hypotheses.size()},
          {"bleu", bleu.score},
          {"bp", bleu.bp},
          {"ratio", bleu.ratio()},
          {"hyp_len", bleu.sys_len},
          {"ref_len", bleu.ref_len},
          {"precisions", bleu.precisions},
          {"chrf", chrf.score()},
          {"signature", bleu.to_string()}};
}

void add_translate_score(CommandLine& cli, CLI::App* group) {
  cli.add(
      "score",
      "BLEU (sacreBLEU's default: 13a tokens, 4-grams, exp smoothing) and chrF of a file of translations "
      "against a file of references, line i against line i",
      [](CLI::App& command) {
        auto hypotheses = std::make_shared<std::string>();
        auto references = std::make_shared<std::string>();
        auto json = std::make_shared<bool>(false);
        add_value(command, "--hypotheses", *hypotheses, "the translations, one a line")->required();
        add_value(command, "--references", *references, "the references, one a line, as many")->required();
        add_value(command, "--json", *json, "print the scores as JSON");
        return [hypotheses, references, json]() {
          return run_reporting_errors("translate score", [&] {
            const nlohmann::json s = score_translations(*hypotheses, *references);
            if (*json) std::printf("%s\n", s.dump().c_str());
            else std::printf("%s\nchrF2 = %.2f\n", s["signature"].get<std::string>().c_str(), s["chrf"].get<double>());
            return 0;
          });
        };
      },
      group);
}

}  // namespace tapestry::app
