// `tapestry inspect` end to end: the built binary on small copy-task checkpoints, its JSON document
// checked against docs/INSPECT.md, its bad input (exit codes and messages), and its HTML page loaded
// in a real headless browser.
#include <cmath>
#include <fstream>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/copy_task.h"
#include "apps/reverse.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using nlohmann::json;

namespace {

// A two-layer copy-task model small enough to train in a test, saved to `path` after `steps` steps
// (continuing `resume` when given), inspected into `log` every `inspect_every` steps when given.
void train_copy_task(const std::string& path, const std::string& attention, int64_t steps,
                     const std::string& resume = "", int64_t inspect_every = 0, const std::string& log = "") {
  app::CopyTaskOptions o = app::copy_task_preset(app::Preset::Smoke);
  o.length = 5;
  o.layers = 2;
  o.heads = 2;
  o.head_dim = 4;
  o.ff = 16;
  o.batch = 4;
  o.eval_batches = 2;
  o.attention = attention::AttentionConfig::parse(attention);
  o.train.steps = steps;
  o.train.eval_every = 0;
  o.train.progress = false;
  o.train.save = path;
  o.train.resume = resume;
  o.train.inspect_every = inspect_every;
  o.train.log = log;
  app::run_copy_task(o);
}

std::tuple<int, std::string, std::string> inspect(const TempDir& dir, const std::string& args) {
  return run_shell(dir, std::string(TAPESTRY_CLI) + " inspect " + args);
}

bool is_number_or_null(const json& v) { return v.is_number() || v.is_null(); }

void check_summary(const json& s) {
  for (const char* k : {"min", "mean", "max"}) CHECK(is_number_or_null(s.at(k)));
}

// The document against the table of docs/INSPECT.md.
void check_document(const json& d, bool neural) {
  CHECK(d.at("schema") == "tapestry-inspect/1");
  CHECK(d.at("task") == "copy-task");
  CHECK(d.at("step").is_number_integer());
  CHECK(d.at("mu").is_number());
  CHECK(d.at("nu").is_number());
  CHECK(d.at("attention").is_string());
  CHECK(d.at("batch").at("sequences").is_number_integer());
  const int64_t n = d.at("batch").at("length").get<int64_t>();
  const std::vector<std::string> losses = neural ? std::vector<std::string>{"task", "mu_l1", "nu_l2"}
                                                 : std::vector<std::string>{"task"};
  CHECK(d.at("losses").size() == losses.size());
  for (const std::string& l : losses) CHECK(d.at("losses").at(l).is_number());
  REQUIRE(d.at("layers").is_array());
  REQUIRE(d.at("layers").size() == 2);
  for (const json& layer : d.at("layers")) {
    CHECK(layer.at("layer").is_number_integer());
    CHECK(layer.at("l1").is_number() == neural);
    CHECK(layer.at("l2").is_number() == neural);
    CHECK(layer.at("w_c_norm").is_number() == neural);
    if (neural) CHECK(layer.at("w_c_norm").get<double>() > 0);
    CHECK(layer.contains("assignment") == neural);
    if (neural) CHECK(int64_t(layer.at("assignment").size()) == n);
    std::vector<std::string> targets;
    for (const json& g : layer.at("gradients")) {
      targets.push_back(g.at("target"));
      CHECK((g.at("head").is_null() || g.at("head").is_number_integer()));
      CHECK(g.at("norms").size() == losses.size());
      for (const std::string& l : losses) CHECK(g.at("norms").at(l).get<double>() >= 0);
      CHECK(g.at("cosines").size() == losses.size() * (losses.size() - 1) / 2);
      for (const auto& [pair, c] : g.at("cosines").items()) {
        CHECK(is_number_or_null(c));
        if (c.is_number()) CHECK(std::abs(c.get<double>()) <= 1.0 + 1e-9);
      }
    }
    for (const char* t : {"w_q", "w_k", "w_v", "input"})
      CHECK(std::count(targets.begin(), targets.end(), t) >= 1);
    CHECK(std::count(targets.begin(), targets.end(), "centroids") == (neural ? 1 : 0));
    for (const json& c : layer.at("clusters")) {
      CHECK((c.at("head").is_null() == neural));
      CHECK(c.at("sizes").is_array());
      CHECK(c.at("words").is_number_integer());
      CHECK(c.at("empty").is_number());
      CHECK(c.at("largest_share").get<double>() <= 1.0);
      CHECK(c.at("unclaimed").is_number_integer());
      check_summary(c.at("entropy"));
      check_summary(c.at("centroid_norms"));
    }
    CHECK(layer.at("attention").size() == (neural ? 0u : 2u));
    for (const json& a : layer.at("attention")) {
      for (const char* k : {"clustered_topk_mass", "full_topk_mass", "l1_clustered", "l1_improved", "max_excess"})
        CHECK(a.at(k).is_number());
      CHECK(a.at("proposition2") == 1.0);
    }
  }
  CHECK(d.at("maps").size() == (neural ? 0u : 2u));
  for (const json& m : d.at("maps"))
    for (const char* k : {"full", "clustered", "improved"}) CHECK(int64_t(m.at(k).size()) == n * n);
}

std::string chromium() {
  for (const char* name : {"chromium", "chromium-browser"}) {
    const std::string path = "/usr/bin/" + std::string(name);
    if (std::ifstream(path).good()) return path;
  }
  return "";
}

}  // namespace

