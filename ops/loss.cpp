// Losses. Shapes: cross-entropy logits (R, C) seen as R rows of C classes, targets (R), the saved
// per-row log-partition lse (R); binary cross-entropy logits and targets (N) once flattened.
#include "ops/loss.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/autocast.h"
#include "ops/common.h"
#include "ops/cuda/index_scan.h"
#include "ops/cuda/loss.h"
#include "ops/dispatch.h"
#include "ops/elementwise.h"
#include "ops/fast_exp.h"
#include "ops/index.h"
#include "ops/reduce.h"
#include "ops/shape.h"

namespace tapestry {

namespace {

constexpr int64_t kParallelWork = 32768;  // elements below which a loop stays on one thread
constexpr int64_t kSumChunk = 4096;       // elements per partial sum in ordered_sum

// A row of logits' max m, Σ_c e^(x_c − m) and Σ_c x_c, the sums in double. Element c goes to lane
// c mod kLanes and the lanes are added in order at the end: a fixed order, whatever the CPU, that the
// compiler runs in vector registers (a single running sum in double keeps every add waiting on the
// last one). The max is exact in any order.
constexpr int64_t kLanes = 16;
template <class C>
struct RowSumsOf {
  C max;
  double exp, total;
};
template <class T, class C = compute_t<T>>
RowSumsOf<C> row_sums(const T* x, int64_t n) {
  C lane_max[kLanes];
  for (int64_t l = 0; l < kLanes; ++l) lane_max[l] = C(x[0]);
  for (int64_t c = 0; c < n; c += kLanes)
    for (int64_t l = 0; l < kLanes && c + l < n; ++l) {
      const C v = C(x[c + l]);
      lane_max[l] = v > lane_max[l] ? v : lane_max[l];
    }
  C m = lane_max[0];
  for (int64_t l = 1; l < kLanes; ++l) m = lane_max[l] > m ? lane_max[l] : m;
  double exp_lanes[kLanes] = {}, total_lanes[kLanes] = {};
  const int64_t whole = n / kLanes * kLanes;
  for (int64_t c = 0; c < whole; c += kLanes)
    for (int64_t l = 0; l < kLanes; ++l) {
      exp_lanes[l] += static_cast<double>(exp_nonpositive_of(C(x[c + l]) - m));
      total_lanes[l] += static_cast<double>(C(x[c + l]));
    }
  for (int64_t c = whole; c < n; ++c) {
    exp_lanes[c - whole] += static_cast<double>(exp_nonpositive_of(C(x[c]) - m));
    total_lanes[c - whole] += static_cast<double>(C(x[c]));
  }
  RowSumsOf<C> sums{m, 0, 0};
  for (int64_t l = 0; l < kLanes; ++l) sums.exp += exp_lanes[l], sums.total += total_lanes[l];
  return sums;
}

// Σ_{i < n} term(i) in double, the same for any number of threads: fixed chunks, summed in order.
template <class Term>
double ordered_sum(int64_t n, Term term) {
  const int64_t chunks = (n + kSumChunk - 1) / kSumChunk;
  std::vector<double> partial(static_cast<size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (int64_t k = 0; k < chunks; ++k) {
    double acc = 0;
    for (int64_t i = k * kSumChunk; i < std::min(n, (k + 1) * kSumChunk); ++i) acc += term(i);
    partial[static_cast<size_t>(k)] = acc;
  }
  double total = 0;
  for (double v : partial) total += v;
  return total;
}

struct TargetScan {
  int64_t bad_position = -1;  // row-major position of the first invalid target; −1 if none
  int64_t bad_value = 0;
  int64_t valid = 0;          // targets that are not ignore_index
};

struct CrossEntropyForward {
  Tensor loss;   // 0-d
  Tensor lse;    // (R): log Σ_c e^logits, per row (0 for ignored rows)
};

// ---- kernels (the CPU loops; a tensor on a GPU takes the CUDA launchers of ops/cuda/loss.h) ----

TargetScan scan_targets(const char* op, const Tensor& targets, int64_t C, int64_t ignore_index) {
  const Tensor t = contiguous(targets);
  cuda::IndexScan scan;  // on a GPU the targets are scanned in place; only the verdict comes back
  if (on_cuda(op, targets, [&] { scan = cuda::scan_indices(op, t, C, ignore_index); }))
    return TargetScan{scan.bad_position, scan.bad_value, scan.valid};
  return visit_index(t.dtype(), op, [&](auto tag) {
    using I = decltype(tag);
    const I* p = t.data<I>();
    TargetScan scan;
    for (int64_t r = 0; r < t.numel(); ++r) {
      const int64_t v = static_cast<int64_t>(p[r]);
      if (v == ignore_index) continue;
      if (v < 0 || v >= C) return TargetScan{r, v, 0};
      ++scan.valid;
    }
    return scan;
  });
}

// Per valid row: lse = m + log Σ_c e^(x_c − m), loss_r = (1 − ε)(lse − x_t) + ε (lse − mean_c x_c);
// loss = Σ_r loss_r / valid. bfloat16 logits are read as float32 (exactly): loss and lse are float32,
// what widening the logits first gives, without the float32 copy of them (the largest tensor of a
// translation step under autocast).
CrossEntropyForward cross_entropy_forward(const Tensor& logits_in, const Tensor& targets_in, int64_t ignore_index,
                                          double eps, int64_t valid) {
  const Tensor logits = contiguous(logits_in.detach());
  const Tensor targets = contiguous(targets_in);
  const int64_t C = logits.shape().back(), R = targets.numel();
  const Options computed{logits.dtype() == DType::BFloat16 ? DType::Float32 : logits.dtype(), logits.device()};
  CrossEntropyForward out{empty({}, computed), empty({R}, computed)};
  if (on_cuda("cross_entropy", logits_in, [&] {
        cuda::cross_entropy_forward(logits, targets, ignore_index, eps, valid, out.loss, out.lse);
      }))
    return out;
  std::vector<double> row_loss(static_cast<size_t>(R), 0.0);
  visit_floating_or_bfloat16(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using S = compute_t<T>;
    visit_index(targets.dtype(), "cross_entropy", [&](auto index_tag) {
      using I = decltype(index_tag);
      const T* x = logits.data<T>();
      const I* t = targets.data<I>();
      S* lse = out.lse.data<S>();
#pragma omp parallel for schedule(static) if (R > 1 && R * C > kParallelWork)
      for (int64_t r = 0; r < R; ++r) {
        const int64_t target = static_cast<int64_t>(t[r]);
        lse[r] = S(0);
        if (target == ignore_index) continue;
        const T* xr = x + r * C;
        const RowSumsOf<S> sums = row_sums(xr, C);
        const double l = static_cast<double>(sums.max) + std::log(sums.exp);
        lse[r] = static_cast<S>(l);
        row_loss[static_cast<size_t>(r)] =
            (1 - eps) * (l - static_cast<S>(xr[target])) + eps * (l - sums.total / static_cast<double>(C));
      }
    });
    double sum = 0;
    for (double v : row_loss) sum += v;
    *out.loss.data<S>() = static_cast<S>(valid > 0 ? sum / static_cast<double>(valid) : 0.0);
  });
  return out;
}

// dx_r = dy / valid · (e^(x_r − lse_r) − (1 − ε) onehot(t_r) − ε / C) for valid rows, 0 for ignored;
// for bfloat16 logits computed in float32 (dy and lse are float32) and rounded once.
Tensor cross_entropy_backward(const Tensor& dy, const Tensor& logits, const Tensor& targets, const Tensor& lse_t,
                              int64_t ignore_index, double eps, int64_t valid) {
  Tensor dx = empty(logits.shape(), logits.options());
  if (on_cuda("cross_entropy", dy, [&] {
        cuda::cross_entropy_backward(dy, logits, targets, lse_t, ignore_index, eps, valid, dx);
      }))
    return dx;
  const int64_t C = logits.shape().back(), R = targets.numel();
  visit_floating_or_bfloat16(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = decltype(tag);
    using S = compute_t<T>;
    visit_index(targets.dtype(), "cross_entropy", [&](auto index_tag) {
      using I = decltype(index_tag);
      const T* x = logits.data<T>();
      const I* t = targets.data<I>();
      const S* lse = lse_t.data<S>();
      T* d = dx.data<T>();
      const S scale = valid > 0 ? static_cast<S>(dy.item<double>() / static_cast<double>(valid)) : S(0);
      const S on = static_cast<S>(1 - eps), off = static_cast<S>(eps / static_cast<double>(C));
#pragma omp parallel for schedule(static) if (R > 1 && R * C > kParallelWork)
      for (int64_t r = 0; r < R; ++r) {
        const int64_t target = static_cast<int64_t>(t[r]);
        T* dr = d + r * C;
        if (target == ignore_index) {
          std::fill(dr, dr + C, T(0));
          continue;
        }
        const T* xr = x + r * C;
        const S lse_r = lse[r];  // ≥ every logit of the row: lse = max + log of a sum ≥ 1
        for (int64_t c = 0; c < C; ++c)
          dr[c] = T(scale * (exp_nonpositive_of(S(xr[c]) - lse_r) - off - (c == target ? on : S(0))));
      }
    });
  });
  return dx;
}

// loss = Σ_i [max(x_i, 0) − x_i t_i + log(1 + e^−|x_i|)] / N
Tensor bce_forward(const Tensor& logits, const Tensor& targets) {
  Tensor loss = empty({}, logits.options());
  if (on_cuda("binary_cross_entropy_with_logits", logits, [&] {
        cuda::binary_cross_entropy_forward(logits, targets, loss);
      }))
    return loss;
  const int64_t N = logits.numel();
  visit_floating(logits.dtype(), "binary_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const T* t = targets.data<T>();
    const double sum = ordered_sum(N, [x, t](int64_t i) {
      const double v = x[i];
      return (v > 0 ? v : 0.0) - v * t[i] + std::log1p(std::exp(-std::abs(v)));
    });
    *loss.data<T>() = static_cast<T>(N > 0 ? sum / static_cast<double>(N) : 0.0);
  });
  return loss;
}

