// Checkpoints: round trips (bitwise), exact resume of Adam + schedule + generator, the layout of the
// file against its spec, refusal of every damaged or hostile file, and atomic saves (a save killed
// midway leaves the previous checkpoint intact).
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;
using json = nlohmann::json;
using Bytes = std::string;

namespace {

Bytes read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

uint64_t get_u64(const Bytes& b, size_t at) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = v << 8 | static_cast<unsigned char>(b[at + i]);
  return v;
}
void put_u32(Bytes& b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
}
void put_u64(Bytes& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<char>(v >> (8 * i));
}
uint32_t crc_of(const Bytes& b, size_t n) {
  return static_cast<uint32_t>(crc32_z(0, reinterpret_cast<const Bytef*>(b.data()), n));
}
// Recomputes the trailing checksum, so that a deliberately damaged file reaches the checks behind it.
void fix_checksum(Bytes& b) { put_u32(b, b.size() - 4, crc_of(b, b.size() - 4)); }

// A file laid out by the spec (core/checkpoint.h) from a raw header text and data region.
Bytes craft(const std::string& header, const Bytes& data, uint32_t version = 1) {
  Bytes b = "TAPESTRY" + Bytes(12, '\0') + header;
  put_u32(b, 8, version);
  put_u64(b, 12, header.size());
  b.resize((b.size() + 63) / 64 * 64, '\0');
  b += data + Bytes(4, '\0');
  fix_checksum(b);
  return b;
}

// One float32 tensor "w" of shape (2,) = {1, 2}: a header for craft() to vary.
json small_header() {
  return {{"data_size", 64},
          {"tensors", {{{"name", "w"}, {"dtype", "float32"}, {"shape", {2}}, {"offset", 0}, {"length", 8}}}},
          {"metadata", json::object()}};
}
Bytes small_data() {
  const float values[2] = {1.0f, 2.0f};
  Bytes data(64, '\0');
  std::memcpy(data.data(), values, sizeof values);
  return data;
}

// The elements of `t` in row-major order, as bytes.
Bytes bytes_of(const Tensor& t) {
  const Tensor host = host_contiguous(t);
  const char* p = static_cast<const char*>(host.raw_data());
  return Bytes(p, p + host.numel() * static_cast<int64_t>(element_size(host.dtype())));
}

void check_bitwise(const Tensor& loaded, const Tensor& original) {
  REQUIRE(loaded.defined());
  CHECK(loaded.dtype() == original.dtype());
  CHECK(loaded.shape() == original.shape());
  CHECK(loaded.device() == Device::cpu());
  CHECK(loaded.is_contiguous());
  CHECK_FALSE(loaded.requires_grad());
  CHECK(bytes_of(loaded) == bytes_of(original));
}

template <class T>
Tensor from_bits(const std::vector<uint64_t>& bits, const Shape& shape) {
  std::vector<T> values(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) std::memcpy(&values[i], &bits[i], sizeof(T));
  return from_vector<T>(values, shape);
}

// A small checkpoint of two tensors and some metadata (a few hundred bytes).
Checkpoint small_checkpoint() {
  Checkpoint c;
  c.tensors["a"] = from_vector<float>({1.5f, -2.0f, 3.25f}, {3});
  c.tensors["b"] = from_vector<int64_t>({7, -8}, {2, 1});
  c.metadata = {{"step", 12}, {"note", "small"}};
  return c;
}

// Loading `path` throws Error naming the path and containing every one of `parts`.
void check_load_error(const std::string& path, std::vector<std::string> parts) {
  parts.push_back("'" + path + "'");
  check_error([&] { load_checkpoint(path); }, parts);
}

}  // namespace

