// Optimizers and gradient clipping. Every reference is written here, in scalar double arithmetic,
// from the papers' formulas; the gradients are set exactly through the loss Σ w ⊙ g (dL/dw = g).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>

#include "optim/apply_rule.h"
#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

Tensor parameter(const std::vector<double>& values, const Shape& shape) {
  Tensor p = from_vector<double>(values, shape);
  p.set_requires_grad(true);
  return p;
}

// Sets w.grad() to exactly g.
void set_grad(const Tensor& w, const std::vector<double>& g) {
  w.zero_grad();
  sum(w * from_vector<double>(g, w.shape(), w.device())).backward();
}

// A fixed, irregular gradient for element i of a parameter at step t (magnitudes ~0.01–0.1, so that
// with ε = 1e-3 the placement of ε changes the result far beyond the tolerance).
double fixed_grad(int64_t t, size_t i) {
  const double step = static_cast<double>(t), index = static_cast<double>(i);
  return 0.05 * std::sin(1.3 * step + 0.7 * index) + 0.01 * static_cast<double>(i % 3);
}

std::vector<double> grads_at(int64_t t, size_t n, size_t salt = 0) {
  std::vector<double> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = fixed_grad(t, i + salt);
  return g;
}

const std::vector<double> kStart0 = {0.5, -1.0, 2.0, 0.25, -0.75, 1.5};  // parameter 0, shape (2, 3)
const std::vector<double> kStart1 = {1.0, -2.0, 0.1, 3.0};               // parameter 1, shape (4,)

// The state of one element under a reference rule.
struct Element {
  double theta, m = 0, v = 0, v_max = 0;
};

// Runs `steps` steps of `optimizer` over two parameters and the scalar reference `rule` (applied to
// each element with its step number t) side by side, comparing after every step to 1e-12.
using ReferenceRule = std::function<void(Element&, double g, int64_t t)>;

void compare_with_reference(optim::Optimizer& optimizer, const ReferenceRule& rule, int64_t steps) {
  const std::vector<Tensor>& params = optimizer.parameters();
  std::vector<std::vector<Element>> ref(2);
  for (double x : kStart0) ref[0].push_back({x});
  for (double x : kStart1) ref[1].push_back({x});
  for (int64_t t = 1; t <= steps; ++t) {
    for (size_t p = 0; p < 2; ++p) {
      const std::vector<double> g = grads_at(t, ref[p].size(), 5 * p);
      set_grad(params[p], g);
      for (size_t i = 0; i < g.size(); ++i) rule(ref[p][i], g[i], t);
    }
    optimizer.step();
    for (size_t p = 0; p < 2; ++p) {
      std::vector<double> expected;
      for (const Element& e : ref[p]) expected.push_back(e.theta);
      INFO("step " << t << ", parameter " << p);
      check_close(params[p], from_vector<double>(expected, params[p].shape()), 1e-12, 1e-12);
    }
  }
}

std::vector<Tensor> two_parameters() {
  return {parameter(kStart0, {2, 3}), parameter(kStart1, {4})};
}

}  // namespace

TEST_CASE("SGD without momentum, with momentum, and with Nesterov momentum follow their formulas") {
  for (const double momentum : {0.0, 0.9}) {
    for (const optim::Nesterov nesterov : {optim::Nesterov::No, optim::Nesterov::Yes}) {
      if (momentum == 0 && nesterov == optim::Nesterov::Yes) continue;
      const double lr = 0.1, wd = 0.01, mu = momentum;
      const bool nag = nesterov == optim::Nesterov::Yes;
      INFO("momentum " << momentum << ", nesterov " << nag);
      optim::SGD sgd(two_parameters(), {lr, momentum, wd, nesterov});
      // g ← g + λθ;  b ← μb + g (b₀ = 0);  θ ← θ − lr·(g + μb) (Nesterov) or θ − lr·b
      compare_with_reference(sgd, [&](Element& e, double g, int64_t) {
        g += wd * e.theta;
        e.m = mu * e.m + g;
        e.theta -= lr * (nag ? g + mu * e.m : e.m);
      }, 5);
    }
  }
}

TEST_CASE("Adam follows Kingma & Ba Algorithm 1, with L2 weight decay added to the gradient") {
  for (const double wd : {0.0, 0.1}) {
    const double lr = 0.01, b1 = 0.9, b2 = 0.999, eps = 1e-3;
    optim::Adam adam(two_parameters(), {lr, {b1, b2}, eps, wd});
    compare_with_reference(adam, [&](Element& e, double g, int64_t t) {
      g += wd * e.theta;
      e.m = b1 * e.m + (1 - b1) * g;
      e.v = b2 * e.v + (1 - b2) * g * g;
      const double m_hat = e.m / (1 - std::pow(b1, double(t)));
      const double v_hat = e.v / (1 - std::pow(b2, double(t)));
      e.theta -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }, 6);
  }
}

