#include "ops/shape.h"

#include "core/profiler.h"
#include "core/tape_graph.h"

#include <algorithm>
#include <numeric>

#include "ops/common.h"
#include "ops/elementwise.h"
#include "ops/index.h"

namespace tapestry {

namespace {

Shape infer_shape(const char* op, const Tensor& x, Shape shape) {
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TP_CHECK(infer < 0, op, "only one dim may be -1, got ", to_string(shape));
      infer = static_cast<int64_t>(i);
    } else {
      TP_CHECK(shape[i] >= 0, op, "invalid size in shape ", to_string(shape));
      TP_CHECK(!__builtin_mul_overflow(known, shape[i], &known), op, "shape ", to_string(shape),
               " is too large: its element count does not fit in int64");
    }
  }
  if (infer >= 0) {
    TP_CHECK(known != 0 && x.numel() % known == 0, op, "cannot infer -1 in ", to_string(shape),
             " for a tensor of shape ", to_string(x.shape()));
    shape[infer] = x.numel() / known;
  }
  // A shape with a 0 in it holds no element however large its other sizes, but its strides must
  // still fit: view(zeros({0}), {1 << 62, 4}) is refused here, not wrapped into a valid-looking view.
  check_shape(shape, op);
  TP_CHECK(numel(shape) == x.numel(), op, "shape ", to_string(shape), " (", numel(shape),
           " elements) does not fit a tensor of shape ", to_string(x.shape()), " (", x.numel(),
           " elements)");
  return shape;
}

// The 1-d int64 index `positions` on `device`, for index_select.
Tensor index_on(const std::vector<int64_t>& positions, Device device) {
  return to(from_vector<int64_t>(positions, {static_cast<int64_t>(positions.size())}), device);
}

// x[..., i, j] where keep(j − i) holds, 0 elsewhere: tril and triu.
template <class Keep>
Tensor triangle(const char* op, const Tensor& x, Keep keep) {
  TP_CHECK(x.defined(), op, "got an undefined tensor");
  TP_CHECK(x.dim() >= 2, op, "needs a tensor of at least 2 dims (..., rows, cols), got shape ", to_string(x.shape()));
  const int64_t rows = x.shape()[x.dim() - 2], cols = x.shape()[x.dim() - 1];
  const Options index_options{DType::Int64, x.device()};
  // offset[i][j] = j − i: (rows, cols), broadcast over the leading dims.
  const Tensor offset = sub(reshape(arange(cols, index_options), {1, cols}), reshape(arange(rows, index_options), {rows, 1}));
  // Built from where, so the gradient (dy where kept, 0 elsewhere) comes with it.
  return where(keep(offset), x, zeros({}, x.options()));
}

// A view recorded on the tape with the given backward. The profiler does not list it: an op that
// returns a view of its result would otherwise see its work charged to the view (core/profiler.h).
Tensor record_view(const char* op, const Tensor& x, Tensor y, BackwardFn backward) {
  const profile_hooks::View unlisted;
  record(op, {x}, {y}, std::move(backward));
  return y;
}

}  // namespace

Tensor view(const Tensor& x, const Shape& shape) {
  TP_CHECK(x.defined(), "view", "got an undefined tensor");
  const Shape target = infer_shape("view", x, shape);
  // A tensor without elements has no layout to get wrong (and is_contiguous() can be false for one
  // just allocated, e.g. shape (2, 0, 3) with strides (3, 3, 1)).
  TP_CHECK(x.is_contiguous(), "view", "needs a contiguous tensor, got shape ", to_string(x.shape()),
           " with strides ", to_string(x.strides()), "; use reshape (which copies)");
  const Shape from = x.shape();
  // dx = reshape(dy, shape of x)
  return record_view("view", x, make_view(x, target, contiguous_strides(target), x.offset()),
                     [from](const std::vector<Tensor>& dy, Gradients& g) { g.accumulate(0, reshape(dy[0], from)); });
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  TP_CHECK(x.defined(), "reshape", "got an undefined tensor");
  infer_shape("reshape", x, shape);
  return view(contiguous(x), shape);
}

