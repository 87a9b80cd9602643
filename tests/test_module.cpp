// nn::Module: registration, dotted names and their order, train/eval, moves, state dicts, and the
// module gradcheck.
#include <memory>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// A leaf module with two parameters.
class Pair : public nn::Module {
 public:
  explicit Pair(double start) : Module("Pair") {
    w = register_parameter("w", full({2, 3}, start));
    b = register_parameter("b", full({3}, start + 1));
  }
  Tensor w, b;
};

// param "a", child "first", param "z", child "second" (which nests "inner"): the order of listings
// is the module's own parameters, then each child's, depth first.
class Tree : public nn::Module {
 public:
  Tree() : Module("Tree") {
    a = register_parameter("a", zeros({4}));
    first = register_module("first", std::make_shared<Pair>(1));
    z = register_parameter("z", zeros({1}));
    second = register_module("second", std::make_shared<Holder>());
  }
  class Holder : public nn::Module {
   public:
    Holder() : Module("Holder") { inner = register_module("inner", std::make_shared<Pair>(5)); }
    std::shared_ptr<Pair> inner;
  };
  Tensor a, z;
  std::shared_ptr<Pair> first;
  std::shared_ptr<Holder> second;
};

std::vector<std::string> names(const nn::NamedTensors& named) {
  std::vector<std::string> out;
  for (const auto& [name, _] : named) out.push_back(name);
  return out;
}

}  // namespace

TEST_CASE("Module: dotted names in registration order, children, parameter_count") {
  Tree tree;
  CHECK(names(tree.named_parameters()) ==
        std::vector<std::string>{"a", "z", "first.w", "first.b", "second.inner.w", "second.inner.b"});
  const std::vector<Tensor> params = tree.parameters();
  REQUIRE(params.size() == 6);
  CHECK(params[2].impl_ptr() == tree.first->w.impl_ptr());  // the handles, not copies
  const auto children = tree.named_children();
  REQUIRE(children.size() == 2);
  CHECK(children[0].first == "first");
  CHECK(children[1].first == "second");
  CHECK(tree.children()[1].get() == tree.second.get());
  CHECK(tree.parameter_count() == 4 + 1 + 2 * (6 + 3));
  for (const Tensor& p : params) {
    CHECK(p.requires_grad());
    CHECK(p.is_leaf());
  }
}

TEST_CASE("Module: registration rules") {
  nn::Module m("Custom");
  Tensor t = ones({2});
  const Tensor p = m.register_parameter("p", t);
  CHECK(p.impl_ptr() == t.impl_ptr());  // a leaf is registered as itself
  CHECK(t.requires_grad());
  check_error([&] { m.register_parameter("p", ones({1})); }, {"Custom", "'p' is already a parameter"});
  check_error([&] { m.register_parameter("a.b", ones({1})); }, {"Custom", "no '.'"});
  check_error([&] { m.register_parameter("", ones({1})); }, {"Custom", "non-empty"});
  check_error([&] { m.register_parameter("i", arange(3)); }, {"Custom", "'i' must be floating", "int64"});
  check_error([&] { m.register_parameter("u", Tensor()); }, {"Custom", "undefined"});
  check_error([&] { m.register_module("p", std::make_shared<Pair>(0)); }, {"Custom", "'p' is already a parameter"});
  check_error([&] { m.register_module("null", std::shared_ptr<Pair>()); }, {"Custom", "'null' is null"});
  m.register_module("child", std::make_shared<Pair>(0));
  check_error([&] { m.register_module("child", std::make_shared<Pair>(0)); }, {"'child' is already a submodule"});

  // A computed tensor becomes a detached leaf over the same data.
  Tensor w = ones({3});
  w.set_requires_grad(true);
  const Tensor computed = w * 2.0;
  const Tensor q = m.register_parameter("q", computed);
  CHECK(q.is_leaf());
  CHECK(q.requires_grad());
  CHECK(q.raw_data() == computed.raw_data());
}

TEST_CASE("Module: a tied parameter is listed once; ModuleList names its items by index") {
  nn::ModuleList<Pair> list;
  list.push_back(std::make_shared<Pair>(0));
  list.push_back(std::make_shared<Pair>(1));
  list.register_parameter("tied", list[0]->w);
  CHECK(names(list.named_parameters()) == std::vector<std::string>{"tied", "0.b", "1.w", "1.b"});
  CHECK(list.parameter_count() == 6 + 3 + 6 + 3);
  CHECK(list.size() == 2);
}