TEST_CASE("AdamW decays the weights directly: θ ← θ − lr·λ·θ − lr·m̂/(√v̂ + ε)") {
  const double lr = 0.02, b1 = 0.8, b2 = 0.99, eps = 1e-3, wd = 0.5;
  optim::AdamW adamw(two_parameters(), {lr, {b1, b2}, eps, wd});
  compare_with_reference(adamw, [&](Element& e, double g, int64_t t) {
    e.m = b1 * e.m + (1 - b1) * g;
    e.v = b2 * e.v + (1 - b2) * g * g;
    const double m_hat = e.m / (1 - std::pow(b1, double(t)));
    const double v_hat = e.v / (1 - std::pow(b2, double(t)));
    e.theta = e.theta - lr * wd * e.theta - lr * m_hat / (std::sqrt(v_hat) + eps);
  }, 6);
}

TEST_CASE("RAdam follows Liu et al. Algorithm 2 across the switch at rho_t > 4") {
  const double b2 = 0.999;
  // ρ_∞ = 2/(1 − β₂) − 1;  ρ_t = ρ_∞ − 2tβ₂ᵗ/(1 − β₂ᵗ)
  const double rho_inf = 2 / (1 - b2) - 1;
  const auto rho = [&](int64_t t) {
    const double b2_t = std::pow(b2, double(t));
    return rho_inf - 2 * double(t) * b2_t / (1 - b2_t);
  };
  // With β₂ = 0.999 the first four steps are un-rectified, the fifth is the first rectified one.
  for (int64_t t = 1; t <= 4; ++t) CHECK(rho(t) <= 4);
  CHECK(rho(5) > 4);
  CHECK(rho(5) < 5);  // where PyTorch's threshold (ρ_t > 5) would still be un-rectified
  for (int64_t t = 1; t <= 8; ++t) CHECK(optim::radam_rho(t, b2) == doctest::Approx(rho(t)).epsilon(1e-13));

  for (const double wd : {0.0, 0.05}) {
    const double lr = 0.01, b1 = 0.9, eps = 1e-3;
    optim::RAdam radam(two_parameters(), {lr, {b1, b2}, eps, wd});
    int64_t rectified_steps = 0;
    compare_with_reference(radam, [&](Element& e, double g, int64_t t) {
      g += wd * e.theta;
      e.v = b2 * e.v + (1 - b2) * g * g;
      e.m = b1 * e.m + (1 - b1) * g;
      const double m_hat = e.m / (1 - std::pow(b1, double(t)));
      const double rho_t = rho(t);
      if (rho_t > 4) {
        const double r = std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
        const double v_hat = e.v / (1 - std::pow(b2, double(t)));
        e.theta -= lr * r * m_hat / (std::sqrt(v_hat) + eps);
        ++rectified_steps;
      } else {
        e.theta -= lr * m_hat;
      }
    }, 8);
    CHECK(rectified_steps == 4 * 10);  // steps 5..8, ten elements
  }
  check_error([] { optim::radam_rectification(4, 0.999); }, {"radam_rectification", "rho_t > 4"});
}

TEST_CASE("RAdam's two conventions on hand-computed steps: the paper's (ρ_t > 4) and PyTorch's (ρ_t > 5)") {
  // One parameter θ₀ = 0 with the constant gradient g = 1, lr = 0.1, β₂ = 0.9, ε = 0.1 (β₁ = 0.5 does
  // not matter: with a constant g, m̂ = m / (1 − β₁ᵗ) = g and v̂ = v / (1 − β₂ᵗ) = g² at every step).
  //   ρ_∞ = 2/(1 − 0.9) − 1 = 19;  ρ_t = 19 − 2t·0.9ᵗ/(1 − 0.9ᵗ):
  //   ρ_1..ρ_4 = 1, 1.947, 2.860, 3.737 (≤ 4: both take θ ← θ − lr·m̂ = θ − 0.1, so θ_4 = −0.4);
  //   ρ_5 = 19 − 10·0.59049/0.40951 = 4.58057;  ρ_6 = 19 − 12·0.531441/0.468559 = 5.38956.
  //   r_t = √((ρ_t − 4)(ρ_t − 2)·19 / (15·17·ρ_t)):  r_5 = √(0.58057·2.58057·19 / (255·4.58057)) = 0.156111,
  //                                                  r_6 = √(1.38956·3.38956·19 / (255·5.38956)) = 0.255177.
  // Paper: step 5 is rectified (4.58 > 4): θ_5 = −0.4 − 0.1·r_5·1/(√1 + 0.1) = −0.4 − 0.0141919 = −0.4141919;
  //        θ_6 = θ_5 − 0.1·r_6/1.1 = −0.4141919 − 0.0231979 = −0.4373898.
  // PyTorch: step 5 is not (4.58 ≤ 5): θ_5 = −0.5; step 6 with √(1 − 0.9⁶) = 0.684514 and √v = 0.684514:
  //        θ_6 = −0.5 − 0.1·r_6·0.684514/(0.684514 + 0.1) = −0.5 − 0.0222650 = −0.5222650.
  const std::vector<double> paper = {-0.1, -0.2, -0.3, -0.4, -0.4141919, -0.4373898};
  const std::vector<double> pytorch = {-0.1, -0.2, -0.3, -0.4, -0.5, -0.5222650};
  for (const auto convention : {optim::RAdamConvention::Paper, optim::RAdamConvention::PyTorch}) {
    const bool is_paper = convention == optim::RAdamConvention::Paper;
    INFO((is_paper ? "paper" : "pytorch"));
    optim::RAdamOptions options{0.1, {0.5, 0.9}, 0.1, 0.0};
    options.convention = convention;
    const Tensor w = parameter({0.0}, {1});
    optim::RAdam radam({w}, options);
    for (size_t t = 0; t < 6; ++t) {
      set_grad(w, {1.0});
      radam.step();
      INFO("step " << t + 1);
      CHECK(w.item<double>() == doctest::Approx((is_paper ? paper : pytorch)[t]).epsilon(1e-6));
    }
  }
}