Tensor flatten(const Tensor& x) { return reshape(x, {-1}); }

Tensor permute(const Tensor& x, const std::vector<int64_t>& dims) {
  TP_CHECK(x.defined(), "permute", "got an undefined tensor");
  TP_CHECK(static_cast<int64_t>(dims.size()) == x.dim(), "permute", "got ", dims.size(),
           " dims for a tensor of shape ", to_string(x.shape()));
  Shape shape(dims.size());
  Strides strides(dims.size());
  std::vector<int64_t> inverse(dims.size(), -1);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = normalize_dim(dims[i], x.dim(), "permute");
    TP_CHECK(inverse[d] < 0, "permute", "dim ", d, " appears twice in ", to_string(dims));
    inverse[d] = static_cast<int64_t>(i);
    shape[i] = x.shape()[d];
    strides[i] = x.strides()[d];
  }
  // dx = permute(dy, inverse permutation)
  return record_view("permute", x, make_view(x, shape, strides, x.offset()),
                     [inverse](const std::vector<Tensor>& dy, Gradients& g) { g.accumulate(0, permute(dy[0], inverse)); });
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  TP_CHECK(x.defined(), "transpose", "got an undefined tensor");
  std::vector<int64_t> dims(x.dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[normalize_dim(dim0, x.dim(), "transpose")], dims[normalize_dim(dim1, x.dim(), "transpose")]);
  return permute(x, dims);
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  TP_CHECK(x.defined(), "slice", "got an undefined tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "slice");
  TP_CHECK(step > 0, "slice", "step must be positive, got ", step);
  const int64_t size = x.shape()[d];
  auto wrap = [size](int64_t i) { return std::clamp<int64_t>(i < 0 ? i + size : i, 0, size); };
  start = wrap(start);
  end = std::max(start, wrap(end));
  Shape shape = x.shape();
  Strides strides = x.strides();
  shape[d] = end == start ? 0 : (end - start - 1) / step + 1;  // ⌈(end − start) / step⌉, no overflow
  // A dim of size 0 or 1 never steps: keeping its stride avoids an overflow for a huge step.
  if (shape[d] > 1) strides[d] *= step;
  const int64_t offset = x.offset() + (shape[d] > 0 ? start * x.strides()[d] : 0);
  // dx[start:end:step] += dy
  return record_view("slice", x, make_view(x, shape, strides, offset),
                     [d, start, end, step](const std::vector<Tensor>& dy, Gradients& g) {
                       add_(slice(g.buffer(0), d, start, end, step), dy[0]);
                     });
}

Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  TP_CHECK(x.defined(), "select", "got an undefined tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "select");
  const int64_t size = x.shape()[d];
  TP_CHECK(index >= -size && index < size, "select", "index ", index, " is out of range for dim ",
           d, " of size ", size);
  if (index < 0) index += size;
  Shape shape = x.shape();
  Strides strides = x.strides();
  const int64_t offset = x.offset() + index * strides[d];
  shape.erase(shape.begin() + d);
  strides.erase(strides.begin() + d);
  // dx[index] += dy
  return record_view("select", x, make_view(x, shape, strides, offset),
                     [d, index](const std::vector<Tensor>& dy, Gradients& g) {
                       add_(select(g.buffer(0), d, index), dy[0]);
                     });
}

