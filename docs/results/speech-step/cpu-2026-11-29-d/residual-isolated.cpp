// The post-norm residual step alone, layer_norm(x + dropout(s)) against dropout_add_layer_norm, alternating
// in one process (1950 × 64 rows, p = 0.1); mean µs a call over the repeats. Built against the installed
// library (find_package(Tapestry)); run with OPENBLAS_CORETYPE=Haswell ./residual-isolated [repeats].
#include <tapestry/tapestry.h>
#include <chrono>
#include <cstdio>
using namespace tapestry;
int main(int argc, char** argv) {
  const int64_t R = 1950, D = 64;
  Generator gen(1);
  Tensor x = randn({R, D}, gen), s = randn({R, D}, gen), w = randn({D}, gen), b = randn({D}, gen), dy = randn({R, D}, gen);
  for (Tensor* t : {&x, &s, &w, &b}) t->set_requires_grad(true);
  double t[2][2] = {};
  const int reps = argc > 1 ? atoi(argv[1]) : 2000;
  for (int r = 0; r < reps + 20; ++r)
    for (int fused = 0; fused < 2; ++fused) {
      auto t0 = std::chrono::steady_clock::now();
      Tensor y = fused ? dropout_add_layer_norm(x, s, 0.1, gen, Mode::Train, w, b) : layer_norm(x + dropout(s, 0.1, gen, Mode::Train), w, b);
      auto t1 = std::chrono::steady_clock::now();
      backward(y, dy);
      auto t2 = std::chrono::steady_clock::now();
      if (r >= 20) t[fused][0] += std::chrono::duration<double>(t1 - t0).count(), t[fused][1] += std::chrono::duration<double>(t2 - t1).count();
      for (Tensor* u : {&x, &s, &w, &b}) u->zero_grad();
    }
  std::printf("composed fwd %.1f bwd %.1f us | fused fwd %.1f bwd %.1f us\n", t[0][0] / reps * 1e6, t[0][1] / reps * 1e6, t[1][0] / reps * 1e6, t[1][1] / reps * 1e6);
}
