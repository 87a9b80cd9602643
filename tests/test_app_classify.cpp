// `tapestry classify`: it learns on real documents (far above the majority class), its naive Bayes
// floor does too, resume is exact, a checkpoint classifies on its own (its SentencePiece model lies
// beside it), bad data gives clear errors or counted skips, and its command line is the harness's.
// The tests on the prepared data sets skip with one line when `make data` has not run, and fail
// when CI is set.

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <tuple>

#include "apps/classify.h"
#include "data/datasets.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

bool prepared(const std::string& name) { return dataset_ready(name, "classify"); }

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A small folder-per-class corpus: `per_class` documents of each class, each a sentence of words
// that only its class uses.
void write_corpus(const std::string& root, const std::vector<std::string>& classes, int per_class = 12) {
  const std::vector<std::vector<std::string>> words = {
      {"river", "stone", "water", "bridge", "fish", "boat"},
      {"market", "price", "trade", "coin", "buyer", "seller"},
      {"planet", "orbit", "rocket", "star", "comet", "moon"}};
  for (size_t c = 0; c < classes.size(); ++c)
    for (int d = 0; d < per_class; ++d) {
      std::string text;
      for (int w = 0; w < 20; ++w) text += words[c % 3][size_t((d * 7 + w * 3) % 6)] + (w % 7 == 6 ? ".\n" : " ");
      write(root + "/" + classes[c] + "/" + std::to_string(d) + ".txt", text);
    }
}

app::ClassifyOptions tiny(const std::string& data) {
  app::ClassifyOptions o = app::classify_preset(app::ClassifyPreset::Smoke);
  o.data = data;
  o.vocab_size = 30;
  o.max_length = 32;
  o.batch_tokens = 128;
  o.valid_fraction = o.test_fraction = 0.2;
  o.train.steps = 6;
  o.train.eval_every = 3;
  o.train.progress = false;
  return o;
}

}  // namespace

TEST_CASE("classify: learns SpamAssassin ham / spam from a few hundred real e-mails") {
  if (!prepared("spam-assassin")) return;
  app::ClassifyOptions o = app::classify_preset(app::ClassifyPreset::Smoke);
  o.data = "spam-assassin-2way";
  o.max_per_class = 150;
  o.valid_fraction = 0.2;
  o.train.progress = false;
  const train::Report r = app::run_classify(o);
  const double majority = r.fields.at("majority_accuracy").get<double>();
  INFO("accuracy " << r.metric("accuracy") << ", majority class " << majority);
  CHECK(r.fields.at("documents").at("valid").get<int64_t>() == 60);
  CHECK(majority == doctest::Approx(0.5));
  CHECK(r.metric("accuracy") >= majority + 0.25);
  CHECK(r.metric("macro_f1") >= 0.7);
  CHECK(r.best_metric == "accuracy");
  CHECK(r.to_json()["peak_bytes"].get<int64_t>() > 0);  // the model's parameters at least

  o.baseline = "bow";
  const train::Report floor = app::run_classify(o);
  CHECK(floor.fields.at("model") == "bow");
  CHECK(floor.metric("accuracy") >= majority + 0.2);
  CHECK(floor.to_json()["peak_bytes"].is_null());  // its counts are host vectors: nothing measured
}

TEST_CASE("classify: the naive Bayes floor beats the majority class on Brown's 15 genres") {
  if (!prepared("brown")) return;
  app::ClassifyOptions o;
  o.data = "brown";
  o.max_per_class = 20;  // 240 documents: the 6 of science fiction and the 9 of humor, 20 of each other genre
  o.vocab_size = 1000;
  o.baseline = "bow";
  o.train.progress = false;
  const train::Report r = app::run_classify(o);
  CHECK(r.fields.at("classes") == 15);
  CHECK(r.fields.at("documents").at("valid").get<int64_t>() == 28);  // 2 of each genre, 1 of science fiction
  CHECK(r.metric("accuracy") >= r.fields.at("majority_accuracy").get<double>() + 0.2);
  // It runs on the CPU only, and has no clustering losses: other settings are refused, not ignored.
  o.train.device = "cuda";
  check_error([&] { app::run_classify(o); }, {"--device", "naive Bayes on the CPU", "cuda"});
  o.train.device = "auto";
  o.mu = 0;
  check_error([&] { app::run_classify(o); }, {"--mu", "the attention has none"});
}