TEST_CASE("RAdam's PyTorch convention follows torch.optim.RAdam's formula across its switch at rho_t > 5") {
  const double b2 = 0.999, rho_inf = 2 / (1 - b2) - 1;
  for (const double wd : {0.0, 0.05}) {
    const double lr = 0.01, b1 = 0.9, eps = 1e-3;
    optim::RAdamOptions options{lr, {b1, b2}, eps, wd};
    options.convention = optim::RAdamConvention::PyTorch;
    optim::RAdam radam(two_parameters(), options);
    int64_t rectified_steps = 0;
    // torch.optim.RAdam: θ ← θ − lr·m̂·r_t·√(1 − β₂ᵗ)/(√v + ε) where ρ_t > 5, else θ ← θ − lr·m̂.
    compare_with_reference(radam, [&](Element& e, double g, int64_t t) {
      g += wd * e.theta;
      e.v = b2 * e.v + (1 - b2) * g * g;
      e.m = b1 * e.m + (1 - b1) * g;
      const double bias2 = 1 - std::pow(b2, double(t));
      const double m_hat = e.m / (1 - std::pow(b1, double(t)));
      const double rho_t = rho_inf - 2 * double(t) * std::pow(b2, double(t)) / bias2;
      if (rho_t > 5) {
        const double r = std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
        e.theta -= lr * m_hat * r * std::sqrt(bias2) / (std::sqrt(e.v) + eps);
        ++rectified_steps;
      } else {
        e.theta -= lr * m_hat;
      }
    }, 8);
    CHECK(rectified_steps == 3 * 10);  // steps 6..8 (ρ_5 ≈ 4.996), ten elements
  }
}

TEST_CASE("Adam and AdamW with amsgrad divide by the running maximum of v") {
  for (const bool decoupled : {false, true}) {
    INFO((decoupled ? "AdamW" : "Adam"));
    const double lr = 0.01, b1 = 0.9, b2 = 0.9, eps = 1e-3, wd = 0.1;
    std::unique_ptr<optim::Optimizer> opt;
    if (decoupled) {
      optim::AdamWOptions o{lr, {b1, b2}, eps, wd};
      o.amsgrad = optim::AmsGrad::Yes;
      opt = std::make_unique<optim::AdamW>(two_parameters(), o);
    } else {
      optim::AdamOptions o{lr, {b1, b2}, eps, wd};
      o.amsgrad = optim::AmsGrad::Yes;
      opt = std::make_unique<optim::Adam>(two_parameters(), o);
    }
    int64_t max_held = 0;  // updates where v_max > v, i.e. where AMSGrad differs from Adam
    compare_with_reference(*opt, [&](Element& e, double g, int64_t t) {
      if (!decoupled) g += wd * e.theta;
      e.m = b1 * e.m + (1 - b1) * g;
      e.v = b2 * e.v + (1 - b2) * g * g;
      if (e.v_max > e.v) ++max_held;
      e.v_max = std::max(e.v_max, e.v);
      const double m_hat = e.m / (1 - std::pow(b1, double(t)));
      const double v_hat = e.v_max / (1 - std::pow(b2, double(t)));
      e.theta = e.theta - (decoupled ? lr * wd * e.theta : 0.0) - lr * m_hat / (std::sqrt(v_hat) + eps);
    }, 12);
    CHECK(max_held > 10);
    CHECK(opt->state_dict().buffers.count("max_exp_avg_sq.1") == 1);
  }
}

