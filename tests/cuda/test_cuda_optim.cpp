// Optimizers and gradient clipping on the GPU against the CPU: SGD (plain, momentum, Nesterov,
// weight decay), Adam, AdamW and RAdam (across its switch to rectified steps) over several steps of
// float32 and float64 parameters of every parity size, a parameter skipped for a step, one that
// never gets a gradient, one beyond one grid; the state buffers and step counts after the run; and
// clip_grad_norm's global norm (deterministic on the GPU), clipping, and non-finite gradients.
//
// Gradients are set exactly on both devices through the loss Σ w ⊙ g (dL/dw = g), so the devices
// update from the same bits. The update kernel is compiled without fused multiply-adds
// (optim/cuda/apply_rule.cu), so each step is expected to agree bit for bit; the tolerances below are a few
// ulp, accumulated over the steps, and would catch any real difference.
#include <cmath>
#include <functional>
#include <limits>
#include <memory>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

Tolerance optim_tol(DType dtype) { return dtype == DType::Float32 ? Tolerance{1e-7, 1e-6} : Tolerance{1e-15, 1e-13}; }

// Sets w.grad() to exactly g (g on the host; copied to w's device).
void set_grad(const Tensor& w, const Tensor& g) {
  w.zero_grad();
  sum(w * to(g, w.device())).backward();
}

struct Spec {
  Shape shape;
  DType dtype;
};

// Every parity size, both dtypes; the last parameter never gets a gradient.
const std::vector<Spec>& specs() {
  static const std::vector<Spec> s{{{0}, DType::Float32},     {{1}, DType::Float64},   {{31}, DType::Float32},
                                   {{33, 5}, DType::Float64}, {{1000}, DType::Float32}, {{4097}, DType::Float64},
                                   {{7, 3}, DType::Float32}};
  return s;
}

std::vector<Tensor> parameters_on(Device device, uint64_t seed) {
  std::vector<Tensor> params;
  for (const Spec& s : specs()) {
    Tensor p = to(input(s.shape, ++seed, s.dtype, -2, 2), device);
    p.set_requires_grad(true);
    params.push_back(p);
  }
  return params;
}

using MakeOptimizer = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// `steps` steps of one optimizer on the CPU and on the device under test, from the same parameters
// and gradients: parameters equal after every step; step counts and state buffers at the end.
// Parameter 2 gets no gradient at step 2 (skipped: its state and count stay); the last never gets one.
void check_optimizer(const MakeOptimizer& make, int64_t steps) {
  const std::vector<Tensor> cpu = parameters_on(Device::cpu(), 10), gpu = parameters_on(dut(), 10);
  const auto cpu_opt = make(cpu), gpu_opt = make(gpu);
  const size_t trained = specs().size() - 1;
  for (int64_t t = 1; t <= steps; ++t) {
    for (size_t i = 0; i < trained; ++i) {
      if (i == 2 && t == 2) {
        cpu[i].zero_grad(), gpu[i].zero_grad();
        continue;
      }
      const Tensor g = input(specs()[i].shape, 1000 * static_cast<uint64_t>(t) + i, specs()[i].dtype, -0.1, 0.1);
      set_grad(cpu[i], g);
      set_grad(gpu[i], g);
    }
    cpu_opt->step();
    gpu_opt->step();
    for (size_t i = 0; i < cpu.size(); ++i) {
      INFO(cpu_opt->name() << " step " << t << " parameter " << i << " " << to_string(cpu[i].shape()));
      expect_close(gpu[i].detach(), cpu[i].detach(), optim_tol(specs()[i].dtype));
    }
  }
  for (size_t i = 0; i < cpu.size(); ++i) CHECK(gpu_opt->steps(i) == cpu_opt->steps(i));
  CHECK(gpu_opt->steps(specs().size() - 1) == 0);
  const optim::OptimizerState a = gpu_opt->state_dict(), b = cpu_opt->state_dict();
  REQUIRE(a.buffers.size() == b.buffers.size());
  for (const auto& [key, buffer] : b.buffers) {
    INFO(cpu_opt->name() << " buffer " << key);
    REQUIRE(a.buffers.count(key) == 1);
    expect_close(a.buffers.at(key), buffer, optim_tol(buffer.dtype()));
  }
}

}  // namespace

TEST_CASE("SGD on the device: plain, momentum, Nesterov, weight decay") {
  check_optimizer([](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.1}); }, 4);
  check_optimizer([](std::vector<Tensor> p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.1, 0.0, 0.05});
  }, 3);
  check_optimizer([](std::vector<Tensor> p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.05, 0.9, 0.01});
  }, 5);
  check_optimizer([](std::vector<Tensor> p) {
    return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.05, 0.9, 0.0, optim::Nesterov::Yes});
  }, 5);
}

TEST_CASE("Adam and AdamW on the device") {
  check_optimizer([](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions{1e-2}); }, 6);
  check_optimizer([](std::vector<Tensor> p) {
    return std::make_unique<optim::Adam>(p, optim::AdamOptions{1e-2, {0.8, 0.99}, 1e-3, 0.01});
  }, 6);
  check_optimizer([](std::vector<Tensor> p) {
    return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{1e-2, {0.9, 0.999}, 1e-8, 0.1});
  }, 6);
}