TEST_CASE("checkpoint: tensors of every dtype, 0-d, empty and non-contiguous round trip bitwise") {
  TempDir dir;
  const std::string path = dir.file("all.ckpt");
  Generator gen(5);

  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  Checkpoint c;
  // Special values, compared bit for bit: a NaN with a payload, −0, infinities, a subnormal.
  c.tensors["f32"] = from_bits<float>({0x7fc01234, 0x80000000, 0x7f800000, 0xff800000, 0x00000001, 0x3f800000}, {2, 3});
  c.tensors["f64"] = from_vector<double>({nan, -0.0, inf, -inf, 4.9e-324, 0.1}, {3, 2});
  c.tensors["i32"] = from_vector<int32_t>({std::numeric_limits<int32_t>::min(), -1, 0, 1,
                                           std::numeric_limits<int32_t>::max()}, {5});
  c.tensors["i64"] = from_vector<int64_t>({std::numeric_limits<int64_t>::min(), -1, 0,
                                           std::numeric_limits<int64_t>::max()}, {2, 2});
  c.tensors["bool"] = from_vector<bool>({true, false, false, true, true}, {5});
  c.tensors["scalar"] = scalar(-3.5, {DType::Float64});
  c.tensors["scalar_i32"] = scalar(9, {DType::Int32});
  c.tensors["empty"] = empty({0}, {DType::Float32});
  c.tensors["empty_3d"] = zeros({3, 0, 2}, {DType::Int64});
  c.tensors["empty_bool"] = zeros({0, 4}, {DType::Bool});
  const Tensor big = randn({7, 9}, gen);
  c.tensors["transposed"] = transpose(big, 0, 1);
  c.tensors["sliced"] = slice(big, 1, 1, 8, 3);
  c.tensors["expanded"] = expand(from_vector<int32_t>({1, 2, 3}, {1, 3}), {4, 3});
  c.tensors["permuted"] = permute(randn({2, 3, 4}, gen, {DType::Float64}), {2, 0, 1});
  c.tensors["selected_bool"] = select(from_vector<bool>({true, false, true, true, false, false}, {2, 3}), 1, 1);
  Tensor param = randn({4}, gen);
  param.set_requires_grad(true);
  c.tensors["param"] = param;
  c.tensors["unicode ünïcødé / name"] = ones({1});
  REQUIRE_FALSE(c.tensors["transposed"].is_contiguous());
  REQUIRE_FALSE(c.tensors["sliced"].is_contiguous());
  REQUIRE_FALSE(c.tensors["expanded"].is_contiguous());

  // Doubles of random bit patterns must come back exactly through the JSON text.
  std::mt19937_64 bits(11);
  json doubles = json::array();
  for (int i = 0; i < 500; ++i) {
    double x;
    do {
      const uint64_t b = bits();
      std::memcpy(&x, &b, sizeof x);
    } while (!std::isfinite(x));
    doubles.push_back(x);
  }
  doubles.push_back(-0.0);
  doubles.push_back(5e-324);
  doubles.push_back(std::numeric_limits<double>::max());
  c.metadata = {{"step", 1234},
                {"loss", 0.1 + 0.2},
                {"config", {{"d_model", 256}, {"attention", "improved-clustered:clusters=15,topk=32"},
                            {"layers", {1, 2, 3}}, {"tied", true}, {"extra", nullptr}}},
                {"seed", std::numeric_limits<uint64_t>::max()},
                {"offset", std::numeric_limits<int64_t>::min()},
                {"text", "tabs\t, quotes \", newlines\n, ünïcødé"},
                {"doubles", doubles},
                {"empty", json::object()}};

  save_checkpoint(path, c);
  const Checkpoint loaded = load_checkpoint(path);
  REQUIRE(loaded.tensors.size() == c.tensors.size());
  for (const auto& [name, tensor] : c.tensors) {
    INFO("tensor " << name);
    REQUIRE(loaded.tensors.count(name) == 1);
    check_bitwise(loaded.tensors.at(name), tensor);
  }
  CHECK(loaded.metadata == c.metadata);
  const json& back = loaded.metadata["doubles"];
  REQUIRE(back.size() == doubles.size());
  for (size_t i = 0; i < doubles.size(); ++i) {
    const double x = doubles[i].get<double>(), y = back[i].get<double>();
    INFO("double " << i << ": " << x);
    CHECK(std::memcmp(&x, &y, sizeof x) == 0);
  }
  CHECK(dir.list() == std::vector<std::string>{"all.ckpt"});  // no temporary file left behind

  // An empty checkpoint (null metadata counts as an empty object) round trips too.
  Checkpoint nothing;
  nothing.metadata = nullptr;
  save_checkpoint(path, nothing);
  const Checkpoint none = load_checkpoint(path);
  CHECK(none.tensors.empty());
  CHECK(none.metadata == json::object());
}

TEST_CASE("checkpoint: the file is laid out as its spec says") {
  TempDir dir;
  const std::string path = dir.file("layout.ckpt");
  Checkpoint c;
  c.tensors["x"] = from_vector<float>({1, 2, 3}, {3});
  c.tensors["y"] = from_vector<int64_t>({-1, 5, 6, 7, 8, 9, 10, 11, 12}, {3, 3});
  c.tensors["z"] = scalar(2.5, {DType::Float64});
  c.metadata = {{"step", 3}};
  save_checkpoint(path, c);
  const Bytes b = read_bytes(path);

  REQUIRE(b.size() > 24);
  CHECK(b.substr(0, 8) == "TAPESTRY");
  CHECK(get_u64(b, 8) % (uint64_t(1) << 32) == kCheckpointVersion);  // the u32 version
  const uint64_t header_length = get_u64(b, 12);
  const json header = json::parse(b.substr(20, header_length));
  const uint64_t data_start = (20 + header_length + 63) / 64 * 64;
  for (uint64_t i = 20 + header_length; i < data_start; ++i) CHECK(b[i] == '\0');
  const uint64_t data_size = header["data_size"];
  CHECK(b.size() == data_start + data_size + 4);
  CHECK(header["metadata"] == c.metadata);
  // The trailing u32 is zlib's crc32 of everything before it.
  uint32_t stored = 0;
  for (int i = 3; i >= 0; --i) stored = stored << 8 | static_cast<unsigned char>(b[b.size() - 4 + i]);
  CHECK(stored == crc_of(b, b.size() - 4));

  REQUIRE(header["tensors"].size() == 3);
  for (const json& e : header["tensors"]) {
    const std::string name = e["name"];
    INFO("tensor " << name);
    const Tensor& t = c.tensors.at(name);
    CHECK(e["dtype"] == dtype_name(t.dtype()));
    CHECK(e["shape"].get<Shape>() == t.shape());
    const uint64_t offset = e["offset"], length = e["length"];
    CHECK((data_start + offset) % 64 == 0);
    CHECK(length == static_cast<uint64_t>(t.numel()) * element_size(t.dtype()));
    CHECK(b.substr(data_start + offset, length) == bytes_of(t));
  }
}

