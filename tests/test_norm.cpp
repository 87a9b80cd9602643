#include <cmath>
#include <vector>

#include "core/cpu_capability.h"
#include "ops/autocast.h"
#include "tests/oracle.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// The composition layer_norm must equal: (x − mean) / √(var + eps) ⊙ w + b over `dims`.
Tensor reference_layer_norm(const Tensor& x, const std::vector<int64_t>& dims, const Tensor& w, const Tensor& b,
                            double eps) {
  const Tensor centered = x - mean(x, dims, KeepDim::Yes);
  Tensor y = centered / sqrt(var(x, dims, KeepDim::Yes, 0) + eps);
  if (w.defined()) y = y * w;
  if (b.defined()) y = y + b;
  return y;
}

// layer_norm(x, w, b) on leaf copies of them, under autocast where asked, then its backward from dy:
// {y, dx, dweight, dbias}.
std::vector<Tensor> forward_backward(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& dy,
                                     bool autocast) {
  Tensor xi = x.detach(), wi = w.detach(), bi = b.detach();
  for (Tensor* t : {&xi, &wi, &bi}) t->set_requires_grad(true);
  Tensor y;
  {
    const AutocastScope scope(autocast);
    y = layer_norm(xi, wi, bi);
  }
  y.backward(dy);
  return {y, xi.grad(), wi.grad(), bi.grad()};
}

}  // namespace

TEST_CASE("layer_norm: gradcheck of x, weight and bias") {
  const Tensor x = uniform({3, 5}, 1, -2, 2), w = uniform({5}, 2, 0.5, 1.5), b = uniform({5}, 3);
  check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); }, {x, w, b});
  check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0]); }, {x});
  check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1]); }, {x, w});
  check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], Tensor(), in[1], 0.1); }, {x, b});
}

TEST_CASE("layer_norm over several trailing dims: gradcheck") {
  const Tensor x = uniform({2, 3, 4}, 4, -2, 2), w = uniform({3, 4}, 5, 0.5, 1.5), b = uniform({3, 4}, 6);
  check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], {3, 4}, in[1], in[2]); }, {x, w, b});
  check_gradients([](const std::vector<Tensor>& in) { return layer_norm(in[0], {2, 3, 4}); }, {x});
}

TEST_CASE("layer_norm equals its composition from mean, var, sub, div, sqrt: values and gradients") {
  const Tensor x = uniform({4, 3, 8}, 7, -3, 3), w = uniform({8}, 8, 0.5, 1.5), b = uniform({8}, 9);
  check_matches_reference(
      [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2], 1e-5); },
      [](const std::vector<Tensor>& in) { return reference_layer_norm(in[0], {-1}, in[1], in[2], 1e-5); },
      {x, w, b}, 1e-12, 1e-10);
  const Tensor w2 = uniform({3, 8}, 10, 0.5, 1.5);
  check_matches_reference(
      [](const std::vector<Tensor>& in) { return layer_norm(in[0], {3, 8}, in[1], Tensor(), 1e-3); },
      [](const std::vector<Tensor>& in) { return reference_layer_norm(in[0], {-2, -1}, in[1], Tensor(), 1e-3); },
      {x, w2}, 1e-12, 1e-10);
  check_matches_reference([](const std::vector<Tensor>& in) { return layer_norm(in[0]); },
                          [](const std::vector<Tensor>& in) { return reference_layer_norm(in[0], {-1}, {}, {}, 1e-5); },
                          {x}, 1e-12, 1e-10);
}

TEST_CASE("layer_norm in float32 stays accurate for rows far from zero") {
  // a large common offset: a one-pass E[x²] − E[x]² would lose every digit here
  const Tensor x32 = to(uniform({64, 32}, 11, -1, 1) + 1e4, DType::Float32);
  const Tensor x = to(x32, DType::Float64);  // the same values
  check_close(layer_norm(x32), reference_layer_norm(x, {-1}, {}, {}, 1e-5), 1e-5, 1e-5);
  check_matches_reference([](const std::vector<Tensor>& in) { return to(layer_norm(to(in[0], DType::Float32)), DType::Float64); },
                          [](const std::vector<Tensor>& in) { return reference_layer_norm(in[0], {-1}, {}, {}, 1e-5); },
                          {x}, 1e-4, 1e-4);
}