TEST_CASE("amsgrad's maximum is saved and restored: a resumed run continues bit for bit from a file") {
  TempDir dir;
  const std::string path = dir.file("amsgrad.ckpt");
  optim::AdamOptions options{0.01, {0.9, 0.9}, 1e-3, 0.0};
  options.amsgrad = optim::AmsGrad::Yes;
  std::vector<Tensor> params = two_parameters();
  optim::Adam adam(params, options);
  for (int64_t t = 1; t <= 5; ++t) {
    set_grad(params[0], grads_at(t, 6));
    set_grad(params[1], grads_at(t, 4, 5));
    adam.step();
  }
  {
    Checkpoint c;
    add_optimizer_state(c, "optimizer", adam.state_dict());
    save_checkpoint(path, c);
  }
  const optim::OptimizerState saved = optimizer_state(load_checkpoint(path), "optimizer");
  CHECK(saved.buffers.size() == 6);  // exp_avg, exp_avg_sq, max_exp_avg_sq for each of 2 parameters
  std::vector<Tensor> copies = {clone(params[0].detach()), clone(params[1].detach())};
  for (Tensor& p : copies) p.set_requires_grad(true);
  optim::Adam resumed(copies, options);
  resumed.load_state_dict(saved);
  for (int64_t t = 6; t <= 9; ++t) {
    for (const auto& [ps, opt] : {std::pair{&params, &adam}, std::pair{&copies, &resumed}}) {
      set_grad((*ps)[0], grads_at(t, 6));
      set_grad((*ps)[1], grads_at(t, 4, 5));
      opt->step();
    }
    INFO("step " << t);
    for (size_t i = 0; i < 2; ++i) CHECK(copies[i].to_vector<double>() == params[i].to_vector<double>());
  }
  // Without the maximum the state does not fit, and an Adam without amsgrad refuses it.
  optim::Adam plain(two_parameters(), optim::AdamOptions{0.01, {0.9, 0.9}, 1e-3, 0.0});
  check_error([&] { plain.load_state_dict(saved); }, {"Adam", "the state has 6 buffers, expected 4"});
}

TEST_CASE("a parameter without a gradient is skipped and keeps its own step count") {
  Tensor a = parameter({1.0, 2.0}, {2}), b = parameter({-1.0}, {1});
  const double lr = 0.1, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  optim::Adam adam({a, b}, {lr, {b1, b2}, eps, 0.0});
  set_grad(a, {0.5, -0.5});
  adam.step();  // b has no gradient yet
  CHECK(adam.steps(0) == 1);
  CHECK(adam.steps(1) == 0);
  check_close(b, from_vector<double>({-1.0}, {1}), 0, 0);
  CHECK(adam.state_dict().buffers.size() == 2);  // a's moments only

  adam.zero_grad();
  CHECK_FALSE(a.grad().defined());
  set_grad(b, {0.25});
  adam.step();  // now only b moves, with t = 1: θ ← θ − lr·g/(|g| + ε)
  CHECK(adam.steps(0) == 1);
  CHECK(adam.steps(1) == 1);
  check_close(b, from_vector<double>({-1.0 - lr * 0.25 / (0.25 + eps)}, {1}), 1e-14, 1e-14);
}

TEST_CASE("a step writes in place, is not recorded, and bumps the parameter's version") {
  Tensor w = parameter({1.0, 2.0, 3.0}, {3});
  optim::SGD sgd({w}, {0.5});
  set_grad(w, {1.0, 1.0, 1.0});
  const Tensor y = sum(w * w);  // mul saves w for backward
  const size_t tape_size = Tape::current().size();
  const uint64_t version = w.storage().version();
  const void* data = w.raw_data();
  sgd.step();
  CHECK(Tape::current().size() == tape_size);
  CHECK(w.storage().version() > version);
  CHECK(w.raw_data() == data);
  CHECK(w.is_leaf());
  CHECK(w.requires_grad());
  check_close(w, from_vector<double>({0.5, 1.5, 2.5}, {3}), 0, 0);
  // The graph saved w before the step: backward through it is refused rather than wrong.
  check_error([&] { y.backward(); }, {"modified in place"});
  Tape::current().clear();
}

TEST_CASE("float32 parameters are updated in float32") {
  Tensor w = from_vector<float>({1.0f, -2.0f}, {2});
  w.set_requires_grad(true);
  optim::Adam adam({w}, {0.1});
  w.zero_grad();
  sum(w * from_vector<float>({0.5f, -0.25f}, {2})).backward();
  adam.step();
  // First Adam step: θ − lr·g/(|g| + ε) ≈ θ − lr·sign(g)
  const std::vector<float> got = w.to_vector<float>();
  CHECK(got[0] == doctest::Approx(0.9f).epsilon(1e-6));
  CHECK(got[1] == doctest::Approx(-1.9f).epsilon(1e-6));
}

TEST_CASE("a parameter large enough to be split across threads matches the reference everywhere") {
  const int64_t n = 40000;  // above the loop's threshold for threads (32768)
  std::vector<double> start(static_cast<size_t>(n));
  for (size_t i = 0; i < start.size(); ++i) start[i] = std::cos(0.01 * static_cast<double>(i));
  Tensor w = parameter(start, {n});
  const double lr = 0.01, b1 = 0.9, b2 = 0.99, eps = 1e-3, wd = 0.1;
  optim::AdamW adamw({w}, {lr, {b1, b2}, eps, wd});
  std::vector<Element> ref;
  for (double x : start) ref.push_back({x});
  for (int64_t t = 1; t <= 3; ++t) {
    const std::vector<double> g = grads_at(t, ref.size());
    set_grad(w, g);
    adamw.step();
    for (size_t i = 0; i < ref.size(); ++i) {
      Element& e = ref[i];
      e.m = b1 * e.m + (1 - b1) * g[i];
      e.v = b2 * e.v + (1 - b2) * g[i] * g[i];
      const double m_hat = e.m / (1 - std::pow(b1, double(t))), v_hat = e.v / (1 - std::pow(b2, double(t)));
      e.theta = e.theta - lr * wd * e.theta - lr * m_hat / (std::sqrt(v_hat) + eps);
    }
  }
  const std::vector<double> got = w.to_vector<double>();
  double worst = 0;  // one check for all elements: the largest error relative to 1 + |reference|
  for (size_t i = 0; i < ref.size(); ++i)
    worst = std::max(worst, std::abs(got[i] - ref[i].theta) / (1 + std::abs(ref[i].theta)));
  CHECK(worst <= 1e-12);
}

