#include "apps/inspect.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <vector>

#include "apps/options.h"
#include "core/tape_graph_draw.h"
#include "models/inspection.h"
#include "models/inspection_report.h"

namespace tapestry::app {

namespace {

constexpr const char* kCommand = "inspect";
constexpr const char* kSchema = "tapestry-inspect/1";

OptionTable<InspectOptions> make_table() {
  using O = InspectOptions;
  OptionTable<O> t({{"default", InspectOptions()}});
  t.add("--checkpoint", &O::checkpoint, "the checkpoint to inspect (of an app whose model has clustering)");
  t.add("--compare", &O::compare, "a later checkpoint of the same run: how many words change cluster, centroid movement");
  t.add("--batches", &O::batches, "held-out batches inspected together", between(1, 1 << 10));
  t.add("--json", &O::json, "write the inspection as JSON to FILE (docs/INSPECT.md)");
  t.add("--html", &O::html, "write a self-contained page of plots to FILE, with the autograd graph of the inspected pass");
  t.add("--graph", &O::graph, "write the autograd graph of the inspected pass as Graphviz DOT to FILE: each edge with "
        "each loss's gradient norm, cuts (argmax, sort, hashing) marked");
  t.add("--log", &O::log, "a JSON-lines training log with --inspect-every records, drawn over the run in --html");
  t.add("--seed", &O::seed, "seed of the clustered types' hashing");
  t.add("--threads", &O::threads, "CPU threads", thread_count());
  return t;
}

// The apps whose checkpoints `tapestry inspect` reads, by the task name their checkpoints record:
// each app registers itself (register_inspector), so that this file names none.
std::map<std::string, CheckpointInspector>& inspectors() {
  static std::map<std::string, CheckpointInspector> apps;
  return apps;
}

// "asr, classify, copy-task, reverse and translate"
std::string inspected_tasks() {
  std::string out;
  size_t left = inspectors().size();
  for (const auto& entry : inspectors()) {
    --left;
    out += entry.first + (left > 1 ? ", " : left == 1 ? " and " : "");
  }
  return out.empty() ? "none" : out;
}

// The checkpoint at `path` (given as `flag`), inspected by the app that wrote it. Errors name the
// flag and the path.
InspectedCheckpoint inspect_one(const std::string& path, const InspectOptions& o, const char* flag,
                                models::DrawGraph graph = models::DrawGraph::No) {
  train::RunIdentity identity;
  try {
    identity = train::read_identity(path);
  } catch (const Error& e) {
    fail(flag, e.what());
  }
  const auto app = inspectors().find(identity.task);
  TP_CHECK(app != inspectors().end(), flag, "'", path, "' is a ", identity.task,
           " checkpoint; tapestry inspect reads checkpoints of ", inspected_tasks());
  try {
    return app->second.inspect({path, o.batches, o.seed, flag, graph});
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.find(path) != std::string::npos) throw;  // says which file already
    fail(flag, "'", path, "': ", what);
  }
}

// Fails now, naming the flag, when `path` cannot be written, rather than after the work; a file the
// probe created is removed again.
void check_writable(const std::string& path, const char* flag) {
  if (path.empty()) return;
  const bool existed = std::filesystem::exists(path);
  const bool writable = std::ofstream(path, std::ios::app).good();
  if (!existed && writable) std::filesystem::remove(path);
  TP_CHECK(writable, flag, "cannot write '", path, "'");
}

void write_text(const std::string& path, const std::string& text, const char* flag) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  TP_CHECK(out.good(), flag, "could not write '", path, "'");
}

// The longest line of a training log read: a logged inspection is tens of KiB (one assignment per
// word and layer), so a longer line is not one, and a file without newlines (/dev/zero) is refused
// once this much of it is read rather than read until memory runs out.
constexpr size_t kMaxLogLineBytes = size_t{16} << 20;