TEST_CASE("tapestry inspect: a neural-clustering checkpoint, its table, its JSON, and churn against a later one") {
  TempDir dir;
  train_copy_task(dir.file("a.ckpt"), "neural-clustering:clusters=3", 3);
  train_copy_task(dir.file("b.ckpt"), "neural-clustering:clusters=3", 6, dir.file("a.ckpt"));
  const auto [code, out, err] =
      inspect(dir, "--checkpoint " + dir.file("a.ckpt") + " --compare " + dir.file("b.ckpt") + " --json " + dir.file("i.json"));
  INFO(err);
  REQUIRE(code == 0);
  CHECK(out.find("gradient norms by loss") != std::string::npos);
  CHECK(out.find("cos task|mu_l1") != std::string::npos);
  const json d = json::parse(read_text(dir.file("i.json")));
  check_document(d, true);
  CHECK(d.at("step") == 3);
  // The form of the clustering losses the model trains with (the default, spelled out).
  CHECK(d.at("attention") == "neural-clustering:clusters=3,losses=cosine");
  REQUIRE(d.at("compare").at("layers").size() == 2);
  CHECK(d.at("compare").at("step") == 6);
  for (const json& l : d.at("compare").at("layers")) {
    CHECK(l.at("churn").get<double>() >= 0);
    CHECK(l.at("churn").get<double>() <= 1);
  }
  // Three Adam steps moved the first layer's centroid parameter.
  CHECK(d.at("compare").at("layers").at(0).at("centroid_movement").at("max").get<double>() > 0);
}

TEST_CASE("tapestry inspect: an improved-clustered checkpoint shows Proposition 2 on its activations") {
  TempDir dir;
  train_copy_task(dir.file("c.ckpt"), "improved-clustered:clusters=3,topk=4", 3);
  const auto [code, out, err] = inspect(dir, "--checkpoint " + dir.file("c.ckpt") + " --batches 2 --json " + dir.file("c.json"));
  INFO(err);
  REQUIRE(code == 0);
  CHECK(out.find("Prop. 2 holds") != std::string::npos);
  const json d = json::parse(read_text(dir.file("c.json")));
  check_document(d, false);
  CHECK(d.at("batch").at("sequences") == 8);  // two batches of 4
}

