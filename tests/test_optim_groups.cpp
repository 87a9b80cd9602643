// Parameter groups (optim/param_groups.h): their text, the optimizers' per-group learning rate and
// weight decay, schedules over groups, per-group clipping, their checkpoint records, and the errors of
// --param-groups. Every expected number is written out by hand from the update formulas.
#include <cmath>
#include <string>
#include <vector>

#include "tests/testing.h"
#include "train/trainer.h"

using namespace tapestry;
using namespace tapestry::testing;
using optim::ClipPolicy;
using optim::GroupRule;
using optim::ParamGroupsConfig;

namespace {

// Float64 parameters named as a model's would be, with one value each unless given more.
struct Named {
  std::vector<std::string> names;
  std::vector<Tensor> params;

  Named(std::vector<std::string> n, const std::vector<std::vector<double>>& values) : names(std::move(n)) {
    for (const auto& v : values) {
      Tensor p = from_vector<double>(v, {int64_t(v.size())});
      p.set_requires_grad(true);
      params.push_back(p);
    }
  }
};

// Sets p.grad() to exactly g (the loss Σ p ⊙ g has dL/dp = g).
void set_grad(const Tensor& p, const std::vector<double>& g) {
  p.zero_grad();
  sum(p * from_vector<double>(g, p.shape())).backward();
}

void set_grads(const Named& n, const std::vector<std::vector<double>>& grads) {
  for (size_t i = 0; i < grads.size(); ++i) set_grad(n.params[i], grads[i]);
}

double value(const Tensor& p, size_t i = 0) { return p.to_vector<double>()[i]; }

// One step of `optimizer` with `grads`; then each parameter's value against `expected`, to a relative `eps`.
void step_and_check(optim::Optimizer& optimizer, const Named& n, const std::vector<std::vector<double>>& grads,
                    const std::vector<double>& expected, double eps = 1e-14) {
  set_grads(n, grads);
  optimizer.step();
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(n.names[i]);
    CHECK(value(n.params[i]) == doctest::Approx(expected[i]).epsilon(eps));
  }
}

// Three parameters in three groups: "enc.w" in group 1 (lr 0.1, weight decay 0.5), "dec.w" in
// group 2 (lr 0.2, weight decay 0), "dec.bias" in the default group (the optimizer's own).
const char* kTwoGroups = "enc.*:lr=0.1,weight_decay=0.5;dec.w:lr=0.2,weight_decay=0";

Named three_parameters() { return Named({"enc.w", "dec.w", "dec.bias"}, {{2.0}, {-1.0}, {4.0}}); }

// The same gradients at every run of a test: step 1 and step 2.
const std::vector<std::vector<double>> kGrads1 = {{1.0}, {0.5}, {2.0}}, kGrads2 = {{-0.5}, {0.25}, {1.0}};

}  // namespace

TEST_CASE("param groups: the text parses, prints and parses back to itself") {
  const ParamGroupsConfig c = ParamGroupsConfig::parse("*.w_c|*.centroids:lr=1e-3,clip=1;*.bias|*norm*:weight_decay=0");
  REQUIRE(c.groups.size() == 2);
  CHECK(c.groups[0].patterns == std::vector<std::string>{"*.w_c", "*.centroids"});
  CHECK(*c.groups[0].lr == 0.001);
  CHECK(!c.groups[0].weight_decay);
  CHECK(c.groups[0].clip.policy == ClipPolicy::Own);
  CHECK(c.groups[0].clip.max_norm == 1.0);
  CHECK(c.groups[1].patterns == std::vector<std::string>{"*.bias", "*norm*"});
  CHECK(!c.groups[1].lr);
  CHECK(*c.groups[1].weight_decay == 0.0);
  CHECK(c.groups[1].clip.policy == ClipPolicy::Global);
  CHECK(c.to_string() == "*.w_c|*.centroids:lr=0.001,clip=1;*.bias|*norm*:weight_decay=0");
  CHECK(ParamGroupsConfig::parse(c.to_string()) == c);

  // clip=global is the default and is not printed; clip=none is; keys print as lr, weight_decay, clip.
  CHECK(ParamGroupsConfig::parse("a:clip=global").to_string() == "a");
  CHECK(ParamGroupsConfig::parse("a:clip=none,weight_decay=2e-4,lr=0.25").to_string() ==
        "a:lr=0.25,weight_decay=0.0002,clip=none");
  CHECK(ParamGroupsConfig::parse("a:clip=none").groups[0].clip.policy == ClipPolicy::None);
  CHECK(ParamGroupsConfig::parse("a:clip=0.1").to_string() == "a:clip=0.1");
  CHECK(ParamGroupsConfig::parse("a:rule=sgd,clip=none").to_string() == "a:clip=none,rule=sgd");
  CHECK(ParamGroupsConfig::parse("a:rule=sgd").groups[0].rule == GroupRule::Sgd);
  CHECK(ParamGroupsConfig::parse("a:rule=optimizer").to_string() == "a");  // the default, not printed
  CHECK(ParamGroupsConfig::parse("a:lr=0.1") == ParamGroupsConfig::parse("a:lr=1e-1"));
  CHECK(!(ParamGroupsConfig::parse("a:lr=0.1") == ParamGroupsConfig::parse("a")));

  // The empty text: no groups.
  CHECK(ParamGroupsConfig::parse("").empty());
  CHECK(ParamGroupsConfig::parse("").to_string().empty());
}