Tensor expand(const Tensor& x, const Shape& shape) {
  TP_CHECK(x.defined(), "expand", "got an undefined tensor");
  TP_CHECK(shape.size() >= x.shape().size(), "expand", "cannot expand shape ", to_string(x.shape()),
           " to fewer dims ", to_string(shape));
  const size_t lead = shape.size() - x.shape().size();
  Shape out(shape.size());
  Strides strides(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    const int64_t have = i < lead ? 1 : x.shape()[i - lead];
    const int64_t want = shape[i] == -1 && i >= lead ? have : shape[i];
    TP_CHECK(want >= 0 && (have == want || have == 1), "expand", "cannot expand shape ",
             to_string(x.shape()), " to ", to_string(shape));
    out[i] = want;
    if (i >= lead && have == want) strides[i] = x.strides()[i - lead];
  }
  check_shape(out, "expand");  // element count and strides; an expanded view allocates nothing
  // dx = dy summed over the expanded dims (Gradients::accumulate sums to x's shape)
  return record_view("expand", x, make_view(x, out, strides, x.offset()),
                     [](const std::vector<Tensor>& dy, Gradients& g) { g.accumulate(0, dy[0]); });
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  TP_CHECK(x.defined(), "squeeze", "got an undefined tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "squeeze");
  TP_CHECK(x.shape()[d] == 1, "squeeze", "dim ", d, " of shape ", to_string(x.shape()),
           " has size ", x.shape()[d], ", not 1");
  return select(x, d, 0);
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  TP_CHECK(x.defined(), "unsqueeze", "got an undefined tensor");
  const int64_t d = normalize_dim(dim, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape();
  Strides strides = x.strides();
  shape.insert(shape.begin() + d, 1);
  strides.insert(strides.begin() + d, d < x.dim() ? strides[d] * x.shape()[d] : 1);
  // dx = dy with the inserted dim removed
  return record_view("unsqueeze", x, make_view(x, shape, strides, x.offset()),
                     [d](const std::vector<Tensor>& dy, Gradients& g) { g.accumulate(0, select(dy[0], d, 0)); });
}

Tensor concat(const std::vector<Tensor>& tensors, int64_t dim) {
  TP_CHECK(!tensors.empty(), "concat", "needs at least one tensor");
  const Tensor& first = tensors[0];
  TP_CHECK(first.defined() && first.dim() > 0, "concat", "cannot concatenate 0-d tensors");
  const int64_t d = normalize_dim(dim, first.dim(), "concat");
  Shape shape = first.shape();
  shape[d] = 0;
  for (const Tensor& t : tensors) {
    check_same_device("concat", {&first, &t});
    check_same_dtype("concat", first, t);
    bool fits = t.dim() == first.dim();
    for (int64_t i = 0; fits && i < t.dim(); ++i) fits = i == d || t.shape()[i] == first.shape()[i];
    TP_CHECK(fits, "concat", "shapes ", to_string(first.shape()), " and ", to_string(t.shape()),
             " differ outside dim ", d);
    shape[d] = checked_add(shape[d], t.shape()[d], "concat", "the size of the concatenated dim");
  }
  Tensor y = empty(shape, first.options());
  std::vector<int64_t> starts;
  int64_t at = 0;
  for (const Tensor& t : tensors) {
    NoGradGuard no_grad;
    starts.push_back(at);
    copy_(slice(y, d, at, at + t.shape()[d]), t);
    at += t.shape()[d];
  }
  // dx_i = dy[start_i : start_i + n_i] along dim
  record("concat", tensors, {y}, [d, starts, at](const std::vector<Tensor>& dy, Gradients& g) {
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t end = i + 1 < starts.size() ? starts[i + 1] : at;
      if (g.needs(i)) g.accumulate(i, slice(dy[0], d, starts[i], end));
    }
  });
  return y;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  TP_CHECK(!tensors.empty() && tensors[0].defined(), "stack", "needs at least one tensor");
  const int64_t d = normalize_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const Tensor& t : tensors) {
    TP_CHECK(t.defined() && t.shape() == tensors[0].shape(), "stack", "all shapes must match, got ",
             to_string(tensors[0].shape()), " and ", t.defined() ? to_string(t.shape()) : "undefined");
    check_same_device("stack", {&tensors[0], &t});
    check_same_dtype("stack", tensors[0], t);
    parts.push_back(unsqueeze(t, d));
  }
  return concat(parts, d);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  TP_CHECK(x.defined(), "split", "got an undefined tensor");
  const int64_t d = normalize_dim(dim, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    TP_CHECK(s >= 0, "split", "negative size in ", to_string(sizes));
    total = checked_add(total, s, "split", "the sum of the sizes");
  }
  TP_CHECK(total == x.shape()[d], "split", "sizes ", to_string(sizes), " add up to ", total,
           ", not to the size ", x.shape()[d], " of dim ", d);
  std::vector<Tensor> parts;
  int64_t at = 0;
  for (int64_t s : sizes) {
    parts.push_back(slice(x, d, at, at + s));
    at += s;
  }
  return parts;
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t dim) {
  TP_CHECK(x.defined(), "split", "got an undefined tensor");
  TP_CHECK(size > 0, "split", "size must be positive, got ", size);
  const int64_t n = x.shape()[normalize_dim(dim, x.dim(), "split")];
  std::vector<int64_t> sizes;
  for (int64_t at = 0; at < n; at += sizes.back()) sizes.push_back(std::min(size, n - at));
  return split(x, sizes, dim);
}