TEST_CASE("the update rules give the same bits under every CPU capability, float32 and float64") {
  // optim/apply_rule.h compiles each rule for AVX2 and AVX-512 too (its square roots and divisions
  // in vector registers). 40003 elements: split among the threads, with a tail no vector fills.
  const int64_t n = 40003;
  std::vector<double> start(static_cast<size_t>(n));
  for (size_t i = 0; i < start.size(); ++i) start[i] = std::cos(0.01 * static_cast<double>(i));
  std::vector<CpuCapability> capabilities = {CpuCapability::Baseline};
  if (cpu_capability_supported() != CpuCapability::Baseline) capabilities.push_back(CpuCapability::Avx2);
  if (cpu_capability_supported() == CpuCapability::Avx512) capabilities.push_back(CpuCapability::Avx512);
  for (DType dtype : {DType::Float32, DType::Float64}) {
    std::vector<std::vector<double>> results;
    for (CpuCapability capability : capabilities) {
      CpuCapabilityScope scope(capability);
      const Tensor w = to(from_vector<double>(start, {n}), dtype).set_requires_grad(true);
      const Tensor u = to(from_vector<double>(start, {n}), dtype).set_requires_grad(true);
      optim::AdamW adamw({w}, {0.01, {0.9, 0.99}, 1e-3, 0.1});
      optim::RAdam radam({u}, {0.01});
      for (int64_t t = 1; t <= 7; ++t) {  // past RAdam's switch to its rectified step
        const Tensor g = to(from_vector<double>(grads_at(t, start.size()), {n}), dtype);
        w.zero_grad(), u.zero_grad();
        sum(w * g).backward(), sum(u * g).backward();
        adamw.step(), radam.step();
      }
      std::vector<double> both = w.to_vector<double>();
      const std::vector<double> rest = u.to_vector<double>();
      both.insert(both.end(), rest.begin(), rest.end());
      results.push_back(std::move(both));
    }
    for (size_t c = 1; c < results.size(); ++c) {
      INFO(dtype << " " << to_string(capabilities[c]) << " against the baseline");
      CHECK(std::memcmp(results[c].data(), results[0].data(), results[0].size() * sizeof(double)) == 0);
    }
  }
}

TEST_CASE("a step's updates run as one loop: each element once, the queue emptied") {
  // optim/apply_rule.h: CpuUpdates splits every queued update into chunks of 4096 elements.
  const std::vector<int64_t> sizes = {0, 1, 4095, 4096, 4097, 50000};
  std::vector<std::vector<int>> visits;
  for (int64_t n : sizes) visits.emplace_back(static_cast<size_t>(n), 0);
  optim::CpuUpdates updates;
  for (size_t u = 0; u < sizes.size(); ++u)
    updates.add(sizes[u], [&visits, u](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) ++visits[u][static_cast<size_t>(i)];
    });
  updates.run();
  updates.run();  // nothing left to run: a second visit would show
  for (size_t u = 0; u < sizes.size(); ++u) {
    INFO("update " << u << " of " << sizes[u] << " elements");
    CHECK(std::count(visits[u].begin(), visits[u].end(), 1) == sizes[u]);
  }
}

TEST_CASE("one step over many parameters gives each the bits of a step of its own") {
  // The step's updates run as one loop over every parameter's chunks (optim/apply_rule.h); sizes
  // around a chunk's 4096 elements and a total above the 32,768 that start a parallel loop.
  const std::vector<int64_t> sizes = {1, 7, 4096, 4097, 9000, 30000};
  using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  const std::vector<std::pair<const char*, Make>> optimizers = {
      {"Adam", [](std::vector<Tensor> p) { return std::make_unique<optim::Adam>(p, optim::AdamOptions{0.01}); }},
      {"RAdam", [](std::vector<Tensor> p) { return std::make_unique<optim::RAdam>(p, optim::RAdamOptions{0.01}); }},
      {"SGD", [](std::vector<Tensor> p) { return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.01, 0.9}); }}};
  for (const auto& [name, make] : optimizers) {
    INFO(name);
    std::vector<Tensor> together, alone;
    std::vector<std::vector<float>> first;
    for (size_t p = 0; p < sizes.size(); ++p) {
      std::vector<double> start(static_cast<size_t>(sizes[p]));
      for (size_t i = 0; i < start.size(); ++i) start[i] = std::sin(0.1 * static_cast<double>(i + p));
      together.push_back(to(from_vector<double>(start, {sizes[p]}), DType::Float32).set_requires_grad(true));
      alone.push_back(clone(together.back().detach()).set_requires_grad(true));
      first.push_back(together.back().to_vector<float>());
    }
    const auto all = make(together);
    std::vector<std::unique_ptr<optim::Optimizer>> each;
    for (const Tensor& p : alone) each.push_back(make({p}));
    for (int64_t t = 1; t <= 7; ++t) {  // past RAdam's switch to its rectified step
      for (size_t p = 0; p < sizes.size(); ++p) {
        const Tensor g = to(from_vector<double>(grads_at(t, static_cast<size_t>(sizes[p]), p), {sizes[p]}),
                            DType::Float32);
        together[p].zero_grad(), alone[p].zero_grad();
        sum(together[p] * g).backward(), sum(alone[p] * g).backward();
      }
      all->step();
      for (const auto& o : each) o->step();
    }
    for (size_t p = 0; p < sizes.size(); ++p) {
      INFO("parameter " << p << " of " << sizes[p] << " elements");
      const std::vector<float> a = together[p].to_vector<float>(), b = alone[p].to_vector<float>();
      CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
      CHECK(a != first[p]);  // the steps moved it: equal bits from two optimizers that did nothing would pass
    }
  }
}