TEST_CASE("param groups: patterns match whole names, '*' any run of characters, '?' one") {
  CHECK(optim::glob_match("*.w_c", "encoder.layers.0.w_c"));
  CHECK(optim::glob_match("*", "anything.at.all"));
  CHECK(optim::glob_match("*norm*", "encoder.layers.1.norm1.weight"));
  CHECK(optim::glob_match("layers.?.bias", "layers.3.bias"));
  CHECK(optim::glob_match("a*b*c", "aXbYbZc"));
  CHECK(optim::glob_match("a**", "a"));
  CHECK(!optim::glob_match("*.w_c", "encoder.layers.0.w_cx"));  // the whole name
  CHECK(!optim::glob_match("w_c", "encoder.w_c"));
  CHECK(!optim::glob_match("layers.?.bias", "layers.12.bias"));
  CHECK(!optim::glob_match("a*b*c", "aXbYcZ"));

  // Each parameter's group: 0 for the default, k for the k-th group written.
  const ParamGroupsConfig c = ParamGroupsConfig::parse("*.w_c|*.centroids:lr=1e-3;*.bias:weight_decay=0");
  CHECK(c.assign({"enc.0.w_c", "enc.0.w_q", "enc.0.bias", "enc.centroids", "head.weight"}) ==
        std::vector<size_t>{1, 0, 2, 1, 0});
}

TEST_CASE("param groups: SGD updates each group with its own lr and weight decay") {
  // SGD with momentum μ = 0.9, lr 0.01 and weight decay 0.1 for the default group:
  //   g ← g + λθ;  b ← μb + g;  θ ← θ − lr·b
  Named n = three_parameters();
  optim::SGD sgd(n.params, {/*lr=*/0.01, /*momentum=*/0.9, /*weight_decay=*/0.1});
  sgd.set_param_groups(ParamGroupsConfig::parse(kTwoGroups), n.names);
  REQUIRE(sgd.param_groups().size() == 3);
  CHECK(sgd.param_groups()[0].params == std::vector<size_t>{2});
  CHECK(sgd.param_groups()[1].params == std::vector<size_t>{0});
  CHECK(sgd.param_groups()[2].params == std::vector<size_t>{1});
  CHECK(sgd.param_groups()[0].lr == 0.01);
  CHECK(sgd.param_groups()[0].weight_decay == 0.1);
  CHECK(sgd.param_groups()[1].label == "enc.*:lr=0.1,weight_decay=0.5");

  // enc.w (lr 0.1, λ 0.5):    g = 1 + 0.5·2 = 2;       b = 2;     θ = 2 − 0.1·2 = 1.8
  // dec.w (lr 0.2, λ 0):      g = 0.5;                 b = 0.5;   θ = −1 − 0.2·0.5 = −1.1
  // dec.bias (lr 0.01, λ 0.1): g = 2 + 0.1·4 = 2.4;    b = 2.4;   θ = 4 − 0.01·2.4 = 3.976
  step_and_check(sgd, n, kGrads1, {1.8, -1.1, 3.976});
  // enc.w:    g = −0.5 + 0.5·1.8 = 0.4;       b = 0.9·2 + 0.4 = 2.2;          θ = 1.8 − 0.1·2.2 = 1.58
  // dec.w:    g = 0.25;                       b = 0.9·0.5 + 0.25 = 0.7;       θ = −1.1 − 0.2·0.7 = −1.24
  // dec.bias: g = 1 + 0.1·3.976 = 1.3976;     b = 0.9·2.4 + 1.3976 = 3.5576;  θ = 3.976 − 0.035576 = 3.940424
  step_and_check(sgd, n, kGrads2, {1.58, -1.24, 3.940424});
}