TEST_CASE("tapestry inspect: bad input gets a clear message and the usual exit code") {
  TempDir dir;
  train_copy_task(dir.file("full.ckpt"), "full", 1);
  {
    const auto [code, out, err] = inspect(dir, "--checkpoint " + dir.file("full.ckpt"));
    CHECK(code == 1);
    CHECK(err.find("nothing to inspect") != std::string::npos);
    CHECK(err.find("full attention has no clusters and no clustering losses") != std::string::npos);
  }
  {  // reverse, the smallest app, is inspected as copy-task is; its --batches are its held-out batches
    app::ReverseOptions r;
    r.length = 4, r.layers = 1, r.heads = 1, r.head_dim = 4, r.ff = 8, r.batch = 2, r.eval_batches = 1;
    r.attention = attention::AttentionConfig::parse("clustered:clusters=2");
    r.train.steps = 1, r.train.eval_every = 0, r.train.progress = false, r.train.save = dir.file("reverse.ckpt");
    app::run_reverse(r);
    const auto [code, out, err] = inspect(dir, "--checkpoint " + dir.file("reverse.ckpt") + " --batches 3");
    INFO(err);
    CHECK(code == 0);
    CHECK(out.find("(reverse, step 1), clustered:clusters=2") != std::string::npos);
    CHECK(out.find("6 sequences of 4") != std::string::npos);
  }
  {  // a checkpoint of an app whose model is not inspected
    Checkpoint c;
    c.metadata = {{"task", "cluster"}, {"model", json::object()}, {"training", json::object()}};
    save_checkpoint(dir.file("cluster.ckpt"), c);
    const auto [code, out, err] = inspect(dir, "--checkpoint " + dir.file("cluster.ckpt"));
    CHECK(code == 1);
    CHECK(err.find("is a cluster checkpoint; tapestry inspect reads checkpoints of asr, classify, copy-task, reverse and "
                   "translate") != std::string::npos);
  }
  {
    const auto [code, out, err] = inspect(dir, "--checkpoint " + dir.file("missing.ckpt"));
    CHECK(code == 1);
    CHECK(err.find("--checkpoint") != std::string::npos);
    CHECK(err.find("missing.ckpt") != std::string::npos);
  }
  {  // not a checkpoint at all
    std::ofstream(dir.file("junk.ckpt")) << "not a checkpoint";
    const auto [code, out, err] = inspect(dir, "--checkpoint " + dir.file("junk.ckpt"));
    CHECK(code == 1);
    CHECK(err.find("junk.ckpt") != std::string::npos);
  }
  train_copy_task(dir.file("nc.ckpt"), "neural-clustering:clusters=2", 1);
  {
    const auto [code, out, err] = inspect(dir, "--checkpoint " + dir.file("nc.ckpt") + " --json " + dir.file("no/such/dir/x.json"));
    CHECK(code == 1);
    CHECK(err.find("--json: cannot write") != std::string::npos);
    CHECK(out.empty());  // refused before the work
  }
  {
    const auto [code, out, err] = inspect(dir, "--checkpoint " + dir.file("nc.ckpt") + " --html " + dir.file("no/such/dir/x.html"));
    CHECK(code == 1);
    CHECK(err.find("--html: cannot write") != std::string::npos);
  }
  {  // a second checkpoint of another model
    train_copy_task(dir.file("ic.ckpt"), "improved-clustered:clusters=2,topk=2", 1);
    const auto [code, out, err] = inspect(dir, "--checkpoint " + dir.file("nc.ckpt") + " --compare " + dir.file("ic.ckpt"));
    CHECK(code == 1);
    CHECK(err.find("--compare") != std::string::npos);
  }
  for (const auto& [args, message] : std::vector<std::pair<std::string, std::string>>{
           {"", "give a checkpoint to inspect"},
           {"--checkpoint x --batches 0", "--batches"},
           {"--log x --compare y", "needs --checkpoint"},
           {"--log x", "needs --html"},
           {"--checkpoint x --threads -1", "--threads"},
           {"--checkpoint x --threads ''", "--threads"},
           {"--checkpoint x --seed ''", "--seed"}}) {
    const auto [code, out, err] = inspect(dir, args);
    INFO(args << ": " << err);
    CHECK(code == 2);
    CHECK(err.find(message) != std::string::npos);
  }
}

TEST_CASE("tapestry inspect: a log record of another shape is named by its line") {
  TempDir dir;
  std::ofstream(dir.file("odd.jsonl")) << "{\"event\": \"eval\", \"step\": 0}\n{\"step\": 1, \"inspect\": {}}\n";
  const auto [code, out, err] = inspect(dir, "--log " + dir.file("odd.jsonl") + " --html " + dir.file("odd.html"));
  CHECK(code == 1);
  CHECK(err.find("--log: '" + dir.file("odd.jsonl") + "' line 2: not an inspection record") != std::string::npos);
}