TEST_CASE("classify: every attention kind trains a few steps") {
  TempDir dir;
  write_corpus(dir.file("corpus"), {"a", "b", "c"}, 10);
  for (const attention::Kind* kind : attention::kinds()) {
    CAPTURE(kind->name());
    app::ClassifyOptions o = tiny(dir.file("corpus"));
    o.attention = attention::AttentionConfig::parse(kind->name());
    const train::Report r = app::run_classify(o);
    CHECK(r.steps == 6);
    CHECK(std::isfinite(r.metric("loss")));
  }
}

TEST_CASE("classify: the split is stratified, deterministic and independent of the seed") {
  TempDir dir;
  write_corpus(dir.file("corpus"), {"a", "b", "c"}, 10);
  app::ClassifyOptions o = tiny(dir.file("corpus"));
  o.baseline = "bow";
  const nlohmann::json documents = app::run_classify(o).fields.at("documents");
  CHECK(documents == nlohmann::json{{"train", 18}, {"valid", 6}, {"test", 6}});  // 2 + 2 of each class held out
  const train::Report first = app::run_classify(o);
  o.train.seed = 5;
  const train::Report again = app::run_classify(o);
  CHECK(again.fields.at("documents") == documents);
  CHECK(again.metrics == first.metrics);
  // The split and the tokens depend on paths within the corpus, not on where it lies.
  std::filesystem::create_directories(dir.file("elsewhere"));
  std::filesystem::copy(dir.file("corpus"), dir.file("elsewhere/copy"), std::filesystem::copy_options::recursive);
  o.data = dir.file("elsewhere/copy");
  CHECK(app::run_classify(o).metrics == first.metrics);
}

TEST_CASE("classify --folds: each document is tested once; the metrics are the folds' means") {
  TempDir dir;
  write_corpus(dir.file("corpus"), {"a", "b", "c"}, 10);
  app::ClassifyOptions o = tiny(dir.file("corpus"));
  o.folds = 4;
  for (const std::string baseline : {"bow", "none"}) {
    CAPTURE(baseline);
    o.baseline = baseline;
    const train::Report r = app::run_classify(o);
    const nlohmann::json& folds = r.fields.at("folds");
    REQUIRE(folds.size() == 4);
    int64_t tested = 0;
    double sum = 0;
    for (const auto& fold : folds) {
      tested += fold.at("test_documents").get<int64_t>();
      CHECK(fold.at("documents") == 30);
      sum += fold.at("accuracy").get<double>();
    }
    CHECK(tested == 30);  // 10 per class dealt into folds of 3, 3, 2, 2
    CHECK(folds[0].at("test_documents") == 9);
    CHECK(folds[3].at("test_documents") == 6);
    CHECK(r.metric("accuracy") == doctest::Approx(sum / 4).epsilon(1e-12));
    CHECK(r.fields.at("accuracy_std").get<double>() >= 0);
    CHECK(r.fields.at("eval_split") == "test");
  }
  o.folds = 1;
  check_error([&] { app::run_classify(o); }, {"--folds", "at least 2"});
  o.folds = 3;
  o.train.save = dir.file("x.ckpt");
  check_error([&] { app::run_classify(o); }, {"--folds", "--save"});
  o.train.save.clear();
  o.train.patience = 2;
  check_error([&] { app::run_classify(o); }, {"--folds", "--patience"});
}