TEST_CASE("param groups: Adam and AdamW update each group with its own lr and weight decay") {
  // Adam, β = (0.9, 0.999), ε = 1e-8, lr 0.001 and no weight decay for the default group:
  //   g ← g + λθ;  m ← 0.9m + 0.1g;  v ← 0.999v + 0.001g²;  θ ← θ − lr·(m/(1 − 0.9ᵗ)) / (√(v/(1 − 0.999ᵗ)) + ε)
  Named n = three_parameters();
  optim::Adam adam(n.params, {/*lr=*/0.001});
  adam.set_param_groups(ParamGroupsConfig::parse(kTwoGroups), n.names);
  // Step 1: m̂ = g, v̂ = g², so θ ← θ − lr·g/(|g| + ε).
  // enc.w:    g = 1 + 0.5·2 = 2;  θ = 2 − 0.1·2/(2 + 1e-8) = 1.9000000005
  // dec.w:    g = 0.5;            θ = −1 − 0.2·0.5/(0.5 + 1e-8) = −1.199999996
  // dec.bias: g = 2;              θ = 4 − 0.001·2/(2 + 1e-8) = 3.999000000005
  step_and_check(adam, n, kGrads1, {1.9000000005, -1.199999996, 3.999000000005});
  // Step 2. enc.w: g = −0.5 + 0.5·1.9000000005 = 0.45000000025;  m = 0.09·2 + 0.1·g = 0.225000000025;
  //   v = 0.999·0.001·4 + 0.001·g² = 0.004198500000225;  m̂ = m/0.19 = 1.1842105264473686;
  //   v̂ = v/0.001999 = 2.1003001501876226;  θ = 1.9000000005 − 0.1·m̂/(√v̂ + ε) = 1.818287550449552
  // dec.w: g = 0.25; m = 0.045 + 0.025 = 0.07; v = 0.999·0.00025 + 0.0000625 = 0.00031225;
  //   θ = −1.199999996 − 0.2·(0.07/0.19)/(√(0.00031225/0.001999) + ε) = −1.3864359190450752
  // dec.bias: g = 1; m = 0.18 + 0.1 = 0.28; v = 0.003996 + 0.001 = 0.004996;
  //   θ = 3.999000000005 − 0.001·(0.28/0.19)/(√(0.004996/0.001999) + ε) = 3.998067820372085
  step_and_check(adam, n, kGrads2, {1.818287550449552, -1.3864359190450752, 3.998067820372085}, 1e-13);

  // AdamW: the group's weight decay is the decoupled one, θ ← θ·(1 − lr·λ) − lr·m̂/(√v̂ + ε).
  Named w = three_parameters();
  optim::AdamW adamw(w.params, {/*lr=*/0.001, {0.9, 0.999}, 1e-8, /*weight_decay=*/0.01});
  adamw.set_param_groups(ParamGroupsConfig::parse("enc.*:lr=0.1,weight_decay=0.5"), w.names);
  // enc.w (group 1, no L2: g = 1): θ = 2·(1 − 0.1·0.5) − 0.1·1/(1 + 1e-8) = 1.800000001
  // dec.w (default, λ 0.01):       θ = −1·(1 − 0.001·0.01) − 0.001·0.5/(0.5 + 1e-8) = −1.00098999998
  // dec.bias (default):            θ = 4·(1 − 0.001·0.01) − 0.001·2/(2 + 1e-8) = 3.9989600000050003
  step_and_check(adamw, w, kGrads1, {1.800000001, -1.00098999998, 3.9989600000050003});
}