// ---- state save / restore ----

namespace {

using Factory = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

std::vector<Tensor> copies(const std::vector<Tensor>& params) {
  std::vector<Tensor> out;
  for (const Tensor& p : params) out.push_back(clone(p.detach()).set_requires_grad(true));
  return out;
}

// Step t's gradients; parameter 1 has none on odd steps (so step counts differ between parameters).
void feed(const std::vector<Tensor>& params, int64_t t) {
  for (size_t p = 0; p < params.size(); ++p) {
    params[p].zero_grad();
    if (p == 1 && t % 2 == 1) continue;
    const std::vector<double> g = grads_at(t, static_cast<size_t>(params[p].numel()), 3 * p);
    sum(params[p] * to(from_vector<double>(g, params[p].shape()), params[p].dtype())).backward();
  }
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  const Tensor x = contiguous(a.detach()), y = contiguous(b.detach());
  return x.shape() == y.shape() && x.dtype() == y.dtype() &&
         std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * element_size(x.dtype())) == 0;
}

void check_resume(const Factory& make, DType dtype) {
  const int64_t n = 3, m = 4;
  std::vector<Tensor> params = {to(from_vector<double>(kStart0, {2, 3}), dtype),
                                to(from_vector<double>(kStart1, {4}), dtype)};
  for (Tensor& p : params) p.set_requires_grad(true);
  auto original = make(params);
  for (int64_t t = 1; t <= n; ++t) {
    feed(params, t);
    original->step();
  }
  original->set_lr(original->lr() * 0.5);  // as a schedule would: the state must carry it
  const optim::OptimizerState saved = original->state_dict();
  const std::vector<Tensor> saved_params = copies(params);
  const std::vector<double> saved_moment = saved.buffers.begin()->second.to_vector<double>();
  for (int64_t t = n + 1; t <= n + m; ++t) {
    feed(params, t);
    original->step();
  }
  // The saved state is a copy: the later steps did not change it.
  CHECK(saved.buffers.begin()->second.to_vector<double>() == saved_moment);

  std::vector<Tensor> resumed_params = copies(saved_params);
  auto resumed = make(resumed_params);
  resumed->load_state_dict(saved);
  CHECK(resumed->lr() == original->lr());
  for (int64_t t = n + 1; t <= n + m; ++t) {
    feed(resumed_params, t);
    resumed->step();
  }
  for (size_t p = 0; p < params.size(); ++p) {
    INFO(original->name() << ", parameter " << p << ", " << dtype);
    CHECK(resumed->steps(p) == original->steps(p));
    CHECK(bitwise_equal(resumed_params[p], params[p]));
  }
  const optim::OptimizerState a = original->state_dict(), b = resumed->state_dict();
  CHECK(a.steps == b.steps);
  REQUIRE(a.buffers.size() == b.buffers.size());
  for (const auto& [key, tensor] : a.buffers) CHECK(bitwise_equal(tensor, b.buffers.at(key)));
}

}  // namespace

TEST_CASE("restoring a saved state continues bit for bit") {
  using optim::Nesterov;
  const std::vector<Factory> factories = {
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::SGD>(p, optim::SGDOptions{0.1, 0.9, 0.01, Nesterov::Yes});
      },
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::Adam>(p, optim::AdamOptions{0.01, {0.9, 0.99}, 1e-8, 0.1});
      },
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::AdamW>(p, optim::AdamWOptions{0.01, {0.9, 0.99}, 1e-8, 0.1});
      },
      // β₂ = 0.999: saved after step 3, the resumed run crosses the switch to rectified steps at 5.
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::RAdam>(p, optim::RAdamOptions{0.01, {0.9, 0.999}, 1e-8, 0.0});
      },
  };
  for (const Factory& make : factories) {
    check_resume(make, DType::Float64);
    check_resume(make, DType::Float32);
  }
}