TEST_CASE("layer_norm checks its arguments") {
  const Tensor x = uniform({2, 4}, 12);
  check_error([] { layer_norm(ones({2, 4}, {DType::Int32})); }, {"layer_norm", "floating", "int32"});
  check_error([&] { layer_norm(x, ones({3}, {DType::Float64})); }, {"layer_norm", "weight", "(3,)", "(4,)"});
  check_error([&] { layer_norm(x, Tensor(), ones({4, 1}, {DType::Float64})); }, {"layer_norm", "bias", "(4, 1)"});
  check_error([&] { layer_norm(x, ones({4}, {DType::Float32})); }, {"layer_norm", "weight", "float32", "float64"});
  check_error([&] { layer_norm(x, {2}); }, {"layer_norm", "(2,)", "trailing dims", "(2, 4)"});
  check_error([&] { layer_norm(x, {3, 2, 4}); }, {"layer_norm", "(3, 2, 4)"});
  check_error([&] { layer_norm(x, Shape{}); }, {"layer_norm", "non-empty"});
  check_error([&] { layer_norm(x, Tensor(), Tensor(), -1.0); }, {"layer_norm", "eps", "-1"});
  check_error([] { layer_norm(scalar(1.0)); }, {"layer_norm", "0-d"});
}

TEST_CASE("layer_norm on inputs large enough to run on several threads matches the composition") {
  const Tensor x = uniform({300, 203}, 13, -3, 3), w = uniform({203}, 14, 0.5, 1.5), b = uniform({203}, 15);
  check_matches_reference(
      [](const std::vector<Tensor>& in) { return layer_norm(in[0], in[1], in[2]); },
      [](const std::vector<Tensor>& in) { return reference_layer_norm(in[0], {-1}, in[1], in[2], 1e-5); },
      {x, w, b}, 1e-11, 1e-9);
}

TEST_CASE("layer_norm gives the same bits under every CPU capability this CPU has") {
  // Its row sums run in eight float64 lanes, compiled for the baseline, AVX2 and AVX-512 (ops/norm.cpp);
  // 150 rows (three parts of dweight and dbias) of 203 (a lane-wide tail of 3), forward and backward;
  // in float32 also under autocast, whose backward reads x̂ in bfloat16.
  for (const DType dtype : {DType::Float32, DType::Float64, DType::BFloat16}) {
    const bool autocast = dtype == DType::BFloat16;
    const DType real = autocast ? DType::Float32 : dtype;
    const Tensor x = to(uniform({150, 203}, 16, -3, 3), real), w = to(uniform({203}, 17, 0.5, 1.5), real),
                 b = to(uniform({203}, 18), real), dy = to(uniform({150, 203}, 19), real);
    const auto run = [&](CpuCapability c) {
      CpuCapabilityScope scope(c);
      std::vector<double> all;
      for (const Tensor& t : forward_backward(x, w, b, dy, autocast)) {
        const std::vector<double> v = to(t, DType::Float64).to_vector<double>();
        all.insert(all.end(), v.begin(), v.end());
      }
      return all;
    };
    const std::vector<double> baseline = run(CpuCapability::Baseline);
    for (const CpuCapability c : {CpuCapability::Avx2, CpuCapability::Avx512}) {
      if (c > cpu_capability_supported()) continue;
      INFO((autocast ? "autocast" : dtype_name(dtype)) << " at " << to_string(c));
      CHECK(run(c) == baseline);
    }
  }
}

