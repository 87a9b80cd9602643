// The README's example: a tensor expression and its gradient.
#include <iostream>

#include <tapestry/tapestry.h>

int main() {
  using namespace tapestry;
  Generator gen(0);
  Tensor w = randn({3, 2}, gen);  // a parameter
  w.set_requires_grad(true);
  const Tensor x = rand({4, 3}, gen);             // a batch of inputs
  const Tensor loss = mean(tanh(matmul(x, w)));  // a scalar
  loss.backward();                                // fills w.grad()
  std::cout << "loss " << loss.item<float>() << "\n" << "dloss/dw " << w.grad() << "\n";
}