// The next line of `in` into `line`, without its '\n'; false at the end. Throws Error naming --log,
// the file and the line for a line longer than kMaxLogLineBytes.
bool next_log_line(std::istream& in, std::string& line, const std::string& path, int64_t number) {
  line.clear();
  for (int c; (c = in.get()) != std::char_traits<char>::eof();) {
    if (c == '\n') return true;
    TP_CHECK(line.size() < kMaxLogLineBytes, "--log", "'", path, "' line ", number, " is longer than ",
             kMaxLogLineBytes >> 20, " MiB: not a training log");
    line.push_back(char(c));
  }
  return !line.empty();
}

// nlohmann's message without its "[json.exception.parse_error.101] " tag, which means nothing to a user.
std::string json_problem(const nlohmann::json::exception& e) {
  const std::string what = e.what();
  const size_t tag_end = what.rfind("[json.exception.", 0) == 0 ? what.find("] ") : std::string::npos;
  return tag_end == std::string::npos ? what : what.substr(tag_end + 2);
}

// The "inspect" records of a JSON-lines training log, in order: {"step": s, "inspect": {...}}, followed
// by its "eval" records ({"event": "eval", "step": s, <metrics>}) that the page plots beside them.
// Throws Error naming --log for a missing file, a line that is not JSON or too long, or a log with no
// inspect record (a run trained without --inspect-every, or a log of an app that does not inspect).
std::vector<nlohmann::json> read_inspect_log(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TP_CHECK(in.good(), "--log", "cannot read '", path, "'");
  std::vector<nlohmann::json> history, evaluations;
  std::string line;
  for (int64_t number = 1; next_log_line(in, line, path, number); ++number) {
    if (line.empty()) continue;
    nlohmann::json record;
    try {
      record = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail("--log", "'", path, "' line ", number, " is not JSON (", json_problem(e), ")");
    }
    if (record.is_object() && record.contains("inspect") && record.contains("step")) {
      try {  // drawn now, so that a record of another shape is named here, not met half-way through the page
        models::history_table({record});
        models::inspection_html(nlohmann::json(), {record});
      } catch (const nlohmann::json::exception& e) {
        fail("--log", "'", path, "' line ", number, ": not an inspection record as --inspect-every writes it (",
             json_problem(e), ")");
      }
      history.push_back(record);
    } else if (record.is_object() && record.value("event", "") == "eval" && record.contains("step")) evaluations.push_back(record);
  }
  TP_CHECK(!history.empty(), "--log", "'", path, "' holds no inspection: train with --inspect-every N (copy-task with "
           "clustered, improved-clustered or neural-clustering attention) to log them");
  history.insert(history.end(), evaluations.begin(), evaluations.end());
  return history;
}

int run_inspect(const InspectOptions& o) {
  const train::ScopedThreads threads(o.threads);
  check_writable(o.json, "--json");
  check_writable(o.html, "--html");
  check_writable(o.graph, "--graph");
  nlohmann::json document;
  std::optional<TapeGraph> graph;
  const bool draws = !o.graph.empty() || !o.html.empty();
  if (!o.checkpoint.empty()) document = inspect_checkpoint(o, draws ? &graph : nullptr);
  const std::vector<nlohmann::json> history = o.log.empty() ? std::vector<nlohmann::json>() : read_inspect_log(o.log);
  if (!document.is_null()) std::printf("%s", models::inspection_table(document).c_str());
  if (!history.empty()) std::printf("%s", models::history_table(history).c_str());
  std::fflush(stdout);
  if (!o.json.empty()) write_text(o.json, document.dump(1) + "\n", "--json");
  if (!o.graph.empty()) write_text(o.graph, to_dot(*graph), "--graph");
  if (!o.html.empty()) write_text(o.html, models::inspection_html(document, history, graph ? to_svg(*graph) : ""), "--html");
  return 0;
}

}  // namespace

void register_inspector(const CheckpointInspector& inspector) { inspectors()[inspector.task] = inspector; }

