// One option table per app: every flag once, with the field it sets, its help, its check and
// whether checkpoints record it. From the table come
//   - the command line: the flags, --preset, and each flag's preset values in --help;
//   - the options' checks (check(o)): run after parsing (a failure is a bad command line, exit 2)
//     and by the app for options built in code;
//   - the settings a checkpoint records and a resumed run must match (settings(o, Recorded::Model)).
//
//   OptionTable<CopyTaskOptions> table({{"paper", paper()}, {"smoke", smoke()}});
//   table.add("--layers", &CopyTaskOptions::layers, "encoder layers", at_least(1), Recorded::Model);
//   add_train_options(table, &CopyTaskOptions::train);   // --optimizer, --steps, --save, ... once for all apps
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "apps/app.h"
#include "apps/inspect.h"
#include "core/error.h"
#include "data/batch.h"
#include "nn/attention/config.h"
#include "optim/config.h"
#include "train/trainer.h"

namespace tapestry::app {

// Which checkpoint settings a flag belongs to (train/run_state.h).
enum class Recorded { No, Model, Training };

// A check of one value: the problem with it ("" when there is none) and, for --help, what is allowed.
template <class T>
struct Check {
  std::function<std::string(const T&)> problem;
  std::string allowed;
};

template <class T>
Check<T> at_least(T low) {
  std::ostringstream allowed;
  allowed << "at least " << low;
  return {[low](const T& v) {
            std::ostringstream out;
            if (!(v >= low)) out << "must be at least " << low << ", got " << v;
            return out.str();
          },
          allowed.str()};
}

// low ≤ v ≤ high (low < v with LowOpen, v < high with HighOpen), v finite.
enum class Bounds { Closed, LowOpen, HighOpen };
Check<double> in_range(double low, double high, Bounds bounds = Bounds::Closed);
// An integer in [low, high].
Check<int64_t> between(int64_t low, int64_t high);
// A --threads value: in [0, train::kMaxThreads] (0: OpenMP's default).
Check<int> thread_count();
// One of `values` ("mean | cls").
Check<std::string> one_of(std::vector<std::string> values);

template <class Options>
class OptionTable {
 public:
  // The presets, the first the default; with more than one, --preset NAME chooses.
  explicit OptionTable(std::vector<std::pair<std::string, Options>> presets) : presets_(std::move(presets)) {}

  // An option that sets o.*field.
  template <class T>
  void add(const std::string& flag, T Options::*field, const std::string& help, Check<T> check = {},
           Recorded recorded = Recorded::No) {
    add_entry<T>(flag, [field](Options& o) -> T& { return o.*field; }, help, std::move(check), recorded);
  }
  // An option that sets (o.*group).*field, for the options every app shares (train::TrainOptions).
  template <class Group, class T>
  void add(const std::string& flag, Group Options::*group, T Group::*field, const std::string& help,
           Check<T> check = {}, Recorded recorded = Recorded::No) {
    add_entry<T>(flag, [group, field](Options& o) -> T& { return (o.*group).*field; }, help, std::move(check),
                 recorded);
  }

  // Registers --preset and every option on `cmd`, or with `only` those it names; a repeated flag's
  // last value wins. A table serves one command: it reads the flags of the command it was last added
  // to, so each command needs a table of its own.
  void add_to(CLI::App& cmd, const std::vector<std::string>& only = {}) {
    const auto taken = [&](const std::string& flag) {
      return only.empty() || std::find(only.begin(), only.end(), flag) != only.end();
    };
    for (const std::string& flag : only) {  // a misspelt name would silently drop the flag
      bool known = flag == "--preset";
      for (const Entry& e : entries_) known = known || e.flag == flag;
      TP_CHECK(known, "option table", "no flag ", flag);
    }
    cmd.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    if (presets_.size() > 1 && taken("--preset")) {
      std::vector<std::string> names;
      std::string list;
      for (const auto& [name, options] : presets_) names.push_back(name), list += (list.empty() ? "" : "|") + name;
      cmd.add_option("--preset", preset_, "the values of the flags not given [default: " + names[0] + "]")
          ->type_name(list)
          ->check(CLI::IsMember(names));
    }
    for (Entry& e : entries_)
      if (taken(e.flag)) e.register_on(cmd);
  }