TEST_CASE("Adam and AdamW with amsgrad on the device: the maximum buffer too") {
  check_optimizer([](std::vector<Tensor> p) {
    optim::AdamOptions o{1e-2, {0.8, 0.9}, 1e-3, 0.01};
    o.amsgrad = optim::AmsGrad::Yes;
    return std::make_unique<optim::Adam>(p, o);
  }, 6);
  check_optimizer([](std::vector<Tensor> p) {
    optim::AdamWOptions o{1e-2, {0.9, 0.9}, 1e-8, 0.1};
    o.amsgrad = optim::AmsGrad::Yes;
    return std::make_unique<optim::AdamW>(p, o);
  }, 6);
}

TEST_CASE("parameter groups on the device: own learning rates, and a group by plain SGD inside Adam") {
  check_optimizer([](std::vector<Tensor> p) {
    auto adam = std::make_unique<optim::Adam>(p, optim::AdamOptions{1e-2});
    std::vector<std::string> names;
    for (size_t i = 0; i < p.size(); ++i) names.push_back("p" + std::to_string(i));
    adam->set_param_groups(optim::ParamGroupsConfig::parse("p1|p3|p4:lr=0.05,weight_decay=0.01,rule=sgd;p5:lr=3e-3"),
                           names);
    return adam;
  }, 4);
}

TEST_CASE("RAdam's PyTorch convention on the device, across its switch (rho_t > 5 from t = 6)") {
  check_optimizer([](std::vector<Tensor> p) {
    optim::RAdamOptions o{1e-2, {0.9, 0.999}, 1e-3, 0.01};
    o.convention = optim::RAdamConvention::PyTorch;
    return std::make_unique<optim::RAdam>(p, o);
  }, 8);
}

TEST_CASE("RAdam on the device, across the switch to rectified steps (rho_t > 4 from t = 5)") {
  check_optimizer([](std::vector<Tensor> p) { return std::make_unique<optim::RAdam>(p, optim::RAdamOptions{1e-2}); }, 8);
  check_optimizer([](std::vector<Tensor> p) {
    return std::make_unique<optim::RAdam>(p, optim::RAdamOptions{1e-2, {0.9, 0.999}, 1e-3, 0.01});
  }, 8);
}

TEST_CASE("an optimizer step over a parameter beyond one grid") {
  // More elements than 65536 blocks of 256 threads: the grid-stride loop takes a second round.
  const Shape big{(int64_t{1} << 24) + 33};
  Tensor cpu = zeros(big, {DType::Float32}), gpu = zeros(big, {DType::Float32, dut()});
  cpu.set_requires_grad(true), gpu.set_requires_grad(true);
  optim::Adam a({cpu}, {1e-2}), b({gpu}, {1e-2});
  const Tensor g = input(big, 40, DType::Float32, -0.1, 0.1);
  for (int64_t t = 1; t <= 2; ++t) {
    set_grad(cpu, g), set_grad(gpu, g);
    a.step(), b.step();
  }
  expect_close(gpu.detach(), cpu.detach(), optim_tol(DType::Float32));
}

namespace {

// Parameters on `device` with gradients set from seeds (the last gets none), for clip_grad_norm.
std::vector<Tensor> with_gradients(Device device, double scale) {
  const std::vector<Spec> shapes{{{0}, DType::Float32},     {{1}, DType::Float64},        {{4097}, DType::Float32},
                                 {{33, 31}, DType::Float64}, {{1 << 20}, DType::Float32}, {{5}, DType::Float64}};
  std::vector<Tensor> params;
  uint64_t seed = 70;
  for (size_t i = 0; i < shapes.size(); ++i) {
    Tensor p = zeros(shapes[i].shape, {shapes[i].dtype, device});
    p.set_requires_grad(true);
    if (i + 1 < shapes.size()) set_grad(p, input(shapes[i].shape, ++seed, shapes[i].dtype, -scale, scale));
    params.push_back(p);
  }
  return params;
}

}  // namespace

TEST_CASE("clip_grad_norm on the device: the global norm, clipping above max_norm only") {
  for (double max_norm : {1e-3, 1e9}) {
    INFO("max_norm " << max_norm);
    const std::vector<Tensor> cpu = with_gradients(Device::cpu(), 1.0), gpu = with_gradients(dut(), 1.0);
    const double expected = optim::clip_grad_norm(cpu, max_norm);
    const double norm = optim::clip_grad_norm(gpu, max_norm);
    CHECK(std::abs(norm - expected) <= 1e-12 * expected);
    for (size_t i = 0; i + 1 < cpu.size(); ++i) {
      INFO("gradient " << i);
      expect_close(gpu[i].grad(), cpu[i].grad(), optim_tol(cpu[i].dtype()));
    }
    CHECK_FALSE(gpu.back().grad().defined());
  }
}

TEST_CASE("clip_grad_norm on the device: the same norm on every run; non-finite gradients left alone") {
  const std::vector<Tensor> gpu = with_gradients(dut(), 1.0);
  const double first = optim::clip_grad_norm(gpu, 1e9);
  CHECK(optim::clip_grad_norm(gpu, 1e9) == first);  // bit for bit: a fixed order of sums

  for (double bad : {std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    INFO("a gradient holds " << bad);
    Tensor w = zeros({3}, {DType::Float32, dut()});
    w.set_requires_grad(true);
    const Tensor g = to(from_vector<double>({1.0, bad, 2.0}, {3}), DType::Float32);
    set_grad(w, g);
    const double norm = optim::clip_grad_norm({w}, 1.0);
    CHECK((std::isnan(bad) ? std::isnan(norm) : std::isinf(norm)));
    expect_close(w.grad(), g, kExact);  // untouched
  }
}