TEST_CASE("param groups: a rule=sgd group is updated by plain SGD inside Adam, and its state survives a reload") {
  // Adam (lr 0.001) for the default group; enc.w by plain SGD at lr 0.1 with L2 weight decay 0.5:
  //   θ ← θ − lr·(g + λθ), as a torch.optim.SGD over that parameter alone would do.
  Named n = three_parameters();
  optim::Adam adam(n.params, {/*lr=*/0.001});
  adam.set_param_groups(ParamGroupsConfig::parse("enc.*:lr=0.1,weight_decay=0.5,rule=sgd"), n.names);
  REQUIRE(adam.param_groups().size() == 2);
  CHECK(adam.param_groups()[1].rule == GroupRule::Sgd);
  // Step 1. enc.w: θ = 2 − 0.1·(1 + 0.5·2) = 1.8. The Adam parameters: θ ← θ − lr·g/(|g| + ε),
  //   dec.w = −1 − 0.001·0.5/(0.5 + 1e-8) = −1.00099999998, dec.bias = 4 − 0.001·2/(2 + 1e-8) = 3.999000000005.
  step_and_check(adam, n, kGrads1, {1.8, -1.00099999998, 3.999000000005});
  // Step 2. enc.w: θ = 1.8 − 0.1·(−0.5 + 0.5·1.8) = 1.76: no momentum, whatever Adam's moments
  // would say. dec.w: m = 0.07, v = 0.00031225, θ = −1.00099999998 − 0.001·(m/0.19)/(√(v/0.001999) + ε)
  // = −1.0019321795952254; dec.bias as in the Adam case above, 3.998067820372085.
  const std::vector<double> after_step1{value(n.params[0]), value(n.params[1]), value(n.params[2])};
  const optim::OptimizerState saved = adam.state_dict();
  CHECK(saved.groups == std::vector<std::string>{"enc.*:lr=0.1,weight_decay=0.5,rule=sgd"});
  CHECK(value(saved.buffers.at("exp_avg.0")) == 0.0);  // its buffers stay zero
  CHECK(value(saved.buffers.at("exp_avg_sq.0")) == 0.0);
  const std::vector<double> step2{1.76, -1.0019321795952254, 3.998067820372085};
  step_and_check(adam, n, kGrads2, step2, 1e-13);

  // The same second step from the saved state in a fresh optimizer: the group comes back with its rule.
  Named m({"enc.w", "dec.w", "dec.bias"}, {{after_step1[0]}, {after_step1[1]}, {after_step1[2]}});
  optim::Adam again(m.params, {/*lr=*/0.001});
  again.set_param_groups(ParamGroupsConfig::parse("enc.*:lr=0.1,weight_decay=0.5,rule=sgd"), m.names);
  again.load_state_dict(saved);
  step_and_check(again, m, kGrads2, step2, 1e-13);
  // An optimizer whose group uses Adam's own rule refuses that state: the groups differ.
  optim::Adam plain(three_parameters().params, {/*lr=*/0.001});
  plain.set_param_groups(ParamGroupsConfig::parse("enc.*:lr=0.1,weight_decay=0.5"), m.names);
  check_error([&] { plain.load_state_dict(saved); }, {"parameter groups", "rule=sgd"});
}

