#include "apps/inspect.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "apps/copy_task.h"
#include "apps/inspect_report.h"
#include "apps/options.h"
#include "models/inspection.h"
#include "ops/loss.h"
#include "ops/shape.h"

namespace tapestry::app {

namespace {

constexpr const char* kCommand = "inspect";
constexpr const char* kSchema = "tapestry-inspect/1";

OptionTable<InspectOptions> make_table() {
  using O = InspectOptions;
  OptionTable<O> t({{"default", InspectOptions()}});
  t.add("--checkpoint", &O::checkpoint, "the copy-task checkpoint to inspect");
  t.add("--compare", &O::compare, "a later checkpoint of the same run: how many words change cluster, centroid movement");
  t.add("--batches", &O::batches, "held-out batches inspected together", between(1, 1 << 10));
  t.add("--json", &O::json, "write the inspection as JSON to FILE (docs/INSPECT.md)");
  t.add("--html", &O::html, "write a self-contained page of plots to FILE");
  t.add("--log", &O::log, "a JSON-lines training log with --inspect-every records, drawn over the run in --html");
  t.add("--seed", &O::seed, "seed of the clustered types' hashing");
  t.add("--threads", &O::threads, "CPU threads, 0: OpenMP's default");
  return t;
}

// The first batches of the run's held-out data, as one batch (B·batches, N).
Tensor inspected_tokens(const CopyTaskCheckpoint& c, Tensor* target) {
  std::vector<Tensor> inputs, targets;
  for (const data::CopyTaskBatch& b : c.held_out) inputs.push_back(b.input), targets.push_back(b.target);
  *target = concat(targets, 0);
  return concat(inputs, 0);
}

models::Inspection inspect_one(const std::string& path, const InspectOptions& o, const char* flag,
                               nlohmann::json& about) {
  CopyTaskCheckpoint c = load_copy_task_checkpoint(path, o.batches, flag);
  const attention::AttentionConfig config = c.model->options().attention;
  const std::string why = models::nothing_to_inspect(config);
  TP_CHECK(why.empty(), flag, "nothing to inspect in '", path, "': its model has '", config.to_string(),
           "' attention, and ", why);
  Tensor target;
  const Tensor tokens = inspected_tokens(c, &target);
  about = {{"checkpoint", path}, {"task", "copy-task"}, {"step", c.step}, {"mu", c.options.mu}, {"nu", c.options.nu}};
  return models::inspect_tagger(*c.model, tokens, [&](const Tensor& logits) { return cross_entropy(logits, target); },
                                {c.options.mu, c.options.nu, o.seed});
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

int run_inspect(const InspectOptions& o) {
  const train::ScopedThreads threads(o.threads);
  check_writable(o.json, "--json");
  check_writable(o.html, "--html");
  nlohmann::json document;
  if (!o.checkpoint.empty()) document = inspect_checkpoint(o);
  const std::vector<nlohmann::json> history = o.log.empty() ? std::vector<nlohmann::json>() : read_inspect_log(o.log);
  if (!document.is_null()) std::printf("%s", inspection_table(document).c_str());
  if (!history.empty()) std::printf("%s", history_table(history).c_str());
  std::fflush(stdout);
  if (!o.json.empty()) write_text(o.json, document.dump(1) + "\n", "--json");
  if (!o.html.empty()) write_text(o.html, inspection_html(document, history), "--html");
  return 0;
}

}  // namespace

void check_inspect_options(const InspectOptions& o) {
  make_table().check(o);
  TP_CHECK(!o.checkpoint.empty() || !o.log.empty(), "--checkpoint", "give a checkpoint to inspect (or --log FILE)");
  TP_CHECK(o.compare.empty() || !o.checkpoint.empty(), "--compare", "needs --checkpoint: the one to compare with");
  TP_CHECK(o.json.empty() || !o.checkpoint.empty(), "--json", "needs --checkpoint: the inspection to write");
  TP_CHECK(o.log.empty() || !o.html.empty() || !o.checkpoint.empty(), "--log", "needs --html: the page to draw it in");
}

nlohmann::json inspect_checkpoint(const InspectOptions& o) {
  nlohmann::json about;
  const models::Inspection first = inspect_one(o.checkpoint, o, "--checkpoint", about);
  nlohmann::json document = {{"schema", kSchema}};
  document.update(about);
  document.update(models::to_json(first));
  if (!o.compare.empty()) {
    nlohmann::json other;
    const models::Inspection second = inspect_one(o.compare, o, "--compare", other);
    TP_CHECK(second.attention == first.attention, "--compare", "'", o.compare, "' has '", second.attention,
             "' attention but '", o.checkpoint, "' has '", first.attention, "'");
    document["compare"] = {{"checkpoint", o.compare}, {"step", other["step"]},
                           {"layers", models::to_json(models::compare_inspections(first, second))}};
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