TEST_CASE("tapestry inspect: a log line that is not JSON is named without the parser's tag; a huge line is refused") {
  TempDir dir;
  std::ofstream(dir.file("bad.jsonl")) << "{\"event\": \"eval\", \"step\": 0}\nnot json\n";
  {
    const auto [code, out, err] = inspect(dir, "--log " + dir.file("bad.jsonl") + " --html " + dir.file("bad.html"));
    CHECK(code == 1);
    CHECK(err.find("--log: '" + dir.file("bad.jsonl") + "' line 2 is not JSON (parse error at") != std::string::npos);
    CHECK(err.find("json.exception") == std::string::npos);  // nlohmann's tag means nothing to a user
  }
  {  // a line past the bound is refused once the bound is read: /dev/zero is not read until memory runs out
    std::ofstream(dir.file("long.jsonl")) << std::string((size_t{16} << 20) + 1, 'a');
    const auto [code, out, err] = inspect(dir, "--log " + dir.file("long.jsonl") + " --html " + dir.file("long.html"));
    CHECK(code == 1);
    CHECK(err.find("'" + dir.file("long.jsonl") + "' line 1 is longer than 16 MiB") != std::string::npos);
  }
}

TEST_CASE("--inspect-every logs the inspection during training without changing training") {
  TempDir dir;
  train_copy_task(dir.file("plain.ckpt"), "neural-clustering:clusters=3", 4);
  train_copy_task(dir.file("inspected.ckpt"), "neural-clustering:clusters=3", 4, "", 2, dir.file("run.jsonl"));
  CHECK(read_text(dir.file("plain.ckpt")) == read_text(dir.file("inspected.ckpt")));  // byte for byte
  std::vector<int64_t> steps;
  std::istringstream lines(read_text(dir.file("run.jsonl")));
  for (std::string line; std::getline(lines, line);) {
    const json record = json::parse(line);
    if (record.at("event") != "inspect") continue;
    steps.push_back(record.at("step"));
    const json& in = record.at("inspect");
    CHECK(in.at("losses").size() == 3);
    CHECK(in.at("layers").size() == 2);
    CHECK_FALSE(in.contains("maps"));
  }
  CHECK(steps == std::vector<int64_t>{0, 2, 4});
  {
    const auto [code, out, err] = inspect(dir, "--log " + dir.file("run.jsonl") + " --html " + dir.file("run.html"));
    INFO(err);
    CHECK(code == 0);
    CHECK(out.find("logged inspections") != std::string::npos);
  }
  {  // a log without inspections
    std::ofstream(dir.file("plain.jsonl")) << "{\"event\": \"eval\", \"step\": 1}\n";
    const auto [code, out, err] = inspect(dir, "--log " + dir.file("plain.jsonl") + " --html " + dir.file("p.html"));
    CHECK(code == 1);
    CHECK(err.find("holds no inspection") != std::string::npos);
  }
  {  // a model without clustering refuses the flag; so does a run without a log
    const auto [code, out, err] =
        run_shell(dir, std::string(TAPESTRY_CLI) + " reverse --steps 1 --inspect-every 1 --log " + dir.file("r.jsonl"));
    CHECK(code == 1);
    CHECK(err.find("--inspect-every: nothing to inspect: full attention") != std::string::npos);
    const auto [code2, out2, err2] = run_shell(dir, std::string(TAPESTRY_CLI) + " copy-task --steps 1 --inspect-every 1");
    CHECK(code2 == 2);
    CHECK(err2.find("--inspect-every: needs --log FILE") != std::string::npos);
  }
  {  // full attention in copy-task: refused before training
    const auto [code, out, err] = run_shell(dir, std::string(TAPESTRY_CLI) + " copy-task --preset smoke --length 3 "
                                                 "--attention full --steps 1 --inspect-every 1 --log " + dir.file("f.jsonl"));
    CHECK(code == 1);
    CHECK(err.find("full attention has no clusters") != std::string::npos);
  }
}