TEST_CASE("param groups: without groups the optimizers and clipping are unchanged, bit for bit") {
  // An empty config, or none, against the same steps on the plain optimizer.
  for (const char* type : {"sgd:lr=0.1,momentum=0.9,weight_decay=0.01", "adam:lr=0.01,weight_decay=0.1",
                           "adamw:lr=0.01", "radam:lr=0.01"}) {
    CAPTURE(type);
    Named plain = three_parameters(), grouped = three_parameters();
    const auto config = optim::OptimizerConfig::parse(type);
    auto a = optim::make_optimizer(config, plain.params);
    auto b = optim::make_optimizer(config, grouped.params);
    b->set_param_groups(ParamGroupsConfig::parse(""), grouped.names);
    REQUIRE(b->param_groups().size() == 1);
    for (int t = 0; t < 7; ++t) {
      set_grads(plain, t % 2 ? kGrads1 : kGrads2);
      set_grads(grouped, t % 2 ? kGrads1 : kGrads2);
      const double norm = optim::clip_grad_norm(plain.params, 1.0);
      CHECK(optim::clip_grad_norm_by_group(*b, 1.0).global == norm);
      a->step();
      b->step();
    }
    for (size_t i = 0; i < 3; ++i) CHECK(value(plain.params[i]) == value(grouped.params[i]));
    CHECK(b->state_dict().groups.empty());
  }
}

TEST_CASE("param groups: a schedule scales every group's rate, as torch.optim.lr_scheduler does") {
  // torch's schedulers keep each group's initial_lr and apply the schedule to it: for LambdaLR-like
  // schedules (inverse-sqrt here), group g's rate at step s is initial_lr_g · factor(s).
  Named n({"a.w", "b.w", "c"}, {{1.0}, {1.0}, {1.0}});
  optim::SGD sgd(n.params, {/*lr=*/1.0});
  sgd.set_param_groups(ParamGroupsConfig::parse("a.*:lr=0.5;b.*:lr=0.1"), n.names);
  optim::InverseSqrtSchedule schedule(sgd, /*warmup=*/4);  // factor(s) = min(s/4, √(4/s))
  const auto lrs = [&] {
    std::vector<double> out;
    for (const auto& group : sgd.param_groups()) out.push_back(group.lr);
    return out;
  };
  CHECK(lrs() == std::vector<double>{0.25, 0.125, 0.025});  // s = 1: factor 1/4
  CHECK(schedule.lrs() == lrs());
  CHECK(schedule.base_lrs() == std::vector<double>{1.0, 0.5, 0.1});
  schedule.step();
  CHECK(lrs() == std::vector<double>{0.5, 0.25, 0.05});  // s = 2: factor 1/2
  for (int s = 3; s <= 4; ++s) schedule.step();
  CHECK(lrs() == std::vector<double>{1.0, 0.5, 0.1});  // s = 4: factor 1, the initial rates
  for (int s = 5; s <= 9; ++s) schedule.step();
  CHECK(lrs()[0] == doctest::Approx(2.0 / 3).epsilon(1e-15));  // s = 9: factor √(4/9) = 2/3
  CHECK(lrs()[1] == doctest::Approx(1.0 / 3).epsilon(1e-15));
  CHECK(lrs()[2] == doctest::Approx(0.2 / 3).epsilon(1e-15));
  for (int s = 10; s <= 16; ++s) schedule.step();
  CHECK(lrs() == std::vector<double>{0.5, 0.25, 0.05});  // s = 16: factor √(4/16) = 1/2
  CHECK(schedule.lr() == 0.5);  // the default group's

  // Cosine with min_lr, as torch's CosineAnnealingLR(T_max = 10, eta_min = 0.1) has it for each
  // group: eta_min + (initial_lr_g − eta_min)·(1 + cos(π·5/10))/2 at s = 5, where the cosine is 0.
  Named m({"a.w", "c"}, {{1.0}, {1.0}});
  optim::SGD sgd2(m.params, {/*lr=*/1.0});
  sgd2.set_param_groups(ParamGroupsConfig::parse("a.*:lr=0.5"), m.names);
  optim::CosineSchedule cosine(sgd2, /*total_steps=*/10, /*min_lr=*/0.1);
  for (int s = 2; s <= 5; ++s) cosine.step();
  CHECK(sgd2.param_groups()[0].lr == doctest::Approx(0.1 + 0.9 * 0.5).epsilon(1e-15));  // 0.55
  CHECK(sgd2.param_groups()[1].lr == doctest::Approx(0.1 + 0.4 * 0.5).epsilon(1e-15));  // 0.3
  // min_lr above a group's rate is refused, naming the group.
  Named low({"a.w", "c"}, {{1.0}, {1.0}});
  optim::SGD sgd3(low.params, {/*lr=*/1.0});
  sgd3.set_param_groups(ParamGroupsConfig::parse("a.*:lr=0.01"), low.names);
  check_error([&] { optim::CosineSchedule(sgd3, 10, 0.1); }, {"CosineSchedule", "min_lr", "parameter group 1"});

  // Reduce-on-plateau multiplies every group's rate by the factor, each floored at min_lr.
  Named p({"a.w", "c"}, {{1.0}, {1.0}});
  optim::SGD sgd4(p.params, {/*lr=*/1.0});
  sgd4.set_param_groups(ParamGroupsConfig::parse("a.*:lr=0.3"), p.names);
  optim::ReduceOnPlateau plateau(sgd4, {/*factor=*/0.5, /*patience=*/0, /*min_lr=*/0.2});
  plateau.step(1.0);  // the first metric is the best
  CHECK(plateau.lrs() == std::vector<double>{1.0, 0.3});
  plateau.step(2.0);
  CHECK(plateau.lrs() == std::vector<double>{0.5, 0.2});  // 0.3·0.5 = 0.15 < min_lr: 0.2
  plateau.step(2.0);
  CHECK(plateau.lrs() == std::vector<double>{0.25, 0.2});
  CHECK(sgd4.param_groups()[1].lr == 0.2);
}