TEST_CASE("classify: a resumed run continues exactly; a checkpoint classifies on its own") {
  TempDir dir;
  write_corpus(dir.file("corpus"), {"rivers", "trade", "space"});
  app::ClassifyOptions whole = tiny(dir.file("corpus"));
  const train::Report straight = app::run_classify(whole);

  app::ClassifyOptions first = whole;
  first.train.steps = 3;
  first.train.save = dir.file("half.ckpt");
  app::run_classify(first);
  CHECK(std::filesystem::exists(dir.file("half.ckpt.spm")));
  app::ClassifyOptions second = whole;
  second.train.resume = dir.file("half.ckpt");
  second.train.save = dir.file("end.ckpt");
  const train::Report resumed = app::run_classify(second);
  CHECK(resumed.steps == 6);
  CHECK(resumed.metrics == straight.metrics);
  CHECK(std::filesystem::exists(dir.file("end.ckpt.spm")));

  // --eval-only reads end.ckpt.spm: the SentencePiece model of the run, not a new one.
  app::ClassifyOptions eval = whole;
  eval.train.resume = dir.file("end.ckpt");
  eval.train.eval_only = true;
  const train::Report evaluated = app::run_classify(eval);
  CHECK(evaluated.metrics == straight.metrics);
  eval.eval_split = "test";
  CHECK(app::run_classify(eval).fields.at("eval_split") == "test");

  std::filesystem::remove(dir.file("end.ckpt.spm"));
  eval.eval_split = "valid";
  check_error([&] { app::run_classify(eval); }, {"end.ckpt.spm"});

  // Another run's vocabulary of the same size beside the checkpoint: refused by its fingerprint.
  write_corpus(dir.file("other"), {"rivers", "trade", "space"});
  write(dir.file("other/rivers/extra.txt"), "bonnet carrot donkey bonnet carrot donkey bonnet carrot donkey.\n");
  app::ClassifyOptions other = tiny(dir.file("other"));
  other.train.steps = 1;
  other.train.save = dir.file("other.ckpt");
  app::run_classify(other);
  REQUIRE(read_text(dir.file("other.ckpt.spm")) != read_text(dir.file("half.ckpt.spm")));
  std::filesystem::copy_file(dir.file("other.ckpt.spm"), dir.file("end.ckpt.spm"));
  check_error([&] { app::run_classify(eval); }, {"end.ckpt.spm", "is not the vocabulary", "end.ckpt"});
}

TEST_CASE("classify: a checkpoint of other classes is refused, naming them") {
  TempDir dir;
  write_corpus(dir.file("one"), {"rivers", "trade"});
  write_corpus(dir.file("two"), {"rivers", "space"});
  app::ClassifyOptions o = tiny(dir.file("one"));
  o.train.steps = 2;
  o.train.save = dir.file("one.ckpt");
  app::run_classify(o);
  app::ClassifyOptions other = tiny(dir.file("two"));
  other.train.resume = dir.file("one.ckpt");
  other.train.eval_only = true;
  check_error([&] { app::run_classify(other); }, {"--classes", "rivers", "trade", "space"});
}