TEST_CASE("tapestry inspect --html: the page loads in headless Chromium without console errors and draws its plots") {
  const std::string browser = chromium();
  if (browser.empty()) {
    if (in_ci()) FAIL("chromium is not installed; scripts/setup installs it for CI");
    std::cout << "inspect: skipped the browser test: chromium is not installed (scripts/setup installs it)" << std::endl;
    return;
  }
  TempDir dir;
  train_copy_task(dir.file("nc.ckpt"), "neural-clustering:clusters=3", 2, "", 1, dir.file("nc.jsonl"));
  train_copy_task(dir.file("ic.ckpt"), "improved-clustered:clusters=3,topk=4", 2);
  for (const std::string name : {"nc", "ic"}) {
    CAPTURE(name);
    const std::string log_flag = name == "nc" ? " --log " + dir.file("nc.jsonl") : "";
    const auto [code, out, err] = inspect(dir, "--checkpoint " + dir.file(name + ".ckpt") + " --json " + dir.file(name + ".json") +
                                                   " --html " + dir.file(name + ".html") + log_flag);
    INFO(err);
    REQUIRE(code == 0);
    // The browser's own profile in the temporary folder: nothing is written elsewhere.
    const auto [browser_code, dom, log] = run_shell(
        dir, browser + " --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=" + dir.file("profile") +
                 " --enable-logging=stderr --v=0 --dump-dom file://" + dir.file(name + ".html"));
    INFO(log);
    REQUIRE(browser_code == 0);
    CHECK(log.find(":CONSOLE") == std::string::npos);  // no console message, error or other
    CHECK(dom.find("<svg id=\"gradient-norms\"") != std::string::npos);
    CHECK(dom.find("<svg id=\"cluster-sizes-0\"") != std::string::npos);
    CHECK(dom.find("<svg id=\"cluster-sizes-1\"") != std::string::npos);
    CHECK((dom.find("<svg id=\"cosines\"") != std::string::npos) == (name == "nc"));
    CHECK((dom.find("<svg id=\"attention-map\"") != std::string::npos) == (name == "ic"));
    // From the log (steps 0, 1, 2): the figures over training, and one row of words per step.
    CHECK((dom.find("<svg id=\"history-norms\"") != std::string::npos) == (name == "nc"));
    const std::regex word("class=\"assignment-cell\"");
    CHECK(std::distance(std::sregex_iterator(dom.begin(), dom.end(), word), std::sregex_iterator()) ==
          (name == "nc" ? 3 * 12 : 0));
    // One bar per cluster in each size histogram that the browser parsed: 3 clusters × 2 layers.
    const std::regex bar("class=\"size-bar\"");
    CHECK(std::distance(std::sregex_iterator(dom.begin(), dom.end(), bar), std::sregex_iterator()) == 6);
    // Readable plots: log axes labelled at whole decades (never "1e-0.8"); a loss that sends a tensor
    // no gradient marked on the axis's "0" line, not left out (the task's into the centroids, which
    // only the clustering losses reach past the argmax), in the bars and over training; every logged
    // value a dot, so that a single evaluation shows; the clusters' colours named.
    const auto count = [&](const char* pattern) {
      const std::regex r(pattern);
      return std::distance(std::sregex_iterator(dom.begin(), dom.end(), r), std::sregex_iterator());
    };
    CHECK(count(">[0-9]e-?[0-9]+\\.[0-9]") == 0);
    CHECK(count(">1e-?[0-9]+</text>") >= 2);
    CHECK((count("class=\"zero-mark\"") >= 2) == (name == "nc"));  // the centroids of both layers
    CHECK((count("class=\"zero-point\"") == 3) == (name == "nc"));  // task -> centroids at steps 0, 1, 2
    CHECK((count("class=\"point\"") >= 3 * 2 + 3 * 2 + 2) == (name == "nc"));
    CHECK((dom.find(">cluster 2</text>") != std::string::npos) == (name == "nc"));
    // The numbers behind the page, as the browser holds them, are the --json document.
    const size_t open = dom.find("id=\"inspection\">"), close = dom.find("</script>", open);
    REQUIRE(open != std::string::npos);
    std::string data = dom.substr(open + 16, close - open - 16);
    const json page = json::parse(data);
    check_document(page.at("document"), name == "nc");
    const json& history = page.at("history");
    CHECK(std::count_if(history.begin(), history.end(), [](const json& r) { return r.contains("inspect"); }) ==
          (name == "nc" ? 3 : 0));
    CHECK((dom.find("<svg id=\"history-accuracy\"") != std::string::npos) == (name == "nc"));
    CHECK(page.at("document") == json::parse(read_text(dir.file(name + ".json"))));
  }
}