TEST_CASE("param groups: own-clip and no-clip groups stay out of the global norm") {
  // "own" is clipped alone to norm 1, "free" is not clipped, the rest join the global clip at 2.5.
  Named n({"own", "free", "c", "d"}, {{0.0, 0.0}, {0.0}, {0.0}, {0.0}});
  optim::SGD sgd(n.params, {/*lr=*/0.1});
  sgd.set_param_groups(ParamGroupsConfig::parse("own:clip=1;free:clip=none"), n.names);
  set_grads(n, {{6.0, 8.0}, {100.0}, {3.0}, {4.0}});
  const optim::GroupNorms norms = optim::clip_grad_norm_by_group(sgd, 2.5);
  // Global: √(3² + 4²) = 5, not √(6² + 8² + 100² + 3² + 4²): the other groups do not count.
  CHECK(norms.global == 5.0);
  CHECK(norms.groups == std::vector<double>{0.0, 10.0, 0.0});  // own: √(6² + 8²) = 10
  const auto grad = [&](size_t i) { return n.params[i].grad().to_vector<double>(); };
  CHECK(grad(2)[0] == doctest::Approx(3.0 * 2.5 / (5 + 1e-6)).epsilon(1e-15));  // scaled by 2.5/(5 + 1e-6)
  CHECK(grad(3)[0] == doctest::Approx(4.0 * 2.5 / (5 + 1e-6)).epsilon(1e-15));
  CHECK(grad(0)[0] == doctest::Approx(6.0 * 1 / (10 + 1e-6)).epsilon(1e-15));   // by its own 1/(10 + 1e-6)
  CHECK(grad(0)[1] == doctest::Approx(8.0 * 1 / (10 + 1e-6)).epsilon(1e-15));
  CHECK(grad(1)[0] == 100.0);  // not clipped

  // max_norm 0 (no --clip): the global groups are left alone, the own clip still applies.
  set_grads(n, {{6.0, 8.0}, {100.0}, {3.0}, {4.0}});
  const optim::GroupNorms off = optim::clip_grad_norm_by_group(sgd, 0.0);
  CHECK(off.global == 0.0);
  CHECK(off.groups[1] == 10.0);
  CHECK(grad(2)[0] == 3.0);
  CHECK(grad(0)[0] == doctest::Approx(0.6).epsilon(1e-6));
  check_error([&] { optim::clip_grad_norm_by_group(sgd, -1.0); }, {"clip_grad_norm_by_group", "max_norm"});
}