TEST_CASE("checkpoint: Adam, its schedule and a generator resume bit for bit from a file") {
  TempDir dir;
  const std::string path = dir.file("train.ckpt");
  const optim::AdamOptions options{/*lr=*/1e-2, {0.8, 0.99}, 1e-6, /*weight_decay=*/0.01};

  // The gradients of each step come from the run's generator, so resuming needs its state too.
  auto train_step = [](optim::Adam& adam, optim::InverseSqrtSchedule& schedule, Generator& gen) {
    adam.zero_grad();
    Tensor loss;
    for (const Tensor& p : adam.parameters()) {
      const Tensor term = sum(p * randn(p.shape(), gen, {p.dtype()}));
      loss = loss.defined() ? loss + to(term, DType::Float64) : to(term, DType::Float64);
    }
    loss.backward();
    adam.step();
    schedule.step();
  };
  auto make_params = [](const Tensor& a, const Tensor& b) {
    std::vector<Tensor> params{clone(a), clone(b)};
    for (Tensor& p : params) p.set_requires_grad(true);
    return params;
  };

  Generator gen(2024);
  const std::vector<Tensor> params =
      make_params(randn({3, 4}, gen, {DType::Float32}), randn({5}, gen, {DType::Float64}));
  optim::Adam adam(params, options);
  optim::InverseSqrtSchedule schedule(adam, /*warmup=*/3);
  for (int step = 0; step < 4; ++step) train_step(adam, schedule, gen);

  {
    Checkpoint c;
    add_tensors(c, "model.", {{"w", params[0]}, {"b", params[1]}});
    add_optimizer_state(c, "optimizer", adam.state_dict());
    add_schedule_state(c, "schedule", schedule.state_dict());
    add_generator_state(c, "generator", gen);
    c.metadata["step"] = 4;
    save_checkpoint(path, c);
  }

  // A fresh process would do this: rebuild everything from the file alone.
  const Checkpoint loaded = load_checkpoint(path);
  CHECK(loaded.metadata["step"] == 4);
  const std::map<std::string, Tensor> model = tensors_with_prefix(loaded, "model.");
  REQUIRE(model.size() == 2);
  const std::vector<Tensor> resumed_params = make_params(model.at("w"), model.at("b"));
  optim::Adam resumed(resumed_params, options);
  optim::InverseSqrtSchedule resumed_schedule(resumed, /*warmup=*/3);
  resumed.load_state_dict(optimizer_state(loaded, "optimizer"));
  resumed_schedule.load_state_dict(schedule_state(loaded, "schedule"));
  Generator resumed_gen = generator_state(loaded, "generator");
  CHECK(resumed_gen.seed() == gen.seed());
  CHECK(resumed_gen.offset() == gen.offset());
  CHECK(resumed.lr() == adam.lr());
  CHECK(resumed_schedule.steps() == schedule.steps());

  for (int step = 0; step < 3; ++step) {
    train_step(adam, schedule, gen);
    train_step(resumed, resumed_schedule, resumed_gen);
    INFO("step " << step + 5);
    for (size_t i = 0; i < params.size(); ++i) CHECK(bytes_of(resumed_params[i]) == bytes_of(params[i]));
    CHECK(resumed.lr() == adam.lr());
    CHECK(resumed.steps(0) == adam.steps(0));
  }
  const optim::OptimizerState a = adam.state_dict(), b = resumed.state_dict();
  REQUIRE(a.buffers.size() == b.buffers.size());
  for (const auto& [key, tensor] : a.buffers) CHECK(bytes_of(b.buffers.at(key)) == bytes_of(tensor));
}