TEST_CASE("tapestry inspect --graph --html: the neural-clustering layer's graph with each loss's norms and the argmax cut, "
          "in DOT and on the page in headless Chromium") {
  TempDir dir;
  train_copy_task(dir.file("nc.ckpt"), "neural-clustering:clusters=3", 2);
  const auto [code, out, err] = inspect(dir, "--checkpoint " + dir.file("nc.ckpt") + " --graph " + dir.file("g.dot") +
                                                 " --html " + dir.file("nc.html"));
  INFO(err);
  REQUIRE(code == 0);
  const std::string dot = read_text(dir.file("g.dot"));
  CHECK(dot.rfind("digraph tape {", 0) == 0);
  CHECK(dot.find("[label=\"cut: argmax\\n") != std::string::npos);
  CHECK(dot.find("[label=\"encoder.layers.1\\n") != std::string::npos);  // the second layer, one box
  // C reaches the loss only through the clustering (eq. 2–3): its edge carries µ·L1's and ν·L2's
  // gradients, and none of the task's, whose path the argmax cuts.
  const std::smatch centroids = [&] {
    std::smatch m;
    REQUIRE(std::regex_search(dot, m, std::regex("n([0-9]+) \\[label=\"encoder\\.centroids\\\\n\\(3, [0-9]+\\)\"")));
    return m;
  }();
  std::smatch edge;
  REQUIRE(std::regex_search(dot, edge, std::regex("n" + centroids[1].str() + " -> n[0-9]+ \\[([^\\]]*)\\]")));
  const std::string label = edge[1].str();
  CHECK(label.find("mu_l1 ") != std::string::npos);
  CHECK(label.find("nu_l2 ") != std::string::npos);
  CHECK(label.find("task") == std::string::npos);
  // The task's gradient does reach the embedding.
  REQUIRE(std::regex_search(dot, edge, std::regex("n[0-9]+ -> n[0-9]+ \\[color=\"#374151\", label=\"task [0-9]")));
  // --graph needs a checkpoint, and a writable file.
  const auto [bad_code, bad_out, bad_err] = inspect(dir, "--graph " + dir.file("x.dot") + " --log " + dir.file("nc.ckpt"));
  CHECK(bad_code == 2);
  CHECK(bad_err.find("--graph: needs --checkpoint") != std::string::npos);
  const auto [dir_code, dir_out, dir_err] = inspect(dir, "--checkpoint " + dir.file("nc.ckpt") + " --graph " + dir.file("no/such/g.dot"));
  CHECK(dir_code == 1);
  CHECK(dir_err.find("--graph: cannot write") != std::string::npos);

  const std::string browser = chromium();
  if (browser.empty()) {
    if (in_ci()) FAIL("chromium is not installed; scripts/setup installs it for CI");
    std::cout << "inspect: skipped the browser test of the graph: chromium is not installed" << std::endl;
    return;
  }
  const std::string flags = " --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir=" + dir.file("profile");
  const auto [browser_code, dom, log] =
      run_shell(dir, browser + flags + " --enable-logging=stderr --v=0 --dump-dom file://" + dir.file("nc.html"));
  INFO(log);
  REQUIRE(browser_code == 0);
  CHECK(log.find(":CONSOLE") == std::string::npos);
  const size_t svg = dom.find("class=\"tape-graph\"");
  REQUIRE(svg != std::string::npos);
  const std::string graph = dom.substr(svg, dom.find("</svg>", svg) - svg);
  for (const char* text : {">cut: argmax</tspan>", ">encoder.centroids</tspan>", ">encoder.layers.0.w_c</tspan>",
                           ">encoder.layers.1</tspan>", ">softmax</tspan>", ">loss: task</tspan>", ">loss: mu_l1</tspan>",
                           ">loss: nu_l2</tspan>"}) {
    CAPTURE(text);
    CHECK(graph.find(text) != std::string::npos);
  }
  const std::regex cut_node("class=\"node kind-cut\"");
  // Layer 0's cuts: the argmax (eq. 4) and U's detached copy (read for NaN); the sorts that follow
  // work on the assignment, which has no gradient already, and are drawn as such.
  CHECK(std::distance(std::sregex_iterator(graph.begin(), graph.end(), cut_node), std::sregex_iterator()) == 2);
  CHECK(graph.find(">argsort</tspan>") != std::string::npos);
  CHECK(graph.find("class=\"edge edge-cut\"") != std::string::npos);
  // Looked at: a screenshot of the page's graph, drawn by the browser.
  const auto [shot_code, shot_out, shot_log] =
      run_shell(dir, browser + flags + " --window-size=1400,2400 --screenshot=" + dir.file("graph.png") + " file://" +
                         dir.file("nc.html") + "#tape");
  INFO(shot_log);
  REQUIRE(shot_code == 0);
  CHECK(std::filesystem::file_size(dir.file("graph.png")) > 20000);
}
