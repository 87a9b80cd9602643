// The autograd graph of a user's own model: a two-block residual MLP with a hard routing decision
// (argmax) that gradient cannot pass. Each block's ops run in a TapeScope named after its module, so
// the drawing can collapse a block into one box. Two losses, one backward pass each: every edge is
// labelled with what each loss sent along it. Writes tape.dot (Graphviz) and tape.svg, and checks
// that the edge into the first layer's weight carries exactly that weight's gradient.
#include <cmath>
#include <cstdio>
#include <fstream>

#include <tapestry/tapestry.h>

using namespace tapestry;

namespace {

class Block : public nn::Module {
 public:
  explicit Block(Generator& gen) : Module("Block"), linear(register_module("linear", std::make_shared<nn::Linear>(8, 8, gen))) {}
  Tensor forward(const Tensor& x) { return x + tanh(linear->forward(x)); }
  std::shared_ptr<nn::Linear> linear;
};

class Model : public nn::Module {
 public:
  explicit Model(Generator& gen)
      : Module("Model"),
        first(register_module("first", std::make_shared<Block>(gen))),
        second(register_module("second", std::make_shared<Block>(gen))) {}
  // The output, and the hard choice of each row's largest feature (no gradient flows through it).
  std::pair<Tensor, Tensor> forward(const Tensor& x) {
    Tensor h;
    {
      const TapeScope scope("first");
      h = first->forward(x);
    }
    const Tensor choice = argmax(h, 1);  // (B) int64: a cut
    const TapeScope scope("second");
    return {second->forward(h), choice};
  }
  std::shared_ptr<Block> first, second;
};

}  // namespace

int main() {
  Generator gen(7);
  Model model(gen);
  const Tensor x = randn({4, 8}, gen);
  const TapeGraph graph = tape_graph(
      [&] {
        const auto [y, choice] = model.forward(x);
        const Tensor task = mean(y * y);
        const Tensor picked = mean(gather(y, 1, unsqueeze(choice, 1)));  // reads y where the argmax chose
        return std::vector<Tensor>{task, picked};
      },
      {"task", "picked"}, model.named_parameters());
  double task_share = NAN;  // what the task's pass sent along the edge from the first block's weight
  for (const GraphEdge& e : graph.edges)
    if (graph.nodes[size_t(e.from)].label == "first.linear.weight") task_share = e.grad_norms[0];
  std::ofstream("tape.dot") << to_dot(collapse(graph, {0, {"first"}}));  // the second block as one box
  std::ofstream("tape.svg") << to_svg(collapse(graph, {0, {"first"}}));

  // The same gradient computed directly: the task loss alone, backward, the weight's grad().
  model.zero_grad();
  const Tensor y = model.forward(x).first;
  mean(y * y).backward();
  const double direct = norm(model.first->linear->weight.grad()).item<double>();
  std::printf("%zu nodes, %zu edges; the task's gradient into first.linear.weight: %.6g on the edge, %.6g directly\n",
              graph.nodes.size(), graph.edges.size(), task_share, direct);
  const bool ok = std::abs(task_share - direct) <= 1e-5 * direct && direct > 0;
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