TEST_CASE("checkpoint: schedule and generator states keep every value exactly, infinities included") {
  TempDir dir;
  const std::string path = dir.file("states.ckpt");
  Tensor w = zeros({2});
  w.set_requires_grad(true);
  optim::SGD sgd({w}, {/*lr=*/0.3});
  optim::ReduceOnPlateau plateau(sgd, {0.5, 1, 0.0});
  const optim::ScheduleState fresh = plateau.state_dict();  // best = +inf before any metric
  REQUIRE(std::isinf(fresh.best));
  for (double metric : {1.0, 0.9, 0.95, 0.97}) plateau.step(metric);
  const optim::ScheduleState later = plateau.state_dict();

  optim::ScheduleState odd;  // values JSON has no literal for, and extremes
  odd.schedule = "custom";
  odd.steps = std::numeric_limits<int64_t>::max();
  odd.base_lr = std::numeric_limits<double>::denorm_min();
  odd.lr = -0.0;
  odd.best = -std::numeric_limits<double>::infinity();
  odd.bad_steps = 0;
  optim::ScheduleState nan_best = odd;
  nan_best.best = std::numeric_limits<double>::quiet_NaN();

  Checkpoint c;
  add_schedule_state(c, "fresh", fresh);
  add_schedule_state(c, "later", later);
  add_schedule_state(c, "odd", odd);
  add_schedule_state(c, "nan_best", nan_best);
  Generator g1(std::numeric_limits<uint64_t>::max()), g2(0);
  g1.reserve(std::numeric_limits<uint64_t>::max() - 5);
  add_generator_state(c, "g1", g1);
  add_generator_state(c, "g2", g2);
  save_checkpoint(path, c);
  const Checkpoint loaded = load_checkpoint(path);

  auto same = [](double x, double y) { return std::memcmp(&x, &y, sizeof x) == 0; };
  for (const auto& [key, state] : std::vector<std::pair<std::string, optim::ScheduleState>>{
           {"fresh", fresh}, {"later", later}, {"odd", odd}}) {
    INFO("schedule state " << key);
    const optim::ScheduleState back = schedule_state(loaded, key);
    CHECK(back.schedule == state.schedule);
    CHECK(back.steps == state.steps);
    CHECK(same(back.base_lr, state.base_lr));
    CHECK(same(back.lr, state.lr));
    CHECK(same(back.best, state.best));
    CHECK(back.bad_steps == state.bad_steps);
  }
  CHECK(std::isnan(schedule_state(loaded, "nan_best").best));

  // The restored ReduceOnPlateau continues as the original does.
  optim::SGD sgd2({w}, {/*lr=*/0.3});
  optim::ReduceOnPlateau plateau2(sgd2, {0.5, 1, 0.0});
  plateau2.load_state_dict(schedule_state(loaded, "later"));
  for (double metric : {0.99, 0.98, 0.5, 0.6, 0.7}) {
    plateau.step(metric);
    plateau2.step(metric);
    CHECK(plateau2.lr() == plateau.lr());
    CHECK(sgd2.lr() == sgd.lr());
    CHECK(plateau2.best() == plateau.best());
  }

  for (const auto& [key, g] : std::vector<std::pair<std::string, Generator>>{{"g1", g1}, {"g2", g2}}) {
    Generator back = generator_state(loaded, key);
    CHECK(back.seed() == g.seed());
    CHECK(back.offset() == g.offset());
  }
  Generator original(77), restored;
  original.reserve(1000);
  {
    Checkpoint g;
    add_generator_state(g, "gen", original);
    save_checkpoint(path, g);
    restored = generator_state(load_checkpoint(path), "gen");
  }
  CHECK(bytes_of(randn({16}, restored)) == bytes_of(randn({16}, original)));
}

TEST_CASE("checkpoint: the state helpers refuse missing, clashing and malformed entries") {
  Checkpoint c;
  check_error([&] { optimizer_state(c, "optimizer"); }, {"optimizer_state", "no optimizer state \"optimizer\""});
  check_error([&] { schedule_state(c, "schedule"); }, {"schedule_state", "no schedule state \"schedule\""});
  check_error([&] { generator_state(c, "gen"); }, {"generator_state", "no generator state \"gen\""});

  add_generator_state(c, "gen", Generator(3));
  check_error([&] { add_generator_state(c, "gen", Generator(4)); }, {"add_generator_state", "already has \"gen\""});
  check_error([&] { add_schedule_state(c, "gen", {}); }, {"add_schedule_state", "already has \"gen\""});
  check_error([&] { add_generator_state(c, "", Generator(4)); }, {"non-empty"});

  optim::OptimizerState state;
  state.optimizer = "Adam";
  state.lr = 0.1;
  state.steps = {1};
  state.buffers["exp_avg.0"] = zeros({2});
  state.buffers["exp_avg_sq.0"] = Tensor();
  check_error([&] { add_optimizer_state(c, "opt", state); }, {"add_optimizer_state", "\"exp_avg_sq.0\" is undefined"});
  CHECK_FALSE(c.metadata.contains("opt"));  // a refused add changes nothing
  CHECK(c.tensors.empty());
  state.buffers["exp_avg_sq.0"] = zeros({2});
  c.tensors["opt.exp_avg.0"] = zeros({1});
  check_error([&] { add_optimizer_state(c, "opt", state); }, {"already has a tensor 'opt.exp_avg.0'"});
  c.tensors.clear();
  add_optimizer_state(c, "opt", state);
  CHECK(optimizer_state(c, "opt").buffers.size() == 2);

  c.tensors.erase("opt.exp_avg_sq.0");
  check_error([&] { optimizer_state(c, "opt"); }, {"lacks tensor 'opt.exp_avg_sq.0'"});
  c.metadata["opt"]["steps"] = "three";
  check_error([&] { optimizer_state(c, "opt"); }, {"optimizer state \"opt\" \"steps\" is not a list of integers"});
  c.metadata["opt"].erase("steps");
  check_error([&] { optimizer_state(c, "opt"); }, {"has no \"steps\""});
  c.metadata["gen"]["seed"] = -1;
  check_error([&] { generator_state(c, "gen"); }, {"\"seed\" is not a non-negative integer: -1"});
  c.metadata["gen"] = 5;
  check_error([&] { generator_state(c, "gen"); }, {"generator state \"gen\" is not an object"});
  add_schedule_state(c, "sched", {});
  c.metadata["sched"]["lr"] = "fast";
  check_error([&] { schedule_state(c, "sched"); }, {"\"lr\" is not a number: \"fast\""});
  c.metadata["sched"]["steps"] = 1.5;
  check_error([&] { schedule_state(c, "sched"); }, {"\"steps\" is not a 64-bit integer"});

  c.tensors["model.a"] = zeros({1});
  check_error([&] { add_tensors(c, "model.", {{"a", zeros({2})}}); }, {"add_tensors", "already has a tensor 'model.a'"});
  check_error([&] { add_tensors(c, "model.", {{"u", Tensor()}}); }, {"tensor 'model.u' is undefined"});
}