// dx = dy / N · (σ(x) − t),  dt = −dy / N · x
Tensor bce_backward_logits(const Tensor& dy, const Tensor& logits, const Tensor& targets) {
  Tensor dx = empty(logits.shape(), logits.options());
  if (on_cuda("binary_cross_entropy_with_logits", dy, [&] {
        cuda::binary_cross_entropy_backward_logits(dy, logits, targets, dx);
      }))
    return dx;
  const int64_t N = logits.numel();
  visit_floating(logits.dtype(), "binary_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    const T* t = targets.data<T>();
    T* d = dx.data<T>();
    const T scale = static_cast<T>(dy.item<double>() / static_cast<double>(N));
#pragma omp parallel for schedule(static) if (N > kParallelWork)
    for (int64_t i = 0; i < N; ++i) {
      const T e = std::exp(-std::abs(x[i]));  // σ(x) without overflow on either side
      const T sigma = x[i] >= T(0) ? T(1) / (T(1) + e) : e / (T(1) + e);
      d[i] = scale * (sigma - t[i]);
    }
  });
  return dx;
}

Tensor bce_backward_targets(const Tensor& dy, const Tensor& logits) {
  Tensor dt = empty(logits.shape(), logits.options());
  if (on_cuda("binary_cross_entropy_with_logits", dy, [&] {
        cuda::binary_cross_entropy_backward_targets(dy, logits, dt);
      }))
    return dt;
  const int64_t N = logits.numel();
  visit_floating(logits.dtype(), "binary_cross_entropy_with_logits", [&](auto tag) {
    using T = decltype(tag);
    const T* x = logits.data<T>();
    T* d = dt.data<T>();
    const T scale = static_cast<T>(-dy.item<double>() / static_cast<double>(N));
#pragma omp parallel for schedule(static) if (N > kParallelWork)
    for (int64_t i = 0; i < N; ++i) d[i] = scale * x[i];
  });
  return dt;
}