  // After parsing: the chosen preset, then `recorded` ({flag without dashes: value}, e.g. a
  // checkpoint's settings, so that a saved model is evaluated without repeating its flags), then
  // every given flag. Throws Error naming the flag for a recorded value of the wrong type.
  Options parsed(const nlohmann::json& recorded = nlohmann::json::object()) const {
    Options o = preset(preset_.empty() ? presets_[0].first : preset_);
    apply(o, recorded);
    for (const Entry& e : entries_) e.apply(o);
    return o;
  }
  // Sets in `o` the flags that `recorded` holds ({flag without dashes: value}); throws Error naming
  // the flag for a value of the wrong type.
  void apply(Options& o, const nlohmann::json& recorded) const {
    for (const Entry& e : entries_)
      if (recorded.contains(e.flag.substr(2))) e.assign(o, recorded.at(e.flag.substr(2)));
  }
  const Options& preset(const std::string& name) const {
    for (const auto& [n, options] : presets_)
      if (n == name) return options;
    fail("--preset", "unknown preset '", name, "'");
  }

  // Whether `flag` was on the command line last parsed.
  bool given(const std::string& flag) const {
    for (const Entry& e : entries_)
      if (e.flag == flag) return e.given();
    return false;
  }

  // Throws Error naming the first flag whose value fails its check.
  void check(const Options& o) const {
    for (const Entry& e : entries_) e.check(o);
  }

  // The run as checkpoints record it: `task` and the model and training settings of `o`.
  train::RunIdentity identity(const std::string& task, const Options& o) const {
    return {task, settings(o, Recorded::Model), settings(o, Recorded::Training)};
  }

  // {flag without dashes: value} of the flags recorded as `which`.
  nlohmann::json settings(const Options& o, Recorded which) const {
    nlohmann::json out = nlohmann::json::object();
    for (const Entry& e : entries_)
      if (e.recorded == which) out[e.flag.substr(2)] = e.value(o);
    return out;
  }

 private:
  struct Entry {
    std::string flag;
    Recorded recorded;
    std::function<void(CLI::App&)> register_on;
    std::function<bool()> given;          // whether the flag was on the command line
    std::function<void(Options&)> apply;  // the parsed value, when the flag was given
    std::function<void(Options&, const nlohmann::json&)> assign;  // a recorded value
    std::function<void(const Options&)> check;
    std::function<nlohmann::json(const Options&)> value;
  };

  template <class T>
  void add_entry(const std::string& flag, std::function<T&(Options&)> field, const std::string& help, Check<T> check,
                 Recorded recorded) {
    const auto get = [field](const Options& o) -> const T& { return field(const_cast<Options&>(o)); };
    // " [paper: 4, smoke: 2]" when the presets differ, " [default: 4]" when they agree; presets apart
    // by "; " when a value has commas (a config).
    bool commas = false;
    for (const auto& [name, options] : presets_)
      commas = commas || flag_text(get(options)).find(',') != std::string::npos;
    std::string defaults;
    for (const auto& [name, options] : presets_)
      defaults += (defaults.empty() ? "" : commas ? "; " : ", ") + name + ": " + flag_text(get(options));
    bool same = true;
    for (const auto& [name, options] : presets_) same = same && flag_text(get(options)) == flag_text(get(presets_[0].second));
    const std::string first = flag_text(get(presets_[0].second));
    if (same) defaults = first.empty() ? "" : "default: " + first;
    const std::string full_help =
        help + (check.allowed.empty() ? "" : " (" + check.allowed + ")") + (defaults.empty() ? "" : " [" + defaults + "]");

    auto given = std::make_shared<T>();
    auto option = std::make_shared<CLI::Option*>(nullptr);
    Entry e;
    e.flag = flag;
    e.recorded = recorded;
    e.register_on = [=](CLI::App& cmd) {
      *option = add_value(cmd, flag, *given, full_help);
    };
    e.given = [=] { return *option && (*option)->count() > 0; };
    e.apply = [=](Options& o) {
      if (*option && (*option)->count() > 0) field(o) = *given;
    };
    e.assign = [=](Options& o, const nlohmann::json& value) {
      try {
        if constexpr (kReadByParser<T>) field(o) = parse_flag_text<T>(value.get<std::string>());
        else field(o) = value.get<T>();
      } catch (const nlohmann::json::exception&) {
        fail(flag, "the recorded value ", value.dump(), " is not of this flag's type");
      } catch (const Error& e) {
        fail(flag, "the recorded value ", value.dump(), ": ", e.what());
      }
    };
    e.check = [=](const Options& o) {
      if (!check.problem) return;
      const std::string problem = check.problem(get(o));
      TP_CHECK(problem.empty(), flag, problem);
    };
    e.value = [=](const Options& o) {
      if constexpr (kReadByParser<T>) return nlohmann::json(flag_text(get(o)));
      else return nlohmann::json(get(o));
    };
    entries_.push_back(std::move(e));
  }