TEST_CASE("checkpoint: save refuses bad input with a clear error and leaves no file behind") {
  TempDir dir;
  const std::string path = dir.file("bad.ckpt");

  Checkpoint undefined;
  undefined.tensors["ok"] = zeros({2});
  undefined.tensors["missing"] = Tensor();
  check_error([&] { save_checkpoint(path, undefined); }, {"save_checkpoint", path, "tensor 'missing' is undefined"});

  Checkpoint array;
  array.metadata = json::array({1, 2});
  check_error([&] { save_checkpoint(path, array); }, {path, "metadata must be a JSON object, got array"});

  Checkpoint non_finite;
  non_finite.metadata = {{"optimizer", {{"lr", std::numeric_limits<double>::quiet_NaN()}}}};
  check_error([&] { save_checkpoint(path, non_finite); }, {path, "metadata/optimizer/lr is nan", "cannot hold"});
  non_finite.metadata = {{"list", {1.0, -std::numeric_limits<double>::infinity()}}};
  check_error([&] { save_checkpoint(path, non_finite); }, {"metadata/list/1 is -inf"});

  Checkpoint bad_utf8;
  bad_utf8.metadata = {{"name", std::string("\xff\xfe")}};
  check_error([&] { save_checkpoint(path, bad_utf8); }, {path, "valid UTF-8"});

  // Metadata as deep as the loader accepts round trips; one level more is refused when saving.
  auto nested = [](int levels) {  // the metadata object, then levels - 1 arrays
    json value = 1;
    for (int i = 1; i < levels; ++i) value = json::array({std::move(value)});
    return json{{"deep", std::move(value)}};
  };
  Checkpoint deep;
  deep.metadata = nested(255);
  save_checkpoint(path, deep);
  CHECK(load_checkpoint(path).metadata == deep.metadata);
  deep.metadata = nested(256);
  check_error([&] { save_checkpoint(path, deep); }, {path, "nests deeper than 255 levels"});
  CHECK(dir.list() == std::vector<std::string>{"bad.ckpt"});

  const std::string nowhere = dir.file("no/such/dir/x.ckpt");
  check_error([&] { save_checkpoint(nowhere, small_checkpoint()); },
              {"save_checkpoint", nowhere, "cannot create the temporary file", "No such file or directory"});
  check_error([&] { save_checkpoint("", small_checkpoint()); }, {"save_checkpoint", "empty path"});

  // A directory in the way: the rename fails, and the temporary file is removed.
  const std::string occupied = dir.file("occupied");
  REQUIRE(::mkdir(occupied.c_str(), 0755) == 0);
  check_error([&] { save_checkpoint(occupied, small_checkpoint()); }, {occupied, "cannot rename", "Is a directory"});
  CHECK(dir.list() == std::vector<std::string>{"bad.ckpt", "occupied"});
}