TEST_CASE("layer_norm under autocast: float32's forward, the gradients from x̂ kept in bfloat16") {
  // Rows near 1000 with a spread of ±3: rounded to 8 bits (a step of 4 there) x would lose x − μ;
  // x̂ = (x − μ) · rstd keeps 8 bits of itself. 37 rows of 70 (a lane-wide tail of 6).
  const DType f32 = DType::Float32, f64 = DType::Float64;
  const Tensor x = to(uniform({37, 70}, 20, -3, 3) + 1e3, f32), w = to(uniform({70}, 21, 0.5, 1.5), f32),
               b = to(uniform({70}, 22), f32), dy = to(uniform({37, 70}, 23), f32);
  const std::vector<Tensor> plain = forward_backward(x, w, b, dy, false), mixed = forward_backward(x, w, b, dy, true);
  for (const Tensor& t : mixed) CHECK(t.dtype() == f32);
  CHECK(mixed[0].to_vector<float>() == plain[0].to_vector<float>());  // the forward to the bit
  CHECK(mixed[3].to_vector<float>() == plain[3].to_vector<float>());  // dbias = Σ dy reads no x̂
  // The backward's formulas in float64 on x̂ rounded to bfloat16 (layer_norm(x) without weight and
  // bias is x̂ in float32): the results' float32 rounding apart, the same.
  const Tensor x64 = to(x, f64), g = to(dy, f64) * to(w, f64);
  const Tensor rstd = 1.0 / sqrt(var(x64, {-1}, KeepDim::Yes, 0) + 1e-5);
  const Tensor xhat = to(to(layer_norm(x), DType::BFloat16), f64);
  const Tensor dx = rstd * (g - mean(g, {-1}, KeepDim::Yes) - xhat * mean(g * xhat, {-1}, KeepDim::Yes));
  check_close(to(mixed[1], f64), dx, 1e-6, 1e-6);
  check_close(to(mixed[2], f64), sum(to(dy, f64) * xhat, {0}), 1e-5, 1e-6);
  // Against float32's gradients: x̂ to 8 bits, a few parts in 2^9 of the gradients' scale.
  for (const int i : {1, 2}) {
    const double scale = max(abs(to(plain[i], f64))).item<double>();
    check_close(mixed[i], plain[i], std::ldexp(scale, -6), 0);
    CHECK(max(abs(to(mixed[i], f64) - to(plain[i], f64))).item<double>() > 0);  // rounded: not float32's
  }
}

TEST_CASE("layer_norm under autocast keeps half the bytes for its backward") {
  // Float32 keeps x (4 bytes an element) and two float64 statistics a row; autocast x̂ in bfloat16
  // (2 bytes) and one statistic.
  Allocator& alloc = context(Device::cpu()).allocator();
  const int64_t R = 4096, D = 64;
  Tensor x = to(uniform({R, D}, 24), DType::Float32).detach();
  x.set_requires_grad(true);
  const auto held = [&](bool autocast) {
    alloc.empty_cache();
    const int64_t before = alloc.stats().in_use;
    const AutocastScope scope(autocast);
    const Tensor y = layer_norm(x + x);  // x + x: a tensor that only the layer norm keeps
    return alloc.stats().in_use - before - R * D * 4;
  };
  const int64_t plain = held(false), mixed = held(true);
  INFO("held beyond the output: float32 " << plain << " bytes, autocast " << mixed);
  CHECK(plain >= R * D * 4 + 2 * R * 8);
  CHECK(mixed <= R * D * 2 + R * 8);
}

namespace {

// dropout_add_layer_norm(x, s, ...) on leaf copies, or (composed) layer_norm(x + dropout(s, ...)),
// then the backward from dy: {y, dx, ds, dweight, dbias, the generator's next counter}. Each starts
// from a generator of one seed and leaves it for the last entry to show where.
std::vector<Tensor> residual_step(bool composed, const Tensor& x, const Tensor& s, const Tensor& w, const Tensor& b,
                                  const Tensor& dy, double p, Mode mode) {
  Tensor xi = x.detach(), si = s.detach(), wi = w.defined() ? w.detach() : Tensor(),
         bi = b.defined() ? b.detach() : Tensor();
  for (Tensor* t : {&xi, &si, &wi, &bi})
    if (t->defined()) t->set_requires_grad(true);
  Generator gen(77);
  gen.reserve(5);  // a generator part-way through its counters
  const Tensor y = composed ? layer_norm(xi + dropout(si, p, gen, mode), wi, bi, 1e-5)
                            : dropout_add_layer_norm(xi, si, p, gen, mode, wi, bi, 1e-5);
  y.backward(dy);
  const auto grad = [](const Tensor& t) { return t.defined() ? t.grad() : Tensor(); };
  return {y, xi.grad(), si.grad(), grad(wi), grad(bi), scalar(double(gen.reserve(1)))};
}

}  // namespace