Tensor pad(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  TP_CHECK(x.defined(), "pad", "got an undefined tensor");
  TP_CHECK(pads.size() % 2 == 0 && static_cast<int64_t>(pads.size()) <= 2 * x.dim(), "pad",
           "expected pairs (before, after) for at most ", x.dim(), " dims, got ", to_string(pads));
  Shape shape = x.shape();
  for (size_t p = 0; p < pads.size() / 2; ++p) {
    const int64_t d = x.dim() - 1 - static_cast<int64_t>(p);
    TP_CHECK(pads[2 * p] >= 0 && pads[2 * p + 1] >= 0, "pad", "pads must be non-negative, got ", to_string(pads));
    shape[d] = checked_add(checked_add(shape[d], pads[2 * p], "pad", "a padded size"), pads[2 * p + 1],
                           "pad", "a padded size");
  }
  // The region of a padded tensor where x sits. It is kept by the backward closure, so it holds
  // copies: `pads` and `x` may be temporaries of the caller, gone by the time backward runs.
  auto inner = [pads, from = x.shape()](const Tensor& t) {
    Tensor v = t;
    for (size_t p = 0; p < pads.size() / 2; ++p) {
      const int64_t d = static_cast<int64_t>(from.size()) - 1 - static_cast<int64_t>(p);
      v = slice(v, d, pads[2 * p], pads[2 * p] + from[d]);
    }
    return v;
  };
  Tensor y = full(shape, value, x.options());
  {
    NoGradGuard no_grad;
    copy_(inner(y), x);
  }
  // dx = dy restricted to where x sits
  record("pad", {x}, {y}, [inner](const std::vector<Tensor>& dy, Gradients& g) { g.accumulate(0, inner(dy[0])); });
  return y;
}

Tensor contiguous(const Tensor& x) {
  TP_CHECK(x.defined(), "contiguous", "got an undefined tensor");
  return x.is_contiguous() ? x : clone(x);
}

Tensor clone(const Tensor& x) {
  TP_CHECK(x.defined(), "clone", "got an undefined tensor");
  Tensor y = empty(x.shape(), x.options());
  {
    NoGradGuard no_grad;
    copy_(y, x.detach());
  }
  // dx = dy
  record("clone", {x}, {y}, [](const std::vector<Tensor>& dy, Gradients& g) { g.accumulate(0, dy[0]); });
  return y;
}

Tensor to(const Tensor& x, DType dtype) {
  TP_CHECK(x.defined(), "to", "got an undefined tensor");
  if (x.dtype() == dtype) return x;
  Tensor y = empty(x.shape(), {dtype, x.device()});
  {
    NoGradGuard no_grad;
    copy_(y, x.detach());
  }
  if (is_floating(dtype)) {
    // dx = dy converted back to x's dtype
    const DType from = x.dtype();
    record("to", {x}, {y}, [from](const std::vector<Tensor>& dy, Gradients& g) { g.accumulate(0, to(dy[0], from)); });
  } else {
    record_cut("to", {x}, {y});  // an integer or a truth value has no gradient
  }
  return y;
}