TEST_CASE("checkpoint: a save that runs out of space fails cleanly and keeps the old file") {
  // The child process lowers its file size limit (RLIMIT_FSIZE), so writes fail with EFBIG as they
  // would with ENOSPC on a full disk, without filling one.
  TempDir dir;
  const std::string path = dir.file("model.ckpt");
  const Checkpoint old = small_checkpoint();
  save_checkpoint(path, old);
  const Bytes old_bytes = read_bytes(path);
  Checkpoint large;
  large.tensors["w"] = zeros({1 << 20});  // 4 MiB

  int pipe_fds[2];
  REQUIRE(::pipe(pipe_fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(pipe_fds[0]);
    ::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1 << 16, 1 << 16};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    std::string report = "no error";
    try {
      save_checkpoint(path, large);
    } catch (const Error& e) {
      report = e.what();
    }
    report += "\n" + std::to_string(::access((path + ".tmp." + std::to_string(::getpid())).c_str(), F_OK) == 0);
    (void)!::write(pipe_fds[1], report.data(), report.size());
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string report;
  char buffer[512];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) report.append(buffer, static_cast<size_t>(n));
  ::close(pipe_fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  INFO("child: " << report);
  CHECK(report.find("save_checkpoint: '" + path + "': cannot write") != std::string::npos);
  CHECK(report.find("File too large") != std::string::npos);
  CHECK(report.substr(report.size() - 2) == "\n0");  // the temporary file is gone
  CHECK(read_bytes(path) == old_bytes);
  CHECK(dir.list() == std::vector<std::string>{"model.ckpt"});
}

TEST_CASE("checkpoint: a save killed midway leaves the previous checkpoint intact") {
  TempDir dir;
  const std::string path = dir.file("model.ckpt");
  const Checkpoint old = small_checkpoint();
  save_checkpoint(path, old);
  const Bytes old_bytes = read_bytes(path);

  Checkpoint large;  // ~200 MB: writing it takes far longer than the parent needs to kill it
  large.tensors["w"] = full({50'000'000}, 0.5);
  large.metadata["step"] = 99;
  const uint64_t large_bytes = 200'000'000;

  // Kill the writer as soon as its temporary file appears, and again once it holds half the data.
  for (const uint64_t kill_at : {uint64_t(1), large_bytes / 2}) {
    CAPTURE(kill_at);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      try {
        save_checkpoint(path, large);
      } catch (...) {
        ::_exit(2);
      }
      ::_exit(0);
    }
    const std::string temp = path + ".tmp." + std::to_string(child);
    uint64_t seen = 0;
    int status = 0;
    bool exited = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      struct stat st;
      if (::stat(temp.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) >= kill_at) {
        seen = static_cast<uint64_t>(st.st_size);
        break;
      }
      if (::waitpid(child, &status, WNOHANG) == child) {
        exited = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    if (!exited) {
      ::kill(child, SIGKILL);
      REQUIRE(::waitpid(child, &status, 0) == child);
    }
    INFO("temporary file held " << seen << " bytes when the writer was killed");
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(WTERMSIG(status) == SIGKILL);
    CHECK(seen < large_bytes);

    // The last good checkpoint is untouched and loads as before.
    CHECK(read_bytes(path) == old_bytes);
    const Checkpoint back = load_checkpoint(path);
    CHECK(back.metadata == old.metadata);
    REQUIRE(back.tensors.size() == old.tensors.size());
    for (const auto& [name, tensor] : old.tensors) check_bitwise(back.tensors.at(name), tensor);
    // The killed writer's partial file is left behind (nothing could remove it), and is not valid.
    REQUIRE(::access(temp.c_str(), F_OK) == 0);
    check_load_error(temp, {});
    std::filesystem::remove(temp);
  }
  CHECK(dir.list() == std::vector<std::string>{"model.ckpt"});

  // A save that completes replaces the checkpoint.
  save_checkpoint(path, large);
  const Checkpoint replaced = load_checkpoint(path);
  CHECK(replaced.metadata["step"] == 99);
  CHECK(bytes_of(replaced.tensors.at("w")) == bytes_of(large.tensors.at("w")));
  CHECK(dir.list() == std::vector<std::string>{"model.ckpt"});
}

TEST_CASE("checkpoint: every truncation and every damaged byte is refused with a clear error") {
  TempDir dir;
  const std::string good = dir.file("good.ckpt"), bad = dir.file("bad.ckpt");
  save_checkpoint(good, small_checkpoint());
  const Bytes b = read_bytes(good);
  const uint64_t header_length = get_u64(b, 12);
  const size_t data_start = (20 + header_length + 63) / 64 * 64;
  REQUIRE(b.size() < 2048);

  SUBCASE("every prefix") {
    for (size_t n = 0; n < b.size(); ++n) {
      CAPTURE(n);
      write_bytes(bad, b.substr(0, n));
      check_load_error(bad, {"truncated"});
    }
    write_bytes(bad, b.substr(0, 24));
    check_load_error(bad, {"header length " + std::to_string(header_length), "does not fit in a file of 24 bytes"});
    write_bytes(bad, b.substr(0, b.size() - 1));
    check_load_error(bad, {"truncated: expected " + std::to_string(b.size()) + " bytes, found " +
                           std::to_string(b.size() - 1)});
    write_bytes(bad, b + "x");
    check_load_error(bad, {"found " + std::to_string(b.size() + 1), "trailing bytes"});
  }

  SUBCASE("every byte flipped, and every single bit of it") {
    for (size_t i = 0; i < b.size(); ++i) {
      for (const unsigned char mask : {0xff, 0x01, 0x80}) {
        CAPTURE(i);
        CAPTURE(int(mask));
        Bytes damaged = b;
        damaged[i] = static_cast<char>(damaged[i] ^ mask);
        write_bytes(bad, damaged);
        if (i < 8) check_load_error(bad, {"not a Tapestry checkpoint (bad magic)"});
        else if (i >= data_start) check_load_error(bad, {"checksum mismatch", "the file is corrupt"});
        else check_load_error(bad, {});  // version, header length, header: any specific error
      }
    }
  }

  SUBCASE("the header damaged with its checksum repaired still fails safely") {
    // Random byte changes in the prefix and header, the checksum recomputed, so that the parser and
    // the entry checks see them: every load either succeeds or throws Error, and never crashes.
    std::mt19937 rng(7);
    int loaded = 0;
    for (int trial = 0; trial < 3000; ++trial) {
      Bytes damaged = b;
      const int changes = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < changes; ++k) {
        const size_t at = 8 + rng() % (data_start - 8);
        damaged[at] = static_cast<char>(rng() % 2 ? rng() : "0123456789-.,:[]{}\"e "[rng() % 21]);
      }
      fix_checksum(damaged);
      write_bytes(bad, damaged);
      try {
        load_checkpoint(bad);
        ++loaded;
      } catch (const Error& e) {
        CHECK(std::string(e.what()).find(bad) != std::string::npos);
      }
    }
    MESSAGE(loaded << " of 3000 damaged headers happened to remain valid");
  }
}