TEST_CASE("dropout_add_layer_norm equals layer_norm(x + dropout(s)) to the bit: values, gradients, draws") {
  // 150 rows of 203 (three chunks of rows, a lane-wide tail) on one thread, 300 on several; a 3-d
  // input; one element. In train mode with p = 0.1, 0.5 and 0, and in eval mode; with and without
  // weight and bias; float32 and float64; under every CPU capability this CPU has.
  const std::vector<Shape> shapes{{150, 203}, {300, 203}, {3, 5, 8}, {1, 1}};
  uint64_t seed = 30;
  for (const DType dtype : {DType::Float32, DType::Float64})
    for (const Shape& shape : shapes)
      for (const auto& [p, mode] : std::vector<std::pair<double, Mode>>{
               {0.1, Mode::Train}, {0.5, Mode::Train}, {0.0, Mode::Train}, {0.1, Mode::Eval}})
        for (const bool affine : {true, false}) {
          const int64_t D = shape.back();
          const Tensor x = to(uniform(shape, ++seed, -2, 2), dtype), s = to(uniform(shape, ++seed, -2, 2), dtype),
                       dy = to(uniform(shape, ++seed), dtype);
          const Tensor w = affine ? to(uniform({D}, ++seed, 0.5, 1.5), dtype) : Tensor(),
                       b = affine ? to(uniform({D}, ++seed), dtype) : Tensor();
          for (const CpuCapability c : {CpuCapability::Baseline, CpuCapability::Avx2, CpuCapability::Avx512}) {
            if (c > cpu_capability_supported()) continue;
            const CpuCapabilityScope scope(c);
            INFO(dtype << " " << to_string(shape) << " p " << p << (mode == Mode::Eval ? " eval" : " train")
                       << (affine ? " with" : " without") << " weight and bias, " << to_string(c));
            const std::vector<Tensor> fused = residual_step(false, x, s, w, b, dy, p, mode),
                                      composed = residual_step(true, x, s, w, b, dy, p, mode);
            for (size_t i = 0; i < fused.size(); ++i) {
              INFO("result " << i << " (y, dx, ds, dweight, dbias, the generator's next counter)");
              REQUIRE(fused[i].defined() == composed[i].defined());
              if (fused[i].defined())
                CHECK(to(fused[i], DType::Float64).to_vector<double>() ==
                      to(composed[i], DType::Float64).to_vector<double>());
            }
          }
        }
}

TEST_CASE("dropout_add_layer_norm: gradcheck of x, s, weight and bias under one mask") {
  const Tensor x = uniform({6, 9}, 40, -2, 2), s = uniform({6, 9}, 41, -2, 2), w = uniform({9}, 42, 0.5, 1.5),
               b = uniform({9}, 43);
  for (const double p : {0.3, 0.0})
    check_gradients(
        [p](const std::vector<Tensor>& in) {
          Generator gen(9);  // the same mask at every evaluation
          return dropout_add_layer_norm(in[0], in[1], p, gen, Mode::Train, in[2], in[3]);
        },
        {x, s, w, b});
}

TEST_CASE("dropout_add_layer_norm checks its arguments") {
  const Tensor x = uniform({2, 4}, 44), s = uniform({2, 4}, 45);
  Generator gen(1);
  const auto call = [&](const Tensor& a, const Tensor& c, double p, const Tensor& w = {}) {
    return dropout_add_layer_norm(a, c, p, gen, Mode::Train, w);
  };
  check_error([&] { call(x, uniform({2, 5}, 46), 0.1); }, {"dropout_add_layer_norm", "one shape", "(2, 4)", "(2, 5)"});
  check_error([&] { call(x, to(s, DType::Float32), 0.1); }, {"dropout_add_layer_norm", "float64", "float32"});
  check_error([&] { call(x, s, 1.0); }, {"dropout_add_layer_norm", "[0, 1)", "1"});
  check_error([&] { call(x, s, -0.5); }, {"dropout_add_layer_norm", "[0, 1)", "-0.5"});
  check_error([&] { call(x, Tensor(), 0.1); }, {"dropout_add_layer_norm", "undefined"});
  check_error([&] { call(ones({2, 4}, {DType::Int32}), ones({2, 4}, {DType::Int32}), 0.1); },
              {"dropout_add_layer_norm", "floating", "int32"});
  check_error([&] { call(scalar(1.0), scalar(2.0), 0.1); }, {"dropout_add_layer_norm", "0-d"});
  check_error([&] { call(x, s, 0.1, ones({3}, {DType::Float64})); },
              {"dropout_add_layer_norm", "weight", "(3,)", "(4,)"});
  check_error([&] { dropout_add_layer_norm(x, s, 0.1, gen, Mode::Train, {}, {}, -1.0); },
              {"dropout_add_layer_norm", "eps", "-1"});
}