TEST_CASE("param groups: the optimizer and schedule states carry the groups, and old states still load") {
  Named n = three_parameters();
  optim::Adam adam(n.params, {/*lr=*/0.001});
  adam.set_param_groups(ParamGroupsConfig::parse(kTwoGroups), n.names);
  optim::InverseSqrtSchedule schedule(adam, 2);
  set_grads(n, kGrads1);
  adam.step();
  schedule.step();  // s = 2: the initial rates
  adam.set_group_lr(2, 0.125);  // as a schedule could: the state must carry it
  const optim::OptimizerState state = adam.state_dict();
  CHECK(state.groups == std::vector<std::string>{"enc.*:lr=0.1,weight_decay=0.5", "dec.w:lr=0.2,weight_decay=0"});
  CHECK(state.group_lrs == std::vector<double>{0.1, 0.125});
  CHECK(state.lr == 0.001);

  // Through a checkpoint's records and back.
  Checkpoint ckpt;
  add_optimizer_state(ckpt, "optimizer", state);
  add_schedule_state(ckpt, "schedule", schedule.state_dict());
  const optim::OptimizerState loaded = optimizer_state(ckpt, "optimizer");
  CHECK(loaded.groups == state.groups);
  CHECK(loaded.group_lrs == state.group_lrs);
  const optim::ScheduleState loaded_schedule = schedule_state(ckpt, "schedule");
  CHECK(loaded_schedule.group_base_lrs == std::vector<double>{0.1, 0.2});
  CHECK(loaded_schedule.group_lrs == std::vector<double>{0.1, 0.2});

  Named m = three_parameters();
  optim::Adam resumed(m.params, {/*lr=*/0.001});
  resumed.set_param_groups(ParamGroupsConfig::parse(kTwoGroups), m.names);
  resumed.load_state_dict(loaded);
  CHECK(resumed.param_groups()[2].lr == 0.125);
  optim::InverseSqrtSchedule resumed_schedule(resumed, 2);
  resumed_schedule.load_state_dict(loaded_schedule);
  CHECK(resumed_schedule.base_lrs() == schedule.base_lrs());
  CHECK(resumed.param_groups()[2].lr == 0.2);  // the schedule's record sets the rates it holds

  // A state is loaded only into an optimizer with the same groups.
  optim::Adam plain(three_parameters().params, {/*lr=*/0.001});
  check_error([&] { plain.load_state_dict(loaded); }, {"Adam", "parameter groups", "'enc.*", "this optimizer has none"});
  optim::InverseSqrtSchedule plain_schedule(plain, 2);
  check_error([&] { plain_schedule.load_state_dict(loaded_schedule); }, {"InverseSqrtSchedule", "3", "1"});

  // A record without groups (as every checkpoint before groups existed) is a state without groups.
  Checkpoint old;
  add_optimizer_state(old, "optimizer", plain.state_dict());
  add_schedule_state(old, "schedule", plain_schedule.state_dict());
  CHECK(!old.metadata["optimizer"].contains("groups"));
  CHECK(!old.metadata["schedule"].contains("group_lrs"));
  plain.load_state_dict(optimizer_state(old, "optimizer"));
  plain_schedule.load_state_dict(schedule_state(old, "schedule"));
  check_error([&] { resumed.load_state_dict(optimizer_state(old, "optimizer")); },
              {"saved with parameter groups none", "this optimizer has 'enc.*"});
}

TEST_CASE("param groups: a bad --param-groups text is refused saying where and why") {
  // Each text, and what its message says (the command line puts the flag's name in front of it:
  // tests/test_app_options.cpp).
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {";", {"group 1", "is empty"}},
      {"a;;b", {"group 2", "is empty"}},
      {"a;", {"group 2", "is empty"}},
      {"a|", {"group 1", "empty name pattern"}},
      {":lr=1", {"group 1", "empty name pattern"}},
      {"a b", {"pattern 'a b'", "space"}},
      {"a:", {"group 1", "expected key=value"}},
      {"a:lr", {"expected key=value, got 'lr'"}},
      {"a:momentum=0.9", {"'momentum' is not a setting", "lr, weight_decay, clip, rule"}},
      {"a:rule=adam", {"rule must be optimizer or sgd", "'adam'"}},
      {"a:rule=", {"expected key=value, got 'rule='"}},
      {"a:lr=fast", {"lr must be a finite number", "'fast'"}},
      {"a:lr=-1", {"learning rate", "-1"}},
      {"a:lr=nan", {"lr must be a finite number"}},
      {"a:weight_decay=-0.1", {"weight_decay", "-0.1"}},
      {"a:clip=0", {"clip must be global, none or a max norm > 0", "'0'"}},
      {"a:clip=sometimes", {"clip must be global, none or a max norm > 0", "'sometimes'"}},
      {"a:clip=inf", {"clip must be global, none or a max norm > 0", "'inf'"}},
      {"a:lr=1,lr=2", {"'lr' is given twice"}},
      {"a;b:lr=0.1,clip=x", {"group 2", "clip"}},
  };
  for (const auto& c : cases) {
    CAPTURE(c.first);
    check_error([&] { ParamGroupsConfig::parse(c.first); }, c.second);
  }
}