TEST_CASE("classify: bad data gives errors that name the file, or counted skips") {
  TempDir dir;
  SUBCASE("an empty class folder") {
    write_corpus(dir.file("c"), {"rivers", "trade"});
    std::filesystem::create_directories(dir.file("c/empty"));
    check_error([&] { app::run_classify(tiny(dir.file("c"))); }, {"empty", "has no documents"});
  }
  SUBCASE("a binary file") {
    write_corpus(dir.file("c"), {"rivers", "trade"});
    write(dir.file("c/trade/binary.bin"), std::string("GIF89a\0\0\x01", 9));
    check_error([&] { app::run_classify(tiny(dir.file("c"))); }, {"binary.bin", "NUL"});
  }
  SUBCASE("a document of zero tokens is left out and counted") {
    write_corpus(dir.file("c"), {"rivers", "trade"});
    write(dir.file("c/trade/blank.txt"), " \n\t\n");
    app::ClassifyOptions o = tiny(dir.file("c"));
    o.baseline = "bow";
    const train::Report r = app::run_classify(o);
    CHECK(r.fields.at("empty_documents") == 1);
    const nlohmann::json n = r.fields.at("documents");
    CHECK(n["train"].get<int>() + n["valid"].get<int>() + n["test"].get<int>() == 24);
  }
  SUBCASE("a list naming a missing file") {
    write_corpus(dir.file("c"), {"rivers", "trade"});
    write(dir.file("c/labels.tsv"), "rivers/0.txt\trivers\ntrade/0.txt\ttrade\ntrade/gone.txt\ttrade\n");
    check_error([&] { app::run_classify(tiny(dir.file("c/labels.tsv"))); }, {"labels.tsv", "line 3", "gone.txt"});
  }
  SUBCASE("a path that is nothing") {
    check_error([&] { app::run_classify(tiny(dir.file("nothing"))); }, {"--data", "nothing", "spam-assassin-2way"});
  }
  SUBCASE("one class: nothing to classify") {
    write_corpus(dir.file("c"), {"rivers"});
    app::ClassifyOptions o = tiny(dir.file("c"));
    o.baseline = "bow";
    check_error([&] { app::run_classify(o); }, {"--data", "has one class (rivers)", "at least two"});
  }
  SUBCASE("a class of empty documents is refused, not dropped") {
    write_corpus(dir.file("c"), {"rivers", "trade"});
    for (int d = 0; d < 4; ++d) write(dir.file("c/blank/" + std::to_string(d) + ".txt"), " \n");
    app::ClassifyOptions o = tiny(dir.file("c"));
    o.baseline = "bow";
    check_error([&] { app::run_classify(o); }, {"--data", "class 'blank' has no training document with a token"});
  }
  SUBCASE("more folds than the largest class has documents: refused before any fold trains") {
    write_corpus(dir.file("c"), {"rivers", "trade"}, 5);
    app::ClassifyOptions o = tiny(dir.file("c"));
    o.folds = 20;
    check_error([&] { app::run_classify(o); }, {"--folds", "largest class has 5 documents", "--folds 5 or fewer"});
  }
  SUBCASE("a vocabulary too large for the text") {
    write_corpus(dir.file("c"), {"rivers", "trade"});
    app::ClassifyOptions o = tiny(dir.file("c"));
    o.vocab_size = 5000;
    check_error([&] { app::run_classify(o); }, {"--vocab-size", "5000"});
  }
}

TEST_CASE("classify command line: --help, --json, bad flags, missing data") {
  TempDir dir;
  write_corpus(dir.file("corpus"), {"rivers", "trade"});
  const auto run = [&](const std::string& args) { return run_shell(dir, args); };
  const std::string cli = std::string(TAPESTRY_CLI) + " classify ";
  auto [code, out, err] = run(cli + "--help");
  CHECK(code == 0);
  for (const char* flag : {"--vocab-size", "--max-length", "--baseline", "--pooling", "--eval-split", "--save-best"})
    CHECK(out.find(flag) != std::string::npos);
  std::tie(code, out, err) = run(cli + "--preset smoke --data " + dir.file("corpus") +
                                 " --vocab-size 30 --max-length 32 --batch-tokens 64 --steps 2 --json");
  CHECK(code == 0);
  const nlohmann::json result = nlohmann::json::parse(out);
  CHECK(result["task"] == "classify");
  CHECK(result["steps"] == 2);
  CHECK(result.contains("accuracy"));
  CHECK(result.contains("macro_f1"));
  CHECK(err.find("classify: " + dir.file("corpus") + " (2 classes), valid split, step 2, full") != std::string::npos);
  std::tie(code, out, err) = run(cli + "--pooling max");
  CHECK(code == 2);
  CHECK(err.find("--pooling") != std::string::npos);
  std::tie(code, out, err) = run(cli + "--max-length 100 --batch-tokens 50");
  CHECK(code == 2);
  CHECK(err.find("--batch-tokens") != std::string::npos);
  std::tie(code, out, err) = run(cli + "--baseline bow --save x.ckpt");
  CHECK(code == 2);
  // Values the option table refuses, and flags the naive Bayes floor would leave unused.
  for (const std::string args : {"--mu ''", "--nu ''", "--test-fraction ''", "--dropout ''",
                                  "--baseline bow --attention clustered:clusters=3", "--baseline bow --layers 2",
                                  "sweep --clusters 5,", "sweep --clusters 5,,10", "sweep --clusters ''"}) {
    CAPTURE(args);
    std::tie(code, out, err) = run(cli + args);
    CHECK(code == 2);
    const std::string flag = args.substr(args.rfind("--"), args.find_first_of(" ", args.rfind("--")) - args.rfind("--"));
    CHECK(err.find(flag) != std::string::npos);
  }
  // --eval-only reads the checkpoint's settings: no need to repeat --preset and --data.
  std::tie(code, out, err) = run(cli + "--preset smoke --data " + dir.file("corpus") +
                                 " --vocab-size 30 --max-length 32 --batch-tokens 64 --layers 1 --steps 2 --save " +
                                 dir.file("m.ckpt"));
  REQUIRE(code == 0);
  std::tie(code, out, err) = run(cli + "--eval-only --resume " + dir.file("m.ckpt") + " --json");
  INFO(err);
  CHECK(code == 0);
  CHECK(nlohmann::json::parse(out.empty() ? "{}" : out).value("eval_only", false));
  std::tie(code, out, err) = run(cli + "--eval-only --resume " + dir.file("corpus"));
  CHECK(code == 1);  // a folder, not a checkpoint: a bad file
  std::tie(code, out, err) = run("TAPESTRY_DATA=" + dir.file("nowhere") + " " + cli + "--data brown --steps 1");
  CHECK(code == 1);
  CHECK(err.find("make data") != std::string::npos);
}

