// The CTC loss on the GPU against the CPU, forward and backward: every reduction, both infinity
// modes with an infeasible utterance, repeated labels, empty targets, zero-frame inputs, a blank in
// the middle of the classes, extended label sequences longer than a block (2S + 1 > 256) and more
// classes than a block, an empty batch, the same bits on every run, and bad labels refused.
#include <cstdint>
#include <vector>

#include "tests/cuda/parity.h"

using namespace tapestry;
using namespace tapestry::testing;

namespace {

// The α/β recursions run in the input's dtype over T frames; log and exp differ by an ulp between
// the devices and the sums meet them T times.
Tolerance ctc_tol(DType dtype) { return dtype == DType::Float32 ? Tolerance{1e-5, 1e-4} : Tolerance{1e-12, 1e-10}; }

Tensor lengths(const std::vector<int64_t>& v) { return from_vector<int64_t>(v, {static_cast<int64_t>(v.size())}); }

// (B, S) labels in [0, C) other than blank, from seed; every third row has runs of repeats.
Tensor labels(int64_t B, int64_t S, int64_t C, int64_t blank, uint64_t seed) {
  Generator gen(seed);
  std::vector<int64_t> v = randint(0, C - 1, {B, S}, gen).to_vector<int64_t>();
  for (int64_t& k : v) k = k >= blank ? k + 1 : k;  // skip the blank
  for (int64_t b = 0; b < B; b += 3)
    for (int64_t i = 1; i < S; i += 2) v[static_cast<size_t>(b * S + i)] = v[static_cast<size_t>(b * S + i - 1)];
  return from_vector<int64_t>(v, {B, S});
}

void check_ctc(const Tensor& logits, const Tensor& targets, const std::vector<int64_t>& in_len,
               const std::vector<int64_t>& tg_len, int64_t blank, DType dtype) {
  for (CtcReduction reduction : {CtcReduction::None, CtcReduction::Sum, CtcReduction::Mean})
    for (CtcInfinity infinity : {CtcInfinity::Keep, CtcInfinity::Zero}) {
      INFO("log_probs " << to_string(logits.shape()) << " " << dtype << " blank " << blank << " reduction "
                        << static_cast<int>(reduction) << " infinity " << static_cast<int>(infinity));
      check_parity(
          [&](const std::vector<Tensor>& in) {
            return ctc_loss(log_softmax(in[0]), in[1], in[2], in[3], blank, reduction, infinity);
          },
          {to(logits, dtype), targets, lengths(in_len), lengths(tg_len)}, ctc_tol(dtype));
    }
}

}  // namespace

TEST_CASE("ctc_loss: reductions, infinities, repeats, empty targets and inputs, blank anywhere") {
  uint64_t seed = 1;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    // B = 6, T = 12, C = 5, S = 4: full, short, repeated, empty, zero-frame and infeasible rows
    const std::vector<int64_t> in_len{12, 9, 12, 5, 0, 3}, tg_len{4, 3, 4, 0, 0, 4};
    for (int64_t blank : {0, 2, 4}) {
      seed += 2;
      check_ctc(input({6, 12, 5}, seed, dtype, -3, 3), labels(6, 4, 5, blank, seed + 1), in_len, tg_len, blank, dtype);
    }
  }
  // an empty batch, and frames without any label (S = 0)
  check_ctc(input({0, 4, 3}, 50), zeros({0, 2}, {DType::Int64}), {}, {}, 0, DType::Float32);
  check_ctc(input({3, 4, 3}, 51), zeros({3, 0}, {DType::Int64}), {4, 1, 0}, {0, 0, 0}, 0, DType::Float64);
}

TEST_CASE("ctc_loss: label sequences longer than a block, more classes than a block") {
  // 2S + 1 = 301 positions: threads stride over the extended labels; C = 300: over the classes
  const int64_t B = 3, T = 400, S = 150;
  for (DType dtype : {DType::Float32, DType::Float64}) {
    check_ctc(input({B, T, 40}, 60, dtype, -2, 2), labels(B, S, 40, 0, 61), {400, 350, 310}, {150, 140, 150}, 0, dtype);
    check_ctc(input({B, 20, 300}, 62, dtype, -2, 2), labels(B, 6, 300, 299, 63), {20, 7, 11}, {6, 6, 3}, 299, dtype);
  }
}

TEST_CASE("ctc_loss on the device: the same bits on every run") {
  const Tensor logits = to(input({8, 200, 30}, 70, DType::Float32, -3, 3), dut());
  const Tensor t = to(labels(8, 60, 30, 0, 71), dut());
  const Tensor il = to(lengths({200, 190, 180, 170, 160, 150, 140, 130}), dut());
  const Tensor tl = to(lengths({60, 50, 40, 30, 20, 10, 5, 0}), dut());
  Tensor first_loss, first_grad;
  for (int run = 0; run < 2; ++run) {
    Tensor leaf = clone(logits);
    leaf.set_requires_grad(true);
    const Tensor loss = ctc_loss(log_softmax(leaf), t, il, tl);
    loss.backward();
    if (run == 0) {
      first_loss = loss, first_grad = leaf.grad();
    } else {
      expect_bitwise(loss, first_loss);
      expect_bitwise(leaf.grad(), first_grad);
    }
  }
}

TEST_CASE("ctc_loss on the device refuses bad labels and lengths before computing anything") {
  Tensor lp = to(input({2, 4, 3}, 80, DType::Float64), dut());
  lp.set_requires_grad(true);
  Tape::current().clear();
  const Tensor t = to(from_vector<int64_t>({1, 2, 2, 0}, {2, 2}), dut());
  const Tensor il = to(lengths({4, 3}), dut());
  check_error([&] { ctc_loss(lp, t, il, to(lengths({2, 2}), dut())); }, {"ctc_loss", "targets[1, 1] = 0", "the blank"});
  check_error([&] { ctc_loss(lp, t, to(lengths({4, 5}), dut()), to(lengths({2, 1}), dut())); },
              {"ctc_loss", "input_lengths[1] = 5"});
  CHECK(Tape::current().size() == 0);
  CHECK_FALSE(lp.grad().defined());
  if (on_gpu()) check_error([&] { ctc_loss(lp, t, lengths({4, 3}), to(lengths({2, 1}), dut())); }, {"ctc_loss", "one device"});
}