TEST_CASE("param groups: a parameter two groups match, and a group that matches none, are refused") {
  const std::vector<std::string> names = {"enc.layers.0.w_c", "enc.layers.0.bias", "enc.layers.1.w_c",
                                          "enc.layers.1.bias", "enc.centroids", "head.weight", "head.bias"};
  check_error([&] { ParamGroupsConfig::parse("*.w_c:lr=1;enc.layers.0.*").assign(names); },
              {"parameter 'enc.layers.0.w_c'", "group 1 ('*.w_c:lr=1')", "group 2 ('enc.layers.0.*')"});
  // A few of the names, one of each kind, to write a pattern from.
  check_error([&] { ParamGroupsConfig::parse("*.bias;*.w_k:lr=1").assign(names); },
              {"group 2 ('*.w_k:lr=1') matches no parameter", "'enc.layers.0.w_c'", "'enc.layers.0.bias'",
               "'enc.centroids'", "'head.weight'", "(7 in all)"});

  // In the trainer, naming the flag (the names are known once the model is built).
  struct Line : train::Task {
    explicit Line(Generator& gen) : model_(1, 1, gen) {}
    nn::Module& model() override { return model_; }
    train::Step step(Generator&) override { return {}; }
    train::Evaluation evaluate() override { return {}; }
    nn::Linear model_;
  };
  train::RunSpec spec;
  spec.identity.task = "line";
  spec.best = {"loss", train::Goal::Min};
  train::TrainOptions o;
  o.device = "cpu";
  o.progress = false;
  o.param_groups = ParamGroupsConfig::parse("*:lr=1;bias");
  const auto line = [](Generator& gen, Device) { return std::make_unique<Line>(gen); };
  check_error([&] { train::Trainer(spec, o).run(line); },
              {"--param-groups", "parameter 'bias'", "group 1 ('*:lr=1')", "group 2 ('bias')"});
  o.param_groups = ParamGroupsConfig::parse("encoder.*:lr=1");
  check_error([&] { train::Trainer(spec, o).run(line); },
              {"--param-groups", "group 1 ('encoder.*:lr=1') matches no parameter", "'weight', 'bias'"});
}

TEST_CASE("param groups: every training app's command line has --param-groups") {
  TempDir dir;
  const std::string cli = std::string(TAPESTRY_CLI) + " copy-task ";
  const auto [help_code, help, help_err] = run_shell(dir, cli + "--help");
  CHECK(help_code == 0);
  CHECK(help.find("--param-groups") != std::string::npos);

  const auto [code, out, err] = run_shell(dir, cli + "--param-groups '*.w_c:lr=x'");
  CHECK(code == 2);  // a bad command line
  CHECK(err.find("--param-groups") != std::string::npos);
  CHECK(err.find("lr must be a finite number") != std::string::npos);

  const std::string small =
      "--preset smoke --length 4 --layers 1 --heads 2 --head-dim 4 --ff 8 --batch 2 --eval-batches 1 --device cpu "
      "--steps 2 ";
  const auto [run_code, run_out, run_err] = run_shell(dir, cli + small + "--param-groups '*.bias:weight_decay=0;*.w_c'");
  CHECK(run_code == 1);  // known once the model is built: an error while running
  CHECK(run_err.find("--param-groups") != std::string::npos);
  CHECK(run_err.find("group 2 ('*.w_c') matches no parameter") != std::string::npos);
}