// The checks cross_entropy and nll_loss share: scores (..., C) with classes along the last dim,
// targets (...) of class indices in [0, C) or ignore_index. Returns the count of valid targets.
int64_t check_class_targets(const char* op, const Tensor& scores, const char* scores_name, const Tensor& targets,
                            int64_t ignore_index) {
  check_floating(op, scores);
  TP_CHECK(targets.defined(), op, "got undefined targets");
  check_same_device(op, {&scores, &targets});
  TP_CHECK(scores.dim() >= 1 && scores.shape().back() >= 1, op, scores_name,
           " must have at least 1 dim with classes along the last (at least one class), got shape ",
           to_string(scores.shape()));
  TP_CHECK(is_integer(targets.dtype()), op, "targets must be class indices of dtype int64 (or int32), got ",
           targets.dtype(), " of shape ", to_string(targets.shape()));
  const Shape rows(scores.shape().begin(), scores.shape().end() - 1);
  TP_CHECK(targets.shape() == rows, op, "targets of shape ", to_string(targets.shape()), " do not match ",
           scores_name, " of shape ", to_string(scores.shape()), " (expected targets of shape ", to_string(rows), ")");
  const int64_t C = scores.shape().back();
  const TargetScan scan = scan_targets(op, targets, C, ignore_index);
  if (scan.bad_position >= 0) {
    fail(op, "target ", scan.bad_value, " at position ", index_string(scan.bad_position, targets.shape()),
         " is out of range for ", C, " classes (", scores_name, " of shape ", to_string(scores.shape()),
         ") and is not ignore_index (", ignore_index, ")");
  }
  return scan.valid;
}