InspectedCheckpoint inspect_restored(InspectableTask& run, const CheckpointRequest& request,
                                     const train::RunIdentity& identity) {
  const train::ResumedRun resumed(request.path, identity, train::Compare::ModelOnly);
  resumed.restore_model(run.model());
  run.draw_graph(request.graph);
  models::Inspection inspection = run.inspection(request.batches, request.seed);
  const models::InspectionOptions o = run.inspection_options(request.seed);
  return {{{"checkpoint", request.path}, {"task", identity.task}, {"step", resumed.step()}, {"mu", o.mu}, {"nu", o.nu}},
          std::move(inspection)};
}

std::vector<int64_t> first_batches(const std::vector<std::vector<int64_t>>& batches, int64_t count) {
  TP_CHECK(count >= 1 && count <= int64_t(batches.size()), "--batches", "the run holds ", batches.size(),
           " held-out batches, asked for ", count);
  std::vector<int64_t> rows;
  for (int64_t i = 0; i < count; ++i) rows.insert(rows.end(), batches[size_t(i)].begin(), batches[size_t(i)].end());
  return rows;
}

void check_inspect_options(const InspectOptions& o) {
  make_table().check(o);
  TP_CHECK(!o.checkpoint.empty() || !o.log.empty(), "--checkpoint", "give a checkpoint to inspect (or --log FILE)");
  TP_CHECK(o.compare.empty() || !o.checkpoint.empty(), "--compare", "needs --checkpoint: the one to compare with");
  TP_CHECK(o.json.empty() || !o.checkpoint.empty(), "--json", "needs --checkpoint: the inspection to write");
  TP_CHECK(o.graph.empty() || !o.checkpoint.empty(), "--graph", "needs --checkpoint: the pass to draw");
  TP_CHECK(o.log.empty() || !o.html.empty() || !o.checkpoint.empty(), "--log", "needs --html: the page to draw it in");
}

nlohmann::json inspect_checkpoint(const InspectOptions& o, std::optional<TapeGraph>* graph) {
  const InspectedCheckpoint first =
      inspect_one(o.checkpoint, o, "--checkpoint", graph ? models::DrawGraph::Yes : models::DrawGraph::No);
  if (graph && first.inspection.graph)
    *graph = collapse(*first.inspection.graph, models::inspection_graph_view(first.inspection));
  nlohmann::json document = {{"schema", kSchema}};
  document.update(first.about);
  document.update(models::to_json(first.inspection));
  if (!o.compare.empty()) {
    const InspectedCheckpoint second = inspect_one(o.compare, o, "--compare");
    TP_CHECK(second.about["task"] == first.about["task"], "--compare", "'", o.compare, "' is a ",
             second.about["task"].get<std::string>(), " checkpoint but '", o.checkpoint, "' is a ",
             first.about["task"].get<std::string>(), " one");
    TP_CHECK(second.inspection.attention == first.inspection.attention, "--compare", "'", o.compare, "' has '",
             second.inspection.attention, "' attention but '", o.checkpoint, "' has '", first.inspection.attention, "'");
    document["compare"] = {{"checkpoint", o.compare}, {"step", second.about["step"]},
                           {"layers", models::to_json(models::compare_inspections(first.inspection, second.inspection))}};
  }
  return document;
}

void add_inspect(CommandLine& cli) {
  cli.add(kCommand,
          "Show how the gradients of the task loss and of the clustering losses reach a model's centroids and "
          "weights, and what its clustering does, on the run's held-out data",
          [](CLI::App& command) {
            const auto t = std::make_shared<OptionTable<InspectOptions>>(make_table());
            t->add_to(command);
            return [t]() {
              InspectOptions o;
              try {
                o = t->parsed();
                check_inspect_options(o);
              } catch (const Error& e) {
                std::fprintf(stderr, "tapestry %s: %s\n", kCommand, e.what());
                return kExitUsage;
              }
              return run_reporting_errors(kCommand, [&] { return run_inspect(o); });
            };
          });
}

}  // namespace tapestry::app
