// Classify's runs on a prepared corpus: the Transformer's or, with --baseline bow, naive Bayes's; and
// of many models or splits of one corpus: `tapestry classify sweep`, ClusterFormer's
// Table 4 (accuracy, time and memory against the number of clusters k, next to full attention) and
// Table 5 (the clustering losses each on or off, several seeds) as one grid of classify runs on one
// prepared corpus, written as Markdown and JSON; and --folds K, K runs on the folds of one corpus.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/bench.h"  // format
#include "apps/classify.h"
#include "metrics/summary.h"
#include "models/document_classification.h"
#include "train/profiling.h"

namespace tapestry::app {
namespace {

// --baseline bow: naive Bayes fitted on the training split, scored on the eval split.
train::Report run_baseline(const ClassifyOptions& o, const data::TokenizedCorpus& p,
                           std::chrono::steady_clock::time_point start) {
  const models::ClassificationScores scores = models::naive_bayes_scores(p);
  train::Report r;
  r.task = "classify";
  r.fields = classify_corpus_fields(p, o);
  r.fields["model"] = "bow";
  r.metrics = scores.metrics();
  r.best_metric = "accuracy";
  r.best = scores.confusion().accuracy();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.items_per_second = double(scores.tokens()) / std::max(r.seconds, 1e-9);
  r.device = "cpu";
  r.seed = o.train.seed;
  r.parameters = p.vocabulary * int64_t(p.classes.size());
  return r;
}

using bench::format;

// One run of the grid: the options that differ from the classify flags.
struct GridRun {
  std::string grid;  // table4 | table5
  attention::AttentionConfig attention;
  double mu = 0;
  double nu = 0;
  uint64_t seed = 0;
};

std::vector<GridRun> grid_runs(const ClassifyOptions& base, const SweepOptions& s) {
  std::vector<GridRun> runs;
  const attention::AttentionConfig neural = attention::AttentionConfig::parse("neural-clustering");
  if (s.grid != "table5") {
    runs.push_back({"table4", attention::AttentionConfig(), base.mu, base.nu, base.train.seed});
    for (const int64_t k : s.clusters)
      runs.push_back({"table4", neural.with("clusters", k), base.mu, base.nu, base.train.seed});
  }
  if (s.grid != "table4")
    for (const double mu : {0.0, base.mu})
      for (const double nu : {0.0, base.nu})
        for (int64_t i = 0; i < s.seeds; ++i)
          runs.push_back({"table5", neural.with("clusters", s.ablation_clusters), mu, nu, base.train.seed + uint64_t(i)});
  return runs;
}

// The rows as the two tables: Table 4's one row per attention, Table 5's the seeds' mean ± std per
// (µ, ν).
std::string markdown(const ClassifyOptions& base, const SweepOptions& s, const SameCorpusRuns& corpus,
                     const nlohmann::json& rows) {
  std::string md = "# tapestry classify sweep: " + base.data + " (" + std::to_string(corpus.classes) +
                   " classes), N = " + std::to_string(base.max_length) + ", " + std::to_string(base.train.steps) +
                   " steps, " + base.eval_split + " split (majority class " +
                   format("%.4f", corpus.majority_accuracy) + ")\n";
  if (s.grid != "table5") {
    md += "\n## Clusters (Table 4's shape)\n\n"
          "| attention | accuracy | macro-F1 | s / epoch | peak MiB |\n|---|---|---|---|---|\n";
    for (const auto& row : rows)
      if (row["grid"] == "table4")
        md += "| " + row["attention"].get<std::string>() + " | " + format("%.4f", row["accuracy"].get<double>()) +
              " | " + format("%.4f", row["macro_f1"].get<double>()) + " | " +
              format("%.3g", row["seconds_per_epoch"].get<double>()) + " | " +
              format("%.1f", row["peak_bytes"].get<double>() / (1 << 20)) + " |\n";
  }
  if (s.grid != "table4") {
    md += "\n## Clustering losses (Table 5's shape), neural-clustering:clusters=" +
          std::to_string(s.ablation_clusters) + ", " + std::to_string(s.seeds) +
          " seed(s): mean ± std\n\n| µ (L1) | ν (L2) | accuracy | macro-F1 |\n|---|---|---|---|\n";
    for (const double mu : {0.0, base.mu})
      for (const double nu : {0.0, base.nu}) {
        std::vector<double> accuracy, f1;
        for (const auto& row : rows)
          if (row["grid"] == "table5" && row["mu"] == mu && row["nu"] == nu)
            accuracy.push_back(row["accuracy"].get<double>()), f1.push_back(row["macro_f1"].get<double>());
        const metrics::Summary a = metrics::summarize(accuracy), m = metrics::summarize(f1);
        md += "| " + format("%g", mu) + " | " + format("%g", nu) + " | " + format("%.4f", a.mean) + " ± " +
              format("%.4f", a.std) + " | " + format("%.4f", m.mean) + " ± " + format("%.4f", m.std) + " |\n";
      }
  }
  return md;
}

}  // namespace

train::Report run_classify_prepared(const ClassifyOptions& o, const data::TokenizedCorpus& p,
                                    std::chrono::steady_clock::time_point start) {
  if (o.baseline == "bow") return run_baseline(o, p, start);
  // The caller keeps `p` while the run lasts: a shared pointer that does not own it (aliasing no owner).
  const std::shared_ptr<const data::TokenizedCorpus> unowned(std::shared_ptr<const data::TokenizedCorpus>(), &p);
  return run_prepared(classify_transformer_run(o, unowned), o.train);
}

train::Report run_classify_folds(const ClassifyOptions& o, const data::ClassifiedDocuments& corpus) {
  const auto start = std::chrono::steady_clock::now();
  const auto by_class = data::hash_order(corpus, o.max_per_class);
  // Fold f tests the f-th document of each class: more folds than the largest class has documents
  // leave the last folds with nothing to test; refused before any fold trains.
  size_t largest = 0;
  for (const auto& documents : by_class) largest = std::max(largest, documents.size());
  TP_CHECK(o.folds <= int64_t(largest), "--folds", o.folds, " folds of '", o.data, "' leave fold ", largest + 1,
           " with no test document: its largest class has ", largest, " documents; give --folds ", largest,
           " or fewer");
  nlohmann::json folds = nlohmann::json::array();
  std::map<std::string, std::vector<double>> values;
  train::Report report;
  for (int64_t f = 0; f < o.folds; ++f) {
    ClassifyOptions fold = o;
    fold.eval_split = "test";
    const data::TokenizedCorpus p =
        data::tokenize_corpus(corpus, classify_corpus_options(fold), data::stratified_fold(by_class, o.folds, f));
    report = run_classify_prepared(fold, p, std::chrono::steady_clock::now());
    nlohmann::json row = {{"fold", f}, {"documents", p.split.train.size() + p.split.test.size()},
                          {"test_documents", p.split.test.size()}, {"majority_accuracy", p.majority_accuracy}};
    values["majority_accuracy"].push_back(p.majority_accuracy);
    for (const auto& [name, value] : report.metrics) {
      row[name] = value;
      values[name].push_back(value);
    }
    folds.push_back(row);
    if (o.train.progress)
      std::fprintf(stderr, "classify: fold %lld of %lld: %s\n", (long long)f + 1, (long long)o.folds,
                   report.metrics_text().c_str());
  }
  for (auto& [name, value] : report.metrics) {
    const metrics::Summary s = metrics::summarize(values.at(name));
    value = s.mean;
    report.fields[name + "_std"] = s.std;
  }
  report.fields["majority_accuracy"] = metrics::summarize(values.at("majority_accuracy")).mean;
  report.fields["folds"] = folds;
  report.fields.erase("documents");
  report.best = report.metric("accuracy");
  report.best_step = report.steps;
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

SameCorpusRuns run_classify_on_one_corpus(const ClassifyOptions& corpus_options,
                                          const std::vector<ClassifyOptions>& runs) {
  check_classify_options(corpus_options);
  for (const ClassifyOptions& o : runs) check_classify_options(o);
  const data::ClassificationCorpusOptions c = classify_corpus_options(corpus_options);
  const data::TokenizedCorpus p = data::tokenize_corpus(data::read_classification_corpus(c), c);
  SameCorpusRuns out;
  out.classes = int64_t(p.classes.size());
  out.train_tokens = p.train_tokens;
  out.majority_accuracy = p.majority_accuracy;
  for (const ClassifyOptions& o : runs)
    out.reports.push_back(run_classify_prepared(o, p, std::chrono::steady_clock::now()));
  return out;
}

void check_sweep_options(const ClassifyOptions& o, const SweepOptions& s) {
  check_classify_options(o);
  TP_CHECK(o.baseline == "none", "--baseline", "a sweep compares attentions; run --baseline bow on its own");
  TP_CHECK(o.train.save.empty() && o.train.save_best.empty() && o.train.resume.empty() && o.train.log.empty(),
           "sweep", "runs many models: drop --save, --save-best, --resume and --log");
  TP_CHECK(!train::profile_outputs(o.train).any(), "sweep", "runs many models: profile one run of tapestry classify instead");
  TP_CHECK(s.grid == "table4" || s.grid == "table5" || s.grid == "both", "--grid",
           "must be table4, table5 or both, got '", s.grid, "'");
  TP_CHECK(!s.clusters.empty() || s.grid == "table5", "--clusters", "needs at least one value for table4");
  for (const int64_t k : s.clusters) TP_CHECK(k >= 1, "--clusters", "values must be at least 1, got ", k);
  TP_CHECK(s.ablation_clusters >= 1, "--ablation-clusters", "must be at least 1, got ", s.ablation_clusters);
  TP_CHECK(s.seeds >= 1 && s.seeds <= 1000, "--seeds", "must be in [1, 1000], got ", s.seeds);
  TP_CHECK(!s.out.empty(), "--out", "must name the files to write");
  // Checked before hours of runs, not when the tables are written.
  const std::filesystem::path folder = std::filesystem::path(s.out).parent_path();
  TP_CHECK(folder.empty() || std::filesystem::is_directory(folder), "--out", "'", folder.string(),
           "' is not a folder: create it first");
  for (const char* suffix : {".md", ".json"})
    TP_CHECK(!std::filesystem::is_directory(s.out + suffix), "--out", "'", s.out, suffix, "' is a folder");
}

nlohmann::json run_classify_sweep(const ClassifyOptions& base, const SweepOptions& s) {
  check_sweep_options(base, s);
  const std::string device = tapestry::to_string(train::resolve_device(base.train.device));  // before hours of runs
  const std::vector<GridRun> grid = grid_runs(base, s);
  std::vector<ClassifyOptions> options;
  for (const GridRun& g : grid) {
    ClassifyOptions o = base;
    o.attention = g.attention;
    o.eval_attention.reset();
    o.mu = g.mu;
    o.nu = g.nu;
    o.train.seed = g.seed;
    options.push_back(o);
  }
  const SameCorpusRuns corpus = run_classify_on_one_corpus(base, options);

  nlohmann::json rows = nlohmann::json::array();
  for (size_t i = 0; i < grid.size(); ++i) {
    const train::Report& r = corpus.reports[i];
    rows.push_back({{"grid", grid[i].grid},
                    {"attention", r.fields.at("attention")},
                    {"mu", grid[i].mu},
                    {"nu", grid[i].nu},
                    {"seed", grid[i].seed},
                    {"accuracy", r.metric("accuracy")},
                    {"macro_f1", r.metric("macro_f1")},
                    {"seconds", r.seconds},
                    {"seconds_per_epoch", double(corpus.train_tokens) / std::max(r.items_per_second, 1e-9)},
                    {"peak_bytes", r.peak_bytes}});
  }
  const std::string md = markdown(base, s, corpus, rows);
  const nlohmann::json result = {{"data", base.data},
                                 {"classes", corpus.classes},
                                 {"max_length", base.max_length},
                                 {"steps", base.train.steps},
                                 {"eval_split", base.eval_split},
                                 {"majority_accuracy", corpus.majority_accuracy},
                                 {"device", device},
                                 {"rows", rows},
                                 {"markdown", md}};
  // The streams' own state: an ifstream opens a folder too, so reading the files back proved nothing.
  std::ofstream md_file(s.out + ".md"), json_file(s.out + ".json");
  md_file << md;
  json_file << result.dump(2) << "\n";
  md_file.close();
  json_file.close();
  TP_CHECK(md_file.good() && json_file.good(), "--out", "cannot write ", s.out, ".md and ", s.out, ".json");
  return result;
}

void add_classify_sweep(CommandLine& cli, CLI::App* classify, std::function<ClassifyOptions()> parsed) {
  cli.add(
      "sweep",
      "Train the Table 4 grid (full, and neural-clustering for each --clusters) and the Table 5 grid (mu, nu each "
      "zero or the classify value, --seeds seeds) on one prepared corpus; write <out>.md and <out>.json",
      [parsed](CLI::App& command) {
        auto s = std::make_shared<SweepOptions>();
        auto json = std::make_shared<bool>(false);
        add_value(command, "--grid", s->grid, "table4, table5 or both")->capture_default_str();
        add_list(command, "--clusters", s->clusters, "Table 4's numbers of clusters k, comma-separated",
                 integer_check<int64_t>(1));
        add_value(command, "--ablation-clusters", s->ablation_clusters, "k of the Table 5 runs")->capture_default_str();
        add_value(command, "--seeds", s->seeds, "seeds per Table 5 configuration")->capture_default_str();
        add_value(command, "--out", s->out, "write <out>.md and <out>.json")->capture_default_str();
        add_value(command, "--json", *json, "print the JSON on stdout instead of the Markdown");
        return [parsed, s, json]() {
          const ClassifyOptions o = parsed();
          try {
            check_sweep_options(o, *s);
          } catch (const Error& e) {
            std::fprintf(stderr, "tapestry classify sweep: %s\n", e.what());
            return kExitUsage;
          }
          return run_reporting_errors("classify sweep", [&] {
            const nlohmann::json result = run_classify_sweep(o, *s);
            std::printf("%s\n", *json ? result.dump().c_str() : result["markdown"].get<std::string>().c_str());
            return 0;
          });
        };
      },
      classify);
}

}  // namespace tapestry::app