TEST_CASE("a state that does not fit is refused") {
  std::vector<Tensor> params = two_parameters();
  optim::Adam adam(params, {0.01});
  feed(params, 2);
  adam.step();
  const optim::OptimizerState good = adam.state_dict();

  optim::RAdam radam(two_parameters(), {0.01});
  check_error([&] { radam.load_state_dict(good); }, {"RAdam", "cannot load a state saved by Adam"});
  optim::Adam fewer({parameter(kStart1, {4})}, {0.01});
  check_error([&] { fewer.load_state_dict(good); }, {"Adam", "for 2 parameters", "has 1"});
  optim::OptimizerState missing = good;
  missing.buffers.erase("exp_avg_sq.1");
  check_error([&] { adam.load_state_dict(missing); }, {"Adam", "lacks buffer \"exp_avg_sq.1\""});
  optim::OptimizerState wrong_shape = good;
  wrong_shape.buffers["exp_avg.0"] = zeros({6}, {DType::Float64});
  check_error([&] { adam.load_state_dict(wrong_shape); }, {"Adam", "exp_avg.0", "(6,)", "(2, 3)"});
  optim::OptimizerState extra = good;
  extra.buffers["momentum_buffer.0"] = zeros({2, 3}, {DType::Float64});
  check_error([&] { adam.load_state_dict(extra); }, {"Adam", "has 5 buffers, expected 4"});
  // A refused state changed nothing.
  CHECK(adam.steps(0) == 1);
  CHECK(bitwise_equal(adam.state_dict().buffers.at("exp_avg.0"), good.buffers.at("exp_avg.0")));
}

// ---- bad input ----

TEST_CASE("optimizers refuse bad parameters and options, naming themselves") {
  Tensor ints = from_vector<int64_t>({1, 2, 3}, {3});
  check_error([&] { optim::Adam({parameter({1.0}, {1}), ints}); },
              {"Adam", "parameter 1", "shape (3,)", "int64", "float32 or float64"});
  check_error([&] { optim::SGD({zeros({2, 2}, {DType::Float64})}); },
              {"SGD", "parameter 0", "shape (2, 2)", "float64", "does not require grad"});
  Tensor w = parameter({1.0, 2.0}, {2});
  const Tensor computed = w * 2.0;
  check_error([&] { optim::AdamW({w, computed}); }, {"AdamW", "parameter 1", "shape (2,)", "not a leaf"});
  check_error([&] { optim::RAdam({w, w}); }, {"RAdam", "parameter 1", "more than once"});
  Tensor transposed = transpose(zeros({2, 3}, {DType::Float64}), 0, 1);
  transposed.set_requires_grad(true);
  check_error([&] { optim::Adam({transposed}); }, {"Adam", "parameter 0", "not contiguous"});
  check_error([&] { optim::Adam(std::vector<Tensor>{}); }, {"Adam", "empty parameter list"});

  check_error([&] { optim::SGD({w}, {-0.1}); }, {"SGD", "learning rate", "-0.1"});
  check_error([&] { optim::Adam({w}, {-1.0}); }, {"Adam", "learning rate", ">= 0"});
  check_error([&] { optim::Adam({w}, {0.1, {1.0, 0.999}}); }, {"Adam", "beta1", "[0, 1)"});
  check_error([&] { optim::AdamW({w}, {0.1, {0.9, -0.1}}); }, {"AdamW", "beta2", "[0, 1)"});
  check_error([&] { optim::RAdam({w}, {0.1, {0.9, 1.0}}); }, {"RAdam", "beta2", "[0, 1)"});
  check_error([&] { optim::Adam({w}, {0.1, {0.9, 0.999}, 0.0}); }, {"Adam", "eps", "> 0"});
  check_error([&] { optim::AdamW({w}, {0.1, {0.9, 0.999}, -1e-8}); }, {"AdamW", "eps", "> 0"});
  check_error([&] { optim::RAdam({w}, {0.1, {0.9, 0.999}, 0.0}); }, {"RAdam", "eps", "> 0"});
  check_error([&] { optim::Adam({w}, {0.1, {0.9, 0.999}, 1e-8, -0.1}); }, {"Adam", "weight_decay"});
  check_error([&] { optim::SGD({w}, {0.1, 1.0}); }, {"SGD", "momentum", "[0, 1)"});
  check_error([&] { optim::SGD({w}, {0.1, 0.0, 0.0, optim::Nesterov::Yes}); },
              {"SGD", "Nesterov", "momentum > 0"});

  optim::Adam adam({w}, {0.1});
  check_error([&] { adam.set_lr(-1.0); }, {"Adam", "learning rate"});
  check_error([&] { adam.set_lr(std::nan("")); }, {"Adam", "learning rate"});
  CHECK(adam.lr() == 0.1);
}

// ---- clipping ----