  std::vector<std::pair<std::string, Options>> presets_;
  std::string preset_;
  std::vector<Entry> entries_;
};

// The flags of train::TrainOptions, the same in every training app: --optimizer, --schedule,
// --clip, --param-groups, --seed (recorded as training settings), --steps, --eval-every, --patience, --device,
// --threads, --log, --save, --save-every, --save-best, --resume, --eval-only, --distributed, --inspect-every,
// --profile, --profile-json, --profile-trace.
// Their checks are
// train::check_options's.
template <class Options>
void add_train_options(OptionTable<Options>& t, train::TrainOptions Options::*g) {
  using T = train::TrainOptions;
  t.add("--optimizer", g, &T::optimizer,
        "optimizer, TYPE or TYPE:KEY=VALUE,... (e.g. radam:lr=2e-4); the types with their defaults: " +
            optim::optimizers_help(),
        {}, Recorded::Training);
  t.add("--schedule", g, &T::schedule,
        "learning-rate schedule, TYPE or TYPE:KEY=VALUE,...; the types with their defaults: " + optim::schedules_help() +
            " (plateau steps on the best metric; cosine's total=0: the run's steps)",
        {}, Recorded::Training);
  t.add("--clip", g, &T::clip, "max global gradient norm, 0: no clipping", {}, Recorded::Training);
  t.add("--param-groups", g, &T::param_groups,
        "parameter groups with their own settings (optim/param_groups.h): groups split by ';', name patterns "
        "(* and ?, over the full parameter names) by '|', then :lr=X,weight_decay=X,clip=global|none|X,"
        "rule=optimizer|sgd (clip X: clipped alone to norm X, out of --clip's norm; none: not clipped; rule=sgd: "
        "updated by plain SGD whatever --optimizer is), e.g. "
        "'*.w_c|*.centroids:lr=1e-3,clip=1;*.bias|*norm*:weight_decay=0'; parameters no group matches keep "
        "--optimizer's lr and weight decay",
        {}, Recorded::Training);
  t.add("--seed", g, &T::seed, "seed of the initial values, the data and the held-out set", {}, Recorded::Training);
  t.add("--steps", g, &T::steps, "optimizer steps (a resumed run trains up to this step)");
  t.add("--eval-every", g, &T::eval_every, "evaluate every N steps (0: only at the end)");
  t.add("--patience", g, &T::patience, "stop after N evaluations without a better best metric (0: never)");
  t.add("--device", g, &T::device, "auto, cpu, cuda or cuda:N (auto: the GPU when present)");
  t.add("--threads", g, &T::threads,
        "CPU threads, 0: OpenMP's default (OMP_NUM_THREADS, else one per core); where every core is busy 1 can be "
        "faster",
        thread_count());
  t.add("--tf32", g, &T::tf32,
        "float32 matmuls on the GPU in TensorFloat-32 (Ampere and later: several times faster, relative error "
        "about 1e-3); off: IEEE float32, as on the CPU");
  t.add("--precision", g, &T::precision,
        "float32, or bf16: mixed precision, matmuls and attention's products in bfloat16 with float32 "
        "accumulation, softmax, norms and losses in float32, weights and optimizer state float32 "
        "(docs/MIXED-PRECISION.md)",
        one_of({"float32", "bf16"}), Recorded::Training);
  t.add("--log", g, &T::log, "append JSON lines to FILE: each evaluation and the result");
  t.add("--save", g, &T::save, "write a checkpoint to FILE at the end");
  t.add("--save-every", g, &T::save_every, "also every N steps (0: never)");
  t.add("--save-best", g, &T::save_best, "write a checkpoint to FILE at every new best evaluation");
  t.add("--resume", g, &T::resume, "continue the run in checkpoint FILE (same settings), exactly");
  t.add("--eval-only", g, &T::eval_only, "evaluate the --resume checkpoint, train nothing");
  t.add("--distributed", g, &T::distributed,
        "one rank of an MPI job, started as mpirun -np N tapestry ... --distributed: data-parallel training "
        "(docs/DISTRIBUTED.md)");
  t.add("--inspect-every", g, &T::inspect_every,
        "log the gradient-flow inspection (tapestry inspect) to --log every N steps and at step 0; 0: never. Apps "
        "whose model has no clustering refuse it");
  t.add("--profile", g, &T::profile,
        "profile the training steps: time, FLOPs and bytes per op, forward and backward apart, as a table in FILE "
        "('-': standard error) at the end (docs/PROFILING.md)");
  t.add("--profile-json", g, &T::profile_json, "profile the training steps and write the profile as JSON to FILE");
  t.add("--profile-trace", g, &T::profile_trace,
        "profile the training steps and write their timeline to FILE (Chrome trace: chrome://tracing, Perfetto)");
}

// The settings checkpoint `path` records (its training settings under its model settings,
// {flag without dashes: value}), for OptionTable::parsed / apply. Throws Error naming `flag` and the
// path for a missing or unreadable file, and for a checkpoint of an app other than `task`.
nlohmann::json recorded_settings(const std::string& path, const std::string& task, const char* flag);

// The SentencePiece model beside a checkpoint (`CKPT.spm`) must be the one it was trained with:
// checkpoints record its fingerprint (data::SentencePiece::fingerprint) as the model setting
// "vocabulary". record_vocabulary puts `fingerprint` in `identity` for a run from scratch, or one
// that resumes a checkpoint recording it; check_vocabulary throws Error naming --resume and both
// files when `checkpoint` records another. A checkpoint from before the record is not checked.
void record_vocabulary(train::RunIdentity& identity, const std::string& fingerprint, const std::string& resume);
void check_vocabulary(const std::string& fingerprint, const std::string& spm_path, const std::string& checkpoint);
// Where a run writes its SentencePiece model: `CKPT.spm` beside each checkpoint it writes (--save,
// --save-best), except the one it resumes, whose model is already there.
std::vector<std::string> vocabulary_paths(const train::TrainOptions& train);

// The attention a model trains with and the one it is evaluated with.
struct Attentions {
  attention::AttentionConfig train, eval;
};

// The pair of --attention and --eval-attention (none: the training attention); throws Error naming
// --eval-attention for the pairs that cannot work: a ClusterFormer (neural-clustering) has weights a
// Transformer lacks, so it is evaluated only with its own attention, and only it.
Attentions attentions(const attention::AttentionConfig& train, const std::optional<attention::AttentionConfig>& eval);

// --attention and --eval-attention, for the apps whose model is chosen by an attention config;
// --attention is a model setting of checkpoints.
template <class Options>
void add_attention_options(OptionTable<Options>& t, attention::AttentionConfig Options::*train,
                           std::optional<attention::AttentionConfig> Options::*eval) {
  t.add("--attention", train,
        "attention to train with, KIND or KIND:KEY=VALUE,...; the kinds with their defaults: " +
            attention::kinds_help() +
            " (neural-clustering's losses=cosine is a bounded departure from the paper: losses=printed is eq. 6 "
            "as printed)",
        {}, Recorded::Model);
  t.add("--eval-attention", eval, "attention to evaluate with (default: the training attention)");
}

// --mu and --nu: the weights of neural clustering's losses L1 and L2 (ClusterFormer eq. 17), settings
// of the training that checkpoints record.
template <class Options>
void add_clustering_weights(OptionTable<Options>& t, double Options::*mu, double Options::*nu) {
  t.add("--mu", mu, "neural-clustering: weight µ of the clustering loss L1", in_range(0, 1e6), Recorded::Training);
  t.add("--nu", nu, "neural-clustering: weight ν of the centroid sorting loss L2", in_range(0, 1e6),
        Recorded::Training);
}

// Refuses --mu / --nu away from their defaults (nn::ClusteringLossWeights) when no attention of the
// run (`attentions`) has clustering losses: they would be accepted and ignored.
void check_clustering_weights(double mu, double nu, const std::vector<attention::AttentionConfig>& attentions);

// Refuses, naming --head-dim, a model width --heads × --head-dim above the models'
// kMaxModelWidth (models/layer_options.h): a bad command line, not an error once the run has read its data.
void check_model_width(int64_t heads, int64_t head_dim);

// Fails fast, naming the flag, when the attention weights of one layer would not fit in this
// machine's memory: B · H · score_elements(N) float32 (attention::Kind: (C, N) per head for the
// clustered kinds, (N, N) for full). A cheap lower bound, taken before anything is allocated, so that e.g.
// clustered:clusters=60000 at a large batch fails at once rather than after minutes of swapping.
void check_attention_memory(const Attentions& a, int64_t batch, int64_t heads, int64_t length);

// A training app's data::BatchSampler position as train::Task::data_state records it, and back (a
// state without one leaves the sampler where it is). The state counts the ranks that shared the
// epoch, so that a run resumes on any number of them at the same place in the epoch.
nlohmann::json sampler_state(const data::BatchSampler& sampler);
void restore_sampler(data::BatchSampler& sampler, const nlohmann::json& state);

// "<headline>: <metrics>; <seconds> s, <rate> <unit>/s on <device>", the line a training app ends with.
std::string summary_line(const std::string& headline, const train::Report& report);

// A training app's run prepared from its options (checked): what the Trainer is told and how it
// builds the task, the data already read (the factory keeps it).
struct PreparedRun {
  train::RunSpec spec;
  // The task on `device`, its model drawing its initial values from `gen` first, its data sharded over
  // `world`'s ranks.
  std::function<std::unique_ptr<train::Task>(Generator& gen, Device device, const dist::World& world)> make_task;
};

// Trains (or, with options.eval_only, evaluates) the prepared run on the Trainer.
train::Report run_prepared(const PreparedRun& run, const train::TrainOptions& options);

// Inspects a checkpoint of the prepared run (prepared from the settings the checkpoint records): the
// task built on the CPU, its model drawing from Generator(seed) before the checkpoint replaces it, then
// inspect_restored. Throws Error when the task is not an InspectableTask.
InspectedCheckpoint inspect_prepared(const PreparedRun& run, uint64_t seed, const CheckpointRequest& request);

// What a training app supplies to the command line.
template <class Options>
struct TrainingApp {
  std::string name, description;  // "copy-task"; "train" for `tapestry asr train` (add_training_app's parent)
  std::shared_ptr<OptionTable<Options>> table;
  // The table's flags this command takes (empty: all), e.g. only the evaluation flags for a command
  // that evaluates a saved model: a training flag there would be accepted and unused.
  std::vector<std::string> flags;
  // The task its checkpoints record ("copy-task"); when set, --eval-only --resume CKPT reads the
  // checkpoint's settings under the given flags, as app.recorded does.
  std::string task;
  std::function<void(const Options&)> check;            // throws Error naming the flag
  // The flags these options leave unused, each with why ({"--data", "--images replaces the data
  // set"}); one of them on the command line is refused (exit 2) rather than silently ignored. Null: none.
  std::function<std::vector<std::pair<std::string, std::string>>(const Options&)> unused;
  std::function<train::Report(const Options&)> run;
  // Settings to apply under the given flags, from the options as first parsed (e.g. the --resume
  // checkpoint's, for a command that evaluates a saved model); null: none. An Error here is a bad
  // file, not a bad command line: exit 1.
  std::function<nlohmann::json(const Options&)> recorded;
  std::function<std::string(const Options&, const train::Report&)> headline;  // "copy-task: L = 31, step 600"
  // The run the options describe, their checks passed: its RunSpec and task factory. `run` trains
  // run_prepared(prepare(o), o.train) (and what else the app runs, e.g. classify's folds); `tapestry
  // inspect` builds its task from a checkpoint's settings.
  std::function<PreparedRun(const Options&)> prepare;
  // For `tapestry inspect` of the app's checkpoints (`task`'s): what the app changes in the options
  // the checkpoint's settings give before preparing the run (e.g. the checkpoint as --resume, so that
  // its SentencePiece model is read beside it). Null: the app's checkpoints are not inspected.
  std::function<void(Options&, const CheckpointRequest&)> inspected;
};

// `tapestry inspect` of a checkpoint of `app`: the options from the settings it records, then
// app.inspected, app.check and inspect_prepared of app.prepare. Throws Error for a checkpoint of
// another app and the errors of those steps.
template <class Options>
InspectedCheckpoint inspect_app_checkpoint(const TrainingApp<Options>& app, const CheckpointRequest& request) {
  Options o;
  app.table->apply(o, recorded_settings(request.path, app.task, request.flag));
  app.inspected(o, request);
  app.check(o);
  return inspect_prepared(app.prepare(o), o.train.seed, request);
}

// The options `app` runs with, into `o`: its table's flags over app.recorded's settings (an Error
// there is a bad file: exit 1), then app.check (an Error there is a bad command line: exit 2).
// Returns 0, or the exit code after printing the message as `tapestry FULL_NAME: ...`.
template <class Options>
int resolve_options(const TrainingApp<Options>& app, const std::string& full_name, Options& o) {
  o = app.table->parsed();
  const bool evaluates = !app.task.empty() && o.train.eval_only && !o.train.resume.empty();
  if (app.recorded || evaluates) {  // a checkpoint that is missing, truncated or of another app: exit 1
    const int code = run_reporting_errors(full_name.c_str(), [&] {
      o = app.table->parsed(app.recorded ? app.recorded(o) : recorded_settings(o.train.resume, app.task, "--resume"));
      return 0;
    });
    if (code != 0) return code;
  }
  try {
    if (app.unused)
      for (const auto& [flag, why] : app.unused(o)) TP_CHECK(!app.table->given(flag), flag, "has no effect here: ", why);
    app.check(o);
  } catch (const Error& e) {  // a combination of flags that cannot work
    std::fprintf(stderr, "tapestry %s: %s\n", full_name.c_str(), e.what());
    return kExitUsage;
  }
  return 0;
}

// Registers `app`: its table's flags and --json. After parsing, app.check runs (an Error is a bad
// command line: exit 2), then app.run (an Error is exit 1); the summary line goes to stdout, or with
// --json one JSON object (Report::to_json) goes to stdout and the summary line to stderr. Returns the
// subcommand, for subcommands of its own (`tapestry classify sweep`). With a parent, the app is its
// subcommand (`tapestry asr train`).
template <class Options>
CLI::App* add_training_app(CommandLine& cli, TrainingApp<Options> app, CLI::App* parent = nullptr) {
  const std::string full_name = parent ? parent->get_name() + " " + app.name : app.name;  // for messages
  if (app.inspected)
    register_inspector({app.task, [app](const CheckpointRequest& r) { return inspect_app_checkpoint(app, r); }});
  return cli.add(app.name, app.description, [app, full_name](CLI::App& command) {
    app.table->add_to(command, app.flags);
    auto json = std::make_shared<bool>(false);
    add_value(command, "--json", *json, "print the result as one JSON object on stdout (progress stays on stderr)");
    return [app, json, full_name]() {
      Options o;
      if (const int code = resolve_options(app, full_name, o); code != 0) return code;
      return run_reporting_errors(full_name.c_str(), [&] {
        const train::Report r = app.run(o);
        if (r.rank != 0) return 0;  // one rank of several: rank 0 reports
        const std::string summary = summary_line(app.headline(o, r), r);
        if (*json) {
          std::fprintf(stderr, "%s\n", summary.c_str());
          std::printf("%s\n", r.to_json().dump().c_str());
        } else {
          std::printf("%s\n", summary.c_str());
        }
        std::fflush(stdout);
        return 0;
      });
    };
  }, parent);
}

// Makes `app` a command that evaluates or runs the saved model --resume names (`translate eval`):
// the checkpoint's recorded settings (those of `task`) go under the given flags, and a command line
// without --resume is refused before app.check. The options keep their TrainOptions in `train`.
template <class Options>
void read_settings_from_resume(TrainingApp<Options>& app, const std::string& task) {
  app.recorded = [task](const Options& o) {
    return o.train.resume.empty() ? nlohmann::json::object() : recorded_settings(o.train.resume, task, "--resume");
  };
  app.check = [check = app.check, task, name = app.name](const Options& o) {
    TP_CHECK(!o.train.resume.empty(), "--resume", "tapestry ", task, " ", name, " needs the checkpoint to use");
    check(o);
  };
}

// Registers `tapestry TASK eval` under `group` (`translate eval`, `asr eval`): `app` (the app's train
// command: its check, run and headline) run with train.eval_only on the --resume checkpoint, whose
// settings are read as read_settings_from_resume says, under `table` (a table of its own: a table
// reads the flags of the command it was added to last) taking only `flags`.
template <class Options>
void add_eval_app(CommandLine& cli, TrainingApp<Options> app, std::shared_ptr<OptionTable<Options>> table,
                  std::vector<std::string> flags, const std::string& task, std::string description, CLI::App* group) {
  app.name = "eval";
  app.inspected = nullptr;  // the train command registers the inspector
  app.description = std::move(description);
  app.table = std::move(table);
  app.flags = std::move(flags);
  read_settings_from_resume(app, task);
  app.run = [run = app.run](const Options& given) {
    Options o = given;
    o.train.eval_only = true;
    return run(o);
  };
  add_training_app(cli, app, group);
}

}  // namespace tapestry::app