Tensor to(const Tensor& x, Device device) {
  TP_CHECK(x.defined(), "to", "got an undefined tensor");
  if (x.device() == device) return x;
  const Tensor src = contiguous(x.detach());
  Tensor y = empty(x.shape(), {x.dtype(), device});
  copy_bytes(y.raw_data(), device, src.raw_data(), src.device(),
             static_cast<size_t>(src.numel()) * element_size(src.dtype()));
  // dx = dy moved back to x's device
  const Device from = x.device();
  record("to", {x}, {y}, [from](const std::vector<Tensor>& dy, Gradients& g) { g.accumulate(0, to(dy[0], from)); });
  return y;
}

Tensor detach(const Tensor& x) {
  TP_CHECK(x.defined(), "detach", "got an undefined tensor");
  return x.detach();
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  return triangle("tril", x, [&](const Tensor& offset) { return le(offset, scalar(double(diagonal), offset.options())); });
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  return triangle("triu", x, [&](const Tensor& offset) { return ge(offset, scalar(double(diagonal), offset.options())); });
}

Tensor flip(const Tensor& x, const std::vector<int64_t>& dims) {
  TP_CHECK(x.defined(), "flip", "got an undefined tensor");
  std::vector<bool> seen(x.dim(), false);
  Tensor y = x;
  for (const int64_t dim : dims) {
    const int64_t d = normalize_dim(dim, x.dim(), "flip");
    TP_CHECK(!seen[d], "flip", "dim ", d, " appears twice in ", to_string(dims), " (shape ", to_string(x.shape()), ")");
    seen[d] = true;
    std::vector<int64_t> reversed(x.shape()[d]);
    std::iota(reversed.rbegin(), reversed.rend(), int64_t{0});
    // index_select's gradient (index_add) flips dy back.
    y = index_select(y, d, index_on(reversed, x.device()));
  }
  return y;
}

Tensor roll(const Tensor& x, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims) {
  TP_CHECK(x.defined(), "roll", "got an undefined tensor");
  TP_CHECK(shifts.size() == dims.size(), "roll", "needs one shift per dim, got shifts ", to_string(shifts),
           " and dims ", to_string(dims), " (shape ", to_string(x.shape()), ")");
  Tensor y = x;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = normalize_dim(dims[k], x.dim(), "roll"), n = x.shape()[d];
    if (n == 0) continue;
    // y[i] = x[(i − shift) mod n]
    const int64_t shift = ((shifts[k] % n) + n) % n;
    std::vector<int64_t> source(n);
    for (int64_t i = 0; i < n; ++i) source[i] = (i - shift + n) % n;
    y = index_select(y, d, index_on(source, x.device()));
  }
  return y;
}

Tensor repeat(const Tensor& x, const std::vector<int64_t>& repeats) {
  TP_CHECK(x.defined(), "repeat", "got an undefined tensor");
  TP_CHECK(static_cast<int64_t>(repeats.size()) >= x.dim(), "repeat", "needs at least one count per dim, got ",
           to_string(repeats), " for shape ", to_string(x.shape()));
  for (const int64_t r : repeats)
    TP_CHECK(r >= 0, "repeat", "counts must be non-negative, got ", to_string(repeats));
  // x as (1, s0, 1, s1, ...) (with leading size-1 dims for the extra counts), expanded to
  // (r0, s0, r1, s1, ...) and merged pairwise: (r0·s0, r1·s1, ...). Built from views and reshape,
  // so the gradient (dy summed over the copies) comes with them.
  const size_t lead = repeats.size() - static_cast<size_t>(x.dim());
  Shape interleaved, expanded, merged;
  for (size_t d = 0; d < repeats.size(); ++d) {
    const int64_t size = d < lead ? 1 : x.shape()[d - lead];
    interleaved.insert(interleaved.end(), {1, size});
    expanded.insert(expanded.end(), {repeats[d], size});
    merged.push_back(checked_mul(repeats[d], size, "repeat", "a repeated size"));
  }
  check_shape(merged, "repeat", static_cast<int64_t>(element_size(x.dtype())));
  return reshape(expand(reshape(x, interleaved), expanded), merged);
}

}  // namespace tapestry