// The checks of the losses that compare two tensors of one floating dtype and one shape.
void check_pair(const char* op, const Tensor& input, const char* input_name, const Tensor& target) {
  check_floating(op, input);
  TP_CHECK(target.defined(), op, "got an undefined target");
  check_same_device(op, {&input, &target});
  check_same_dtype(op, input, target);
  TP_CHECK(target.shape() == input.shape(), op, "target of shape ", to_string(target.shape()), " does not match ",
           input_name, " of shape ", to_string(input.shape()));
}

}  // namespace

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index, double label_smoothing) {
  // bfloat16 logits need no widening (the float32 loss of autocast's policy, ops/autocast.h): the
  // kernels read them as float32.
  const char* op = "cross_entropy";
  const int64_t valid = check_class_targets(op, logits, "logits", targets, ignore_index);
  TP_CHECK(label_smoothing >= 0 && label_smoothing < 1, op, "label_smoothing must lie in [0, 1), got ",
           label_smoothing);
  const Tensor x = contiguous(logits.detach()), t = contiguous(targets);
  const CrossEntropyForward f = cross_entropy_forward(x, t, ignore_index, label_smoothing, valid);
  // p = e^(x − lse):  dx = dy / |valid| · (p − (1 − ε) onehot(t) − ε / C) on valid rows, 0 elsewhere
  record(op, {logits}, {f.loss},
         [ignore_index, label_smoothing, valid, xs = Saved(x), ts = Saved(t), lses = Saved(f.lse)](
             const std::vector<Tensor>& dy, Gradients& g) {
           g.accumulate(0, cross_entropy_backward(dy[0], xs.get(), ts.get(), lses.get(), ignore_index,
                                                  label_smoothing, valid));
         });
  return f.loss;
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets) {
  if (autocast_widens({&logits, &targets}))  // ops/autocast.h
    return binary_cross_entropy_with_logits(autocast_float32(logits), autocast_float32(targets));
  const char* op = "binary_cross_entropy_with_logits";
  check_floating(op, logits);
  TP_CHECK(targets.defined(), op, "got undefined targets");
  check_same_device(op, {&logits, &targets});
  check_same_dtype(op, logits, targets);
  TP_CHECK(targets.shape() == logits.shape(), op, "targets of shape ", to_string(targets.shape()),
           " do not match logits of shape ", to_string(logits.shape()));
  const Tensor x = contiguous(logits.detach()), t = contiguous(targets.detach());
  Tensor loss = bce_forward(x, t);
  // dx = dy / N · (σ(x) − t),  dt = −dy / N · x
  record(op, {logits, targets}, {loss}, [xs = Saved(x), ts = Saved(t)](const std::vector<Tensor>& dy, Gradients& g) {
    if (g.needs(0)) g.accumulate(0, bce_backward_logits(dy[0], xs.get(), ts.get()));
    if (g.needs(1)) g.accumulate(1, bce_backward_targets(dy[0], xs.get()));
  });
  return loss;
}