TEST_CASE("Module: train / eval reach every descendant") {
  Tree tree;
  CHECK(tree.is_training());
  tree.eval();
  CHECK(tree.mode() == Mode::Eval);
  CHECK(!tree.first->is_training());
  CHECK(!tree.second->inner->is_training());
  tree.second->train();  // a subtree alone
  CHECK(tree.second->inner->is_training());
  CHECK(!tree.is_training());
  tree.train();
  CHECK(tree.first->is_training());
}

TEST_CASE("Module: to(DType) converts in place of the handles; zero_grad") {
  Generator gen(1);
  nn::Linear linear(3, 2, gen);
  const Tensor handle = linear.parameters()[0];
  const std::vector<double> before = handle.to_vector<double>();
  optim::Adam adam(linear.parameters());  // holds handles made before the move
  sum(linear.forward(ones({4, 3}))).backward();
  CHECK(linear.weight.grad().defined());

  linear.to(DType::Float64);
  CHECK(handle.dtype() == DType::Float64);
  CHECK(linear.weight.dtype() == DType::Float64);
  CHECK(adam.parameters()[0].dtype() == DType::Float64);
  CHECK(linear.weight.is_leaf());
  CHECK(linear.weight.requires_grad());
  CHECK(!linear.weight.grad().defined());  // the float32 gradient is dropped
  check_close(handle, from_vector(before, {2, 3}), 0, 0);
  linear.to(Device::cpu());  // already there: nothing changes
  CHECK(linear.weight.dtype() == DType::Float64);

  // The optimizer steps the converted parameters.
  sum(linear.forward(ones({4, 3}, {DType::Float64}))).backward();
  adam.step();
  CHECK(linear.weight.to_vector<double>() != before);
  linear.zero_grad();
  CHECK(!linear.weight.grad().defined());
  CHECK(!linear.bias.grad().defined());
  check_error([&] { linear.to(DType::Int64); }, {"Linear", "floating dtype"});
}

TEST_CASE("Module: state_dict round trip") {
  Generator g1(1), g2(2);
  nn::FeedForward a({4, 6, nn::Activation::GELU, 0.0}, g1), b({4, 6, nn::Activation::GELU, 0.0}, g2);
  const nn::StateDict state = a.state_dict();
  std::vector<std::string> keys;
  for (const auto& [name, _] : state) keys.push_back(name);
  CHECK(keys == std::vector<std::string>{"linear1.bias", "linear1.weight", "linear2.bias", "linear2.weight"});
  CHECK(state.at("linear1.weight").raw_data() == a.linear1->weight.raw_data());  // shares memory
  CHECK(!state.at("linear1.weight").requires_grad());

  const Tensor x = to(uniform({2, 4}, 3), DType::Float32);
  Generator gen(0);
  const Tensor b_params_handle = b.linear1->weight;
  b.load_state_dict(state);
  CHECK(b_params_handle.impl_ptr() == b.linear1->weight.impl_ptr());
  check_close(b.forward(x, gen), a.forward(x, gen), 0, 0);
  // The loaded values are copies: changing b leaves a alone.
  {
    NoGradGuard no_grad;
    fill_(b.linear1->weight, 0.0);
  }
  CHECK(a.linear1->weight.to_vector<float>() != b.linear1->weight.to_vector<float>());
}

TEST_CASE("Module: load_state_dict lists every problem and changes nothing") {
  Generator g1(1), g2(2);
  nn::Linear target(3, 2, g1), source(3, 2, g2);
  const std::vector<float> weight = target.weight.to_vector<float>(), bias = target.bias.to_vector<float>();
  auto unchanged = [&] {
    CHECK(target.weight.to_vector<float>() == weight);
    CHECK(target.bias.to_vector<float>() == bias);
  };

  nn::StateDict state = source.state_dict();
  state.erase("bias");
  state["extra"] = zeros({1});
  check_error([&] { target.load_state_dict(state); },
              {"Linear", "nothing was loaded", "1 missing, 1 unexpected, 0 mismatched", "missing: bias", "unexpected: extra"});
  unchanged();  // weight was loadable, but nothing is loaded when anything is wrong

  state = source.state_dict();
  state["weight"] = zeros({2, 4});
  state["bias"] = zeros({2}, {DType::Float64});
  check_error([&] { target.load_state_dict(state); },
              {"0 missing, 0 unexpected, 2 mismatched", "weight: (2, 3) float32 in the module, (2, 4) float32 in the state dict",
               "bias: (2,) float32 in the module, (2,) float64 in the state dict"});
  unchanged();

  state = source.state_dict();
  state["bias"] = Tensor();
  check_error([&] { target.load_state_dict(state); }, {"bias: the state dict holds an undefined tensor"});
  unchanged();
}