TEST_CASE("classify sweep: the Table 4 and Table 5 grids on one prepared corpus, as Markdown and JSON") {
  TempDir dir;
  write_corpus(dir.file("corpus"), {"rivers", "trade", "space"});
  app::ClassifyOptions o = tiny(dir.file("corpus"));
  o.train.steps = 2;
  o.train.eval_every = 0;
  app::SweepOptions s;
  s.clusters = {2, 4};
  s.ablation_clusters = 2;
  s.seeds = 2;
  s.out = dir.file("sweep");
  const nlohmann::json result = app::run_classify_sweep(o, s);
  const nlohmann::json& rows = result.at("rows");
  REQUIRE(rows.size() == 3 + 4 * 2);  // full, k = 2, k = 4; then (µ, ν) ∈ {0, 1e-3}² × 2 seeds
  CHECK(rows[0]["attention"] == "full");
  CHECK(rows[2]["attention"] == "neural-clustering:clusters=4,losses=cosine");
  CHECK(rows[3]["mu"] == 0.0);
  CHECK(rows[3]["nu"] == 0.0);
  CHECK(rows[4]["seed"] == 1);
  for (const auto& row : rows) {
    CHECK(row["peak_bytes"].get<int64_t>() > 0);
    CHECK(row["seconds_per_epoch"].get<double>() > 0);
  }
  const std::string md = read_text(dir.file("sweep.md"));
  CHECK(md.find("| neural-clustering:clusters=2,losses=cosine |") != std::string::npos);
  CHECK(md.find("| 0.001 | 0 |") != std::string::npos);
  CHECK(nlohmann::json::parse(read_text(dir.file("sweep.json")))["rows"].size() == rows.size());
  // A row is the run it names: the full and the k = 2 rows equal those runs made alone.
  o.train.progress = false;
  CHECK(rows[0]["accuracy"].get<double>() == app::run_classify(o).metric("accuracy"));
  o.attention = attention::AttentionConfig::parse("neural-clustering:clusters=2");
  CHECK(rows[1]["accuracy"].get<double>() == app::run_classify(o).metric("accuracy"));

  s.grid = "table6";
  check_error([&] { app::check_sweep_options(o, s); }, {"--grid", "table6"});
  s.grid = "both";
  o.train.save = dir.file("x.ckpt");
  check_error([&] { app::check_sweep_options(o, s); }, {"sweep", "--save"});
}