TEST_CASE("checkpoint: wrong magic, newer versions and hostile headers are refused before any allocation") {
  TempDir dir;
  const std::string path = dir.file("x.ckpt");

  write_bytes(path, "hello, this is a text file and certainly not a checkpoint\n");
  check_load_error(path, {"load_checkpoint", "not a Tapestry checkpoint (bad magic)"});
  write_bytes(path, "TAPE");
  check_load_error(path, {"truncated: expected at least 24 bytes, found 4"});
  write_bytes(path, "");
  check_load_error(path, {"truncated: expected at least 24 bytes, found 0"});

  // Sanity: the crafted baseline loads.
  write_bytes(path, craft(small_header().dump(), small_data()));
  CHECK(load_checkpoint(path).tensors.at("w").to_vector<float>() == std::vector<float>{1.0f, 2.0f});

  write_bytes(path, craft(small_header().dump(), small_data(), /*version=*/2));
  check_load_error(path, {"format version 2, newer than this build reads (version 1)", "update Tapestry"});
  write_bytes(path, craft(small_header().dump(), small_data(), /*version=*/0xffffffff));
  check_load_error(path, {"format version 4294967295, newer"});
  write_bytes(path, craft(small_header().dump(), small_data(), /*version=*/0));
  check_load_error(path, {"unknown checkpoint format version 0"});

  // Lengths far beyond the file: the header length, the data region, a tensor.
  MemoryStats before = context(Device::cpu()).allocator().stats();
  context(Device::cpu()).allocator().reset_peak();
  for (const uint64_t huge : {uint64_t(1) << 40, std::numeric_limits<uint64_t>::max(), uint64_t(1) << 63}) {
    Bytes b = craft(small_header().dump(), small_data());
    put_u64(b, 12, huge);
    write_bytes(path, b);
    check_load_error(path, {"header length " + std::to_string(huge), "does not fit in a file of"});
  }
  auto check_header = [&](const json& header, std::vector<std::string> parts, const Bytes& data = small_data()) {
    write_bytes(path, craft(header.dump(), data));
    check_load_error(path, std::move(parts));
  };
  json h = small_header();
  h["data_size"] = std::numeric_limits<uint64_t>::max();
  check_header(h, {"claims a data region of 18446744073709551615 bytes"});
  h["data_size"] = uint64_t(1) << 50;
  {
    const Bytes b = craft(h.dump(), small_data());
    const uint64_t expected = (b.size() - 64 - 4) + (uint64_t(1) << 50) + 4;
    check_header(h, {"truncated: expected " + std::to_string(expected) + " bytes, found " + std::to_string(b.size())});
  }
  h = small_header();
  h["tensors"][0]["shape"] = {uint64_t(1) << 40};
  h["tensors"][0]["length"] = uint64_t(1) << 42;
  check_header(h, {"tensor 'w' lies at bytes [0, +4398046511104) outside the data region of 64 bytes"});
  h["tensors"][0]["shape"] = {uint64_t(1) << 62, 8};
  check_header(h, {"tensor 'w' has a shape too large to exist"});
  h["tensors"][0]["shape"] = {0, uint64_t(1) << 62, uint64_t(1) << 62};
  h["tensors"][0]["length"] = 0;
  check_header(h, {"tensor 'w' has a shape too large to exist"});
  h["tensors"][0]["shape"] = {std::numeric_limits<uint64_t>::max()};
  check_header(h, {"not a non-negative integer in its shape"});
  const MemoryStats after = context(Device::cpu()).allocator().stats();
  CHECK(after.peak - before.in_use < (1 << 20));  // nothing was allocated from those lengths

  // Malformed entries, each with a valid checksum, so the check itself must catch them.
  h = small_header();
  h["tensors"][0]["shape"] = {-2};
  check_header(h, {"not a non-negative integer in its shape [-2]"});
  h["tensors"][0]["shape"] = {2.0};
  check_header(h, {"not a non-negative integer in its shape"});
  h["tensors"][0]["shape"] = {3};
  check_header(h, {"tensor 'w' (float32, shape (3,)) takes 12 bytes, but its entry says 8"});
  h = small_header();
  h["tensors"][0]["dtype"] = "float16";
  check_header(h, {"tensor 'w' has an unknown dtype \"float16\""});
  h["tensors"][0]["dtype"] = 3;
  check_header(h, {"unknown dtype 3"});
  h = small_header();
  h["tensors"][0]["offset"] = 32;
  check_header(h, {"starts at offset 32, not a multiple of 64"});
  h["tensors"][0]["offset"] = 64;
  check_header(h, {"outside the data region of 64 bytes"});
  h["tensors"][0]["offset"] = -64;
  check_header(h, {"\"offset\" must be a non-negative integer, got -64"});
  h = small_header();
  h["tensors"][0].erase("length");
  check_header(h, {"tensor 'w' has no \"length\""});
  h = small_header();
  h["tensors"].push_back(h["tensors"][0]);
  check_header(h, {"tensor 'w' is listed twice"});
  h["tensors"][1]["name"] = "v";
  check_header(h, {"tensors '", "' overlap"});
  h["tensors"][1]["name"] = 7;
  check_header(h, {"tensor entry 1 \"name\" is not a string"});
  h = small_header();
  h["tensors"] = "none";
  check_header(h, {"\"tensors\" is not a list"});
  h = small_header();
  h["metadata"] = {1, 2};
  check_header(h, {"\"metadata\" is missing or not an object"});
  h.erase("metadata");
  check_header(h, {"\"metadata\" is missing or not an object"});
  h = small_header();
  h.erase("data_size");
  check_header(h, {"the header has no \"data_size\""});
  check_header(json::array({1, 2}), {"the header is not a JSON object"});

  write_bytes(path, craft("{\"data_size\": 64, \"tensors\": [", small_data()));
  check_load_error(path, {"the header is not valid JSON", "parse error"});
  write_bytes(path, craft(std::string(100000, '[') + std::string(100000, ']'), small_data()));
  check_load_error(path, {"the JSON header nests deeper than 256 levels"});

  // A header problem in a file whose checksum fails is reported as corruption.
  Bytes b = craft("{\"data_size\": 64, \"tensors\": [", small_data());
  b[30] = '~';
  write_bytes(path, b);
  check_load_error(path, {"checksum mismatch: the file is corrupt (the header is not valid JSON"});

  // Bool bytes other than 0 and 1 (a faulty writer's, checksum valid) are refused.
  h = small_header();
  h["tensors"][0]["dtype"] = "bool";
  h["tensors"][0]["length"] = 2;
  Bytes data(64, '\0');
  data[0] = 1;
  data[1] = 2;
  check_header(h, {"bool tensor 'w' holds the byte 2 at element 1"}, data);
}