namespace {

// A module whose forward hides its parameter from the tape: its gradient is wrongly zero.
class Broken : public nn::Module {
 public:
  Broken() : Module("Broken") { w = register_parameter("w", ones({2}, {DType::Float64})); }
  Tensor forward(const Tensor& x) { return x * w.detach(); }
  Tensor w;
};

}  // namespace

TEST_CASE("nn::gradcheck checks parameters, restores them, and names a failing one") {
  Generator gen(4);
  nn::Linear linear(3, 2, gen);
  linear.to(DType::Float64);
  const Tensor weight = linear.weight;
  const std::vector<double> before = weight.to_vector<double>();
  const GradcheckResult ok = nn::gradcheck(linear, [&](const std::vector<Tensor>& in) { return linear.forward(in[0]); },
                                           {uniform({4, 3}, 5)});
  CHECK(ok.ok);
  CHECK(linear.weight.impl_ptr() == weight.impl_ptr());
  CHECK(linear.weight.to_vector<double>() == before);
  CHECK(linear.weight.requires_grad());
  CHECK(!linear.weight.grad().defined());

  Broken broken;
  const GradcheckResult bad =
      nn::gradcheck(broken, [&](const std::vector<Tensor>& in) { return broken.forward(in[0]); }, {uniform({2}, 6)});
  CHECK(!bad.ok);
  CHECK(bad.report.find("input 1 is parameter 'w'") != std::string::npos);

  nn::Linear single(2, 2, gen);  // float32
  check_error([&] { nn::gradcheck(single, [&](const std::vector<Tensor>& in) { return in[0]; }, {}); },
              {"gradcheck", "Linear parameter 'weight' is float32"});
}

TEST_CASE("check_input / check_features name the layer and the argument") {
  nn::LayerNorm norm(4);
  check_error([&] { nn::check_features(norm, "memory", zeros({2, 5}), norm.weight, 2, 4); },
              {"LayerNorm: memory must have at least 2 dims with a last dim of 4, got shape (2, 5)"});
  check_error([&] { nn::check_input(norm, "input", zeros({4}, {DType::Float64}), norm.weight); },
              {"LayerNorm: input must be float32 like the layer's parameters, got float64"});
  check_error([&] { nn::check_input(norm, "input", Tensor(), norm.weight); }, {"LayerNorm: input is an undefined"});
}

TEST_CASE("Module: buffers are saved, loaded and moved, but are not parameters") {
  class Counted : public nn::Module {
   public:
    Counted() : Module("Counted") {
      w = register_parameter("w", zeros({2}));
      mean = register_buffer("mean", full({3}, 2.0));
      inner = register_module("inner", std::make_shared<Pair>(1));
    }
    Tensor w, mean;
    std::shared_ptr<Pair> inner;
  };
  Counted m;
  CHECK(m.parameters().size() == 3);  // w, inner.w, inner.b
  const nn::NamedTensors buffers = m.named_buffers();
  REQUIRE(buffers.size() == 1);
  CHECK(buffers[0].first == "mean");
  CHECK(m.has_buffer("mean"));
  CHECK(!m.has_buffer("w"));
  CHECK(m.buffer("mean").impl_ptr() == m.mean.impl_ptr());
  CHECK(!m.mean.requires_grad());
  // state dicts hold it; a load restores it and refuses a missing one
  nn::StateDict state = m.state_dict();
  REQUIRE(state.count("mean") == 1);
  state["mean"] = full({3}, 5.0);
  m.load_state_dict(state);
  CHECK(m.mean.to_vector<float>() == std::vector<float>{5, 5, 5});
  state.erase("mean");
  check_error([&] { m.load_state_dict(state); }, {"Counted", "missing: mean"});
  // moves convert it in place of its handles
  m.to(DType::Float64);
  CHECK(m.mean.dtype() == DType::Float64);
  CHECK(m.buffer("mean").dtype() == DType::Float64);
  // names are shared with parameters and submodules
  check_error([&] { m.register_buffer("w", zeros({1})); }, {"Counted", "'w' is already a parameter"});
  check_error([&] { m.register_parameter("mean", zeros({1})); }, {"Counted", "'mean' is already a buffer"});
  check_error([&] { m.buffer("nothing"); }, {"Counted", "has no buffer 'nothing'"});
}