TEST_CASE("classify sweep command line: the classify flags before sweep, its own after") {
  TempDir dir;
  write_corpus(dir.file("corpus"), {"rivers", "trade"});
  const std::string cli = std::string(TAPESTRY_CLI) + " classify --preset smoke --data " + dir.file("corpus") +
                          " --vocab-size 30 --max-length 32 --batch-tokens 64 --steps 1 --eval-every 0 sweep ";
  const auto status = [&](const std::string& args) { return std::get<0>(run_shell(dir, cli + args)); };
  CHECK(status("--grid table4 --clusters 2 --out " + dir.file("s") + " --json") == 0);
  std::ifstream out(dir.file("out"));
  const nlohmann::json result = nlohmann::json::parse(out);
  CHECK(result["rows"].size() == 2);
  CHECK(std::filesystem::exists(dir.file("s.md")));
  CHECK(status("--grid nothing") == 2);
  CHECK(status("--clusters x") == 2);
  CHECK(status("--out " + dir.file("missing/s")) == 2);  // refused before any run
  CHECK(read_text(dir.file("err")).find("is not a folder: create it first") != std::string::npos);
  // An output that is a folder: refused before any run (the grid ran, wrote nothing and exited 0).
  std::filesystem::create_directories(dir.file("taken.md"));
  CHECK(status("--grid table4 --clusters 2 --out " + dir.file("taken")) == 2);
  CHECK(read_text(dir.file("err")).find("--out: '" + dir.file("taken") + ".md' is a folder") != std::string::npos);
}

TEST_CASE("classify: --inspect-every logs the clustering; tapestry inspect reads the checkpoint") {
  TempDir dir;
  write_corpus(dir.file("corpus"), {"rivers", "trade", "space"});
  app::ClassifyOptions o = tiny(dir.file("corpus"));
  o.layers = 2;
  o.attention = attention::AttentionConfig::parse("neural-clustering:clusters=3");
  o.train.save = dir.file("nc.ckpt");
  o.train.log = dir.file("nc.jsonl");
  o.train.inspect_every = 3;
  app::run_classify(o);
  const std::vector<nlohmann::json> logged = log_records(dir.file("nc.jsonl"), "inspect");
  REQUIRE(logged.size() == 3);  // steps 0, 3 and 6
  for (const nlohmann::json& record : logged) check_logged_inspection(record.at("inspect"), 2, 3);

  const app::InspectedCheckpoint nc = app::inspect_classify_checkpoint({dir.file("nc.ckpt"), 2, 0, "--checkpoint"});
  CHECK(nc.about.at("task") == "classify");
  CHECK(nc.about.at("step") == 6);
  CHECK(nc.inspection.losses == std::vector<std::string>{"task", "mu_l1", "nu_l2"});
  REQUIRE(nc.inspection.layers.size() == 2);
  // Every real token of the two held-out batches is in one cluster; padding in none.
  const int64_t words = nc.inspection.layers[0].clusters.at(0).total.words;
  CHECK(words > 0);
  CHECK(words < nc.inspection.sequences * nc.inspection.length + 1);

  // Improved-clustered: per head, and Proposition 2 on the real queries of padded documents.
  o.attention = attention::AttentionConfig::parse("improved-clustered:clusters=2,topk=4");
  o.train.save = dir.file("ic.ckpt");
  o.train.log = "";
  o.train.inspect_every = 0;
  app::run_classify(o);
  const app::InspectedCheckpoint ic = app::inspect_classify_checkpoint({dir.file("ic.ckpt"), 1, 0, "--checkpoint"});
  REQUIRE(ic.inspection.layers.size() == 2);
  for (const auto& a : ic.inspection.layers[0].attention) CHECK(a.proposition2 == 1.0);
  CHECK(ic.inspection.maps.size() == 2);

  // Full attention has nothing to inspect: the flag is refused before training.
  o.attention = attention::AttentionConfig::parse("full");
  o.train.log = dir.file("full.jsonl");
  o.train.inspect_every = 2;
  check_error([&] { app::run_classify(o); }, {"--inspect-every", "nothing to inspect", "full attention"});
  o.train.inspect_every = 0;
  o.train.save = dir.file("full.ckpt");
  app::run_classify(o);
  check_error([&] { app::inspect_classify_checkpoint({dir.file("full.ckpt"), 1, 0, "--checkpoint"}); },
              {"nothing to inspect", "full attention"});
  check_error([&] { app::inspect_classify_checkpoint({dir.file("nc.ckpt"), 99, 0, "--checkpoint"}); },
              {"--batches", "asked for 99"});
}