TEST_CASE("checkpoint: a NUL byte in the header and huge sparse files are refused at once") {
  TempDir dir;
  const std::string path = dir.file("x.ckpt");
  // The JSON parser stopped at a NUL byte, so anything could follow a valid header; the checksum
  // is valid here, so the check itself must catch it.
  write_bytes(path, craft(small_header().dump() + Bytes(1, '\0') + "{\"anything\": [", small_data()));
  check_load_error(path, {"x.ckpt", "the header holds a NUL byte at offset"});
  write_bytes(path, craft(Bytes(1, '\0'), small_data()));
  check_load_error(path, {"NUL byte at offset 0"});

  // A sparse 3 GiB file: a header length that fits the file, or a broken header in front of a
  // huge data region. Neither may be read whole (it took 3.3 GB and 17 s) nor fail with a bare
  // std::bad_alloc: each is refused at once, naming the file.
  const uint64_t sparse_size = uint64_t(3) << 30;
  const auto sparse = [&](Bytes b) {
    write_bytes(path, b);
    REQUIRE(::truncate(path.c_str(), static_cast<off_t>(sparse_size)) == 0);
  };
  Bytes b = craft(small_header().dump(), small_data());
  put_u64(b, 12, sparse_size - 64);
  sparse(b);
  const auto start = std::chrono::steady_clock::now();
  check_load_error(path, {"x.ckpt", "header length 3221225408 exceeds the limit of 67108864 bytes"});
  sparse(craft("{\"data_size\": 64, \"tensors\": [", small_data()));
  check_load_error(path, {"x.ckpt", "the header is not valid JSON"});
  json h = small_header();
  h["data_size"] = sparse_size;
  sparse(craft(h.dump(), small_data()));
  check_load_error(path, {"x.ckpt", "bytes, found 3221225472"});
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(2));
  std::filesystem::remove(path);
}

TEST_CASE("checkpoint: paths that are not checkpoint files are refused") {
  TempDir dir;
  auto open_files = [] {
    return std::distance(std::filesystem::directory_iterator("/proc/self/fd"), std::filesystem::directory_iterator());
  };
  const auto files_before = open_files();
  const std::string missing = dir.file("missing.ckpt");
  check_load_error(missing, {"load_checkpoint", "cannot open", "No such file or directory"});
  check_load_error(dir.file(""), {"is a directory, not a checkpoint file"});
  const std::string subdir = dir.file("sub");
  REQUIRE(::mkdir(subdir.c_str(), 0755) == 0);
  check_load_error(subdir, {"is a directory"});
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  check_load_error(fifo, {"is not a regular file"});  // and does not block waiting for a writer
  check_load_error("/dev/null", {"is not a regular file"});
  CHECK(open_files() == files_before);  // every refusal closed what it opened
}

TEST_CASE("checkpoint: tensors on the GPU are saved from a host copy") {
  if (!cuda::is_available()) {
    MESSAGE("skipped: " << cuda::unavailable_reason());
    return;
  }
  TempDir dir;
  Generator gen(3);
  Checkpoint c;
  const Tensor host = randn({33, 7}, gen);
  c.tensors["gpu"] = to(host, Device::cuda());
  c.tensors["gpu_t"] = transpose(c.tensors["gpu"], 0, 1);
  save_checkpoint(dir.file("gpu.ckpt"), c);
  const Checkpoint loaded = load_checkpoint(dir.file("gpu.ckpt"));
  check_bitwise(loaded.tensors.at("gpu"), host);
  check_bitwise(loaded.tensors.at("gpu_t"), transpose(host, 0, 1));
}