// The losses below are compositions of differentiable ops, so each gradient comes from theirs.

Tensor nll_loss(const Tensor& log_probs, const Tensor& targets, int64_t ignore_index) {
  if (autocast_widens({&log_probs}))  // ops/autocast.h
    return nll_loss(autocast_float32(log_probs), targets, ignore_index);
  const int64_t valid = check_class_targets("nll_loss", log_probs, "log_probs", targets, ignore_index);
  // −(1 / |valid|) Σ_{i valid} log_probs[i, t_i]; ignored rows pick class 0 and are then dropped
  // by where (not multiplied by 0, which would turn a −inf there into NaN).
  const Tensor ignored = eq(targets, scalar(double(ignore_index), targets.options()));
  const Tensor classes = where(ignored, zeros({}, targets.options()), targets);
  const Tensor picked = squeeze(gather(log_probs, -1, unsqueeze(classes, -1)), -1);
  const Tensor kept = where(ignored, zeros({}, log_probs.options()), picked);
  return -sum(kept) / static_cast<double>(std::max<int64_t>(valid, 1));
}

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  if (autocast_widens({&input, &target}))  // ops/autocast.h
    return mse_loss(autocast_float32(input), autocast_float32(target));
  check_pair("mse_loss", input, "input", target);
  // (1 / N) Σ (x − t)²;  dx = 2 (x − t) / N, dt = −dx
  const Tensor diff = input - target;
  return sum(diff * diff) / static_cast<double>(std::max<int64_t>(input.numel(), 1));
}

Tensor kl_div(const Tensor& log_q, const Tensor& p) {
  if (autocast_widens({&log_q, &p})) return kl_div(autocast_float32(log_q), autocast_float32(p));  // ops/autocast.h
  check_pair("kl_div", log_q, "log_q", p);
  TP_CHECK(log_q.dim() >= 1, "kl_div", "needs distributions along a last dim, got a 0-d ", log_q.dtype());
  // Σ_c p (log p − log q), with 0 · log 0 = 0: where p = 0, log 1 = 0 stands in for log p, so the
  // term is 0 and neither it nor its gradient is 0 · (−inf) = NaN.
  // dlog_q = −p / R,  dp = (log p − log q + 1) / R where p > 0, −log q / R where p = 0
  const Tensor positive = gt(p, zeros({}, p.options()));
  const Tensor log_p = log(where(positive, p, ones({}, p.options())));
  const int64_t rows = log_q.numel() / std::max<int64_t>(log_q.shape().back(), 1);
  return sum(p * (log_p - log_q)) / static_cast<double>(std::max<int64_t>(rows, 1));
}

}  // namespace tapestry