TEST_CASE("clip_grad_norm returns the global norm and scales only above max_norm") {
  Tensor a = parameter({1, 2, 3, 4}, {2, 2}), b = parameter({0, 0, 0}, {3}), c = parameter({5}, {1});
  set_grad(a, {1, -2, 2, 0});
  set_grad(b, {0.5, -0.5, 1});
  // c has no gradient and contributes nothing.
  const double norm = std::sqrt(1 + 4 + 4 + 0 + 0.25 + 0.25 + 1);  // √10.5
  const std::vector<Tensor> params = {a, b, c};

  // Below (and at) max_norm nothing changes.
  const uint64_t version = a.grad().storage().version();
  CHECK(optim::clip_grad_norm(params, 10.0) == doctest::Approx(norm).epsilon(1e-15));
  CHECK(optim::clip_grad_norm(params, norm) == doctest::Approx(norm).epsilon(1e-15));
  CHECK(a.grad().storage().version() == version);
  check_close(a.grad(), from_vector<double>({1, -2, 2, 0}, {2, 2}), 0, 0);

  // Above max_norm every gradient is scaled by max_norm / (norm + 1e-6); the norm returned is the
  // one before clipping.
  const double max_norm = 1.5;
  CHECK(optim::clip_grad_norm(params, max_norm) == doctest::Approx(norm).epsilon(1e-15));
  const double scale = max_norm / (norm + 1e-6);
  check_close(a.grad(), from_vector<double>({scale, -2 * scale, 2 * scale, 0}, {2, 2}), 1e-15, 1e-15);
  check_close(b.grad(), from_vector<double>({0.5 * scale, -0.5 * scale, scale}, {3}), 1e-15, 1e-15);
  CHECK_FALSE(c.grad().defined());
  const double clipped = optim::clip_grad_norm(params, 100.0);
  CHECK(clipped < max_norm);
  CHECK(clipped == doctest::Approx(max_norm).epsilon(1e-6));
}

TEST_CASE("clip_grad_norm sums large gradients of both float types") {
  Tensor big = zeros({200, 100}, {DType::Float32}).set_requires_grad(true);  // several chunks
  Tensor small = parameter({3.0}, {1});
  sum(big * ones({200, 100}, {DType::Float32})).backward();  // every gradient element is 1
  set_grad(small, {4.0});
  const double norm = optim::clip_grad_norm({big, small}, 1e9);
  CHECK(norm == doctest::Approx(std::sqrt(20000.0 + 16.0)).epsilon(1e-15));
}

TEST_CASE("clip_grad_norm refuses bad input") {
  Tensor w = parameter({1.0}, {1});
  check_error([&] { optim::clip_grad_norm({w}, 0.0); }, {"clip_grad_norm", "max_norm", "> 0"});
  check_error([&] { optim::clip_grad_norm({w}, -1.0); }, {"clip_grad_norm", "max_norm"});
  check_error([&] { optim::clip_grad_norm({w}, std::nan("")); }, {"clip_grad_norm", "max_norm"});
  check_error([&] { optim::clip_grad_norm({w, w}, 1.0); }, {"clip_grad_norm", "parameter 1", "more than once"});
  check_error([&] { optim::clip_grad_norm({w, Tensor()}, 1.0); }, {"clip_grad_norm", "parameter 1", "undefined"});
}

TEST_CASE("clip_grad_norm leaves non-finite gradients alone and reports the norm") {
  Tensor w = parameter({1.0, 1.0}, {2});
  set_grad(w, {INFINITY, 1.0});
  CHECK(std::isinf(optim::clip_grad_norm({w}, 1.0)));
  CHECK(w.grad().to_vector<double>()[1] == 1.0);
}

// ---- end to end ----

TEST_CASE("Adam with a cosine schedule solves a least-squares problem") {
  // minimise mean((X w − y)²) over w; the minimiser solves the normal equations XᵀX w = Xᵀy.
  const int64_t n = 32, d = 3;
  const Tensor x = uniform({n, d}, 11);
  const Tensor y = matmul(x, from_vector<double>({1.5, -2.0, 0.5}, {d, 1})) + uniform({n, 1}, 12, -0.1, 0.1);

  // The closed form, by Gaussian elimination on [XᵀX | Xᵀy] in double.
  const std::vector<double> xs = x.to_vector<double>(), ys = y.to_vector<double>();
  double a[3][4] = {};
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j < d; ++j)
      for (int64_t k = 0; k < n; ++k) a[i][j] += xs[k * d + i] * xs[k * d + j];
    for (int64_t k = 0; k < n; ++k) a[i][3] += xs[k * d + i] * ys[k];
  }
  for (int64_t i = 0; i < d; ++i)
    for (int64_t r = 0; r < d; ++r) {
      if (r == i) continue;
      const double f = a[r][i] / a[i][i];
      for (int64_t c = 0; c <= d; ++c) a[r][c] -= f * a[i][c];
    }
  const std::vector<double> solution = {a[0][3] / a[0][0], a[1][3] / a[1][1], a[2][3] / a[2][2]};

  Tensor w = zeros({d, 1}, {DType::Float64});
  w.set_requires_grad(true);
  optim::Adam adam({w}, {0.05});
  const int64_t steps = 1500;
  optim::CosineSchedule schedule(adam, steps, 0.0, 50);
  double first = 0, last = 0;
  for (int64_t t = 1; t <= steps; ++t) {
    adam.zero_grad();
    const Tensor residual = matmul(x, w) - y;
    const Tensor loss = mean(residual * residual);
    if (t == 1) first = loss.item<double>();
    last = loss.item<double>();
    loss.backward();
    adam.step();
    schedule.step();
  }
  CHECK(last < first);
  check_close(w, from_vector<double>(solution, {d, 1}), 1e-10, 0);
}
