#include <cmath>
#include <limits>
#include <sstream>

#include "tests/testing.h"

using namespace tapestry;
using namespace tapestry::testing;

TEST_CASE("philox matches the published Philox4x32-10 test vectors") {
  const PhiloxBlock zero = philox4x32_10({{0, 0, 0, 0}}, 0, 0);
  CHECK(zero.w[0] == 0x6627e8d5u);
  CHECK(zero.w[1] == 0xe169c58du);
  CHECK(zero.w[2] == 0xbc57ac4cu);
  CHECK(zero.w[3] == 0x9b00dbd8u);
  const PhiloxBlock ones = philox4x32_10({{~0u, ~0u, ~0u, ~0u}}, ~0u, ~0u);
  CHECK(ones.w[0] == 0x408f276du);
  CHECK(ones.w[1] == 0x41c83b0eu);
  CHECK(ones.w[2] == 0xa20bc7c6u);
  CHECK(ones.w[3] == 0x6d5451fdu);
  const PhiloxBlock pi = philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u, 0x299f31d0u);
  CHECK(pi.w[0] == 0xd16cfe09u);
  CHECK(pi.w[1] == 0x94fdccebu);
  CHECK(pi.w[2] == 0x5001e420u);
  CHECK(pi.w[3] == 0x24126ea1u);
}

TEST_CASE("creation: shapes, dtypes, values") {
  const Tensor z = zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == DType::Float32);
  CHECK(z.device() == Device::cpu());
  CHECK(z.is_contiguous());
  CHECK(z.strides() == Strides{3, 1});
  CHECK(z.to_vector<float>() == std::vector<float>(6, 0.0f));
  CHECK(ones({4}, {DType::Int32}).to_vector<int32_t>() == std::vector<int32_t>{1, 1, 1, 1});
  CHECK(full({2}, 2.5, {DType::Float64}).to_vector<double>() == std::vector<double>{2.5, 2.5});
  CHECK(arange(5).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  CHECK(arange(1.0, 2.0, 0.25, {DType::Float64}).to_vector<double>() == std::vector<double>{1, 1.25, 1.5, 1.75});
  CHECK(arange(0.0, 3.0, -1.0).numel() == 0);
  CHECK(select(select(from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {3, 2}), 0, 2), 0, 1).item<double>() == 6.0);
  const Tensor s = scalar(7.0, {DType::Int64});
  CHECK(s.dim() == 0);
  CHECK(s.numel() == 1);
  CHECK(s.item<int64_t>() == 7);
  const Tensor e = zeros({0, 3});
  CHECK(e.numel() == 0);
  CHECK(e.to_vector<float>().empty());
  CHECK(from_vector<bool>({true, false}, {2}).dtype() == DType::Bool);
}

TEST_CASE("creation refuses bad arguments") {
  check_error([] { zeros({2, -1}); }, {"full", "negative size", "(2, -1)"});
  check_error([] { from_vector<float>({1, 2, 3}, {2, 2}); }, {"from_vector", "3 values", "(2, 2)"});
  check_error([] { arange(0.0, 1.0, 0.0); }, {"arange", "non-zero step"});
  Generator gen(1);
  check_error([&] { randint(3, 3, {2}, gen); }, {"randint", "low < high"});
  check_error([&] { rand({2}, gen, {DType::Int64}); }, {"rand", "floating", "int64"});
  check_error([] { from_vector<float>({1, 2}, {2}).item<float>(); }, {"item", "one element", "(2,)"});
  check_error([] { zeros({2}).data<double>(); }, {"data", "float64", "float32"});
}

TEST_CASE("creation refuses shapes whose element, stride or byte count overflows int64") {
  constexpr int64_t k62 = int64_t{1} << 62, k32 = int64_t{1} << 32;
  // 2^62 float32 elements are 2^64 bytes: the product used to wrap to 0 and the fill wrote
  // through a 0-byte block (SIGSEGV).
  check_error([] { zeros({k62}); }, {"full", "(4611686018427387904,)", "too large"});
  check_error([] { empty({k62}); }, {"empty", "(4611686018427387904,)", "too large"});
  check_error([] { ones({k32, k32}); }, {"full", "(4294967296, 4294967296)", "too large"});
  check_error([] { empty({k32, k32}, {DType::Bool}); }, {"empty", "(4294967296, 4294967296)"});
  // Zero elements, but strides that do not fit.
  check_error([] { zeros({0, k62, 4}); }, {"full", "(0, 4611686018427387904, 4)", "too large"});
  Generator gen(1);
  check_error([&] { rand({k62, 8}, gen); }, {"rand", "too large"});
  check_error([&] { randint(0, 2, {k62, 8}, gen, {DType::Int64}); }, {"randint", "too large"});
  check_error([] { from_vector<float>({}, {k62, 4}); }, {"from_vector", "too large"});
  check_error([] { arange(0.0, 1e300, 1.0); }, {"arange", "too many"});
  // Below int64's limits but beyond any allocator: refused by the allocator with the byte count.
  check_error([] { empty({int64_t{1} << 60}); }, {"allocate", "cannot allocate", "bytes"});
  // A double that does not fit the integer dtype is refused, not converted (undefined behaviour).
  check_error([] { full({2}, 1e30, {DType::Int64}); }, {"full", "does not fit", "int64"});
  check_error([] { full({2}, std::nan(""), {DType::Int32}); }, {"full", "does not fit", "int32"});
  check_error([] { from_vector<int64_t>({1}, {1}) * 1e19; }, {"does not fit", "int64"});
  CHECK(full({1}, -0x1p63, {DType::Int64}).item<int64_t>() == std::numeric_limits<int64_t>::min());
  check_error([] { numel({k32, k32, k32}); }, {"numel", "(4294967296, 4294967296, 4294967296)"});
}

TEST_CASE("random draws: reproducible, distinct streams, plausible moments") {
  Generator a(42), b(42), c(43);
  const std::vector<double> x = rand({10000}, a, {DType::Float64}).to_vector<double>();
  CHECK(x == rand({10000}, b, {DType::Float64}).to_vector<double>());
  CHECK(x != rand({10000}, c, {DType::Float64}).to_vector<double>());
  // The next draw continues the stream instead of repeating it.
  CHECK(a.offset() == 10000);
  CHECK(rand({10}, a, {DType::Float64}).to_vector<double>() != std::vector<double>(x.begin(), x.begin() + 10));
  double lo = 1, hi = 0, mean = 0;
  for (double v : x) lo = std::min(lo, v), hi = std::max(hi, v), mean += v / x.size();
  CHECK(lo >= 0.0);
  CHECK(hi < 1.0);
  CHECK(mean == doctest::Approx(0.5).epsilon(0.02));

  Generator g(7);
  const std::vector<float> n = randn({20000}, g).to_vector<float>();
  double m1 = 0, m2 = 0;
  for (float v : n) m1 += v / n.size(), m2 += double(v) * v / n.size();
  CHECK(std::abs(m1) < 0.03);
  CHECK(m2 == doctest::Approx(1.0).epsilon(0.05));

  const std::vector<int64_t> k = randint(-3, 4, {5000}, g).to_vector<int64_t>();
  std::vector<int> seen(7, 0);
  for (int64_t v : k) {
    REQUIRE(v >= -3);
    REQUIRE(v < 4);
    ++seen[v + 3];
  }
  for (int count : seen) CHECK(count > 500);
}

TEST_CASE("views share storage; contiguous copies") {
  const Tensor x = arange(0.0, 6.0, 1.0, {DType::Float32});
  const Tensor m = view(x, {2, 3});
  CHECK(&m.storage() == &x.storage());
  const Tensor t = transpose(m, 0, 1);
  CHECK(t.shape() == Shape{3, 2});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.to_vector<float>() == std::vector<float>{0, 3, 1, 4, 2, 5});
  const Tensor c = contiguous(t);
  CHECK(c.is_contiguous());
  CHECK(&c.storage() != &x.storage());
  CHECK(&contiguous(m).storage() == &x.storage());  // already contiguous: the same tensor
  const Tensor col = select(m, 1, 2);
  CHECK(col.to_vector<float>() == std::vector<float>{2, 5});
  {
    NoGradGuard guard;
    fill_(col, 9.0);  // writes through the view
  }
  CHECK(x.to_vector<float>() == std::vector<float>{0, 1, 9, 3, 4, 9});
  CHECK(x.storage().version() == 1);
}

TEST_CASE("to(dtype) and to(device)") {
  const Tensor x = from_vector<double>({1.5, -2.5, 3.0}, {3});
  CHECK(to(x, DType::Int64).to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3});
  CHECK(to(x, DType::Bool).to_vector<bool>() == std::vector<bool>{true, true, true});
  CHECK(to(x, DType::Float32).dtype() == DType::Float32);
  CHECK(&to(x, DType::Float64).storage() == &x.storage());  // nothing to do: the same tensor
  CHECK(&to(x, Device::cpu()).storage() == &x.storage());
  if (!cuda::is_available()) {
    MESSAGE("CUDA round trip skipped: " << cuda::unavailable_reason());
    check_error([&] { to(x, Device::cuda(0)); }, {"cuda", "cuda:0"});
  } else {
    const Tensor back = to(to(x, Device::cuda(0)), Device::cpu());
    CHECK(back.to_vector<double>() == x.to_vector<double>());
  }
}

TEST_CASE("devices: parsing and availability") {
  CHECK(Device::parse("cpu") == Device::cpu());
  CHECK(Device::parse("cuda") == Device::cuda(0));
  CHECK(Device::parse("cuda:3") == Device::cuda(3));
  CHECK(Device::parse("auto") == Device::best());
  CHECK(to_string(Device::cuda(1)) == "cuda:1");
  check_error([] { Device::parse("gpu"); }, {"Device::parse", "'gpu'"});
  check_error([] { Device::parse("cuda:"); }, {"Device::parse"});
  check_error([] { Device::parse("cuda:-1"); }, {"Device::parse"});
  if (!cuda::is_available()) {
    CHECK(Device::best() == Device::cpu());
    CHECK_FALSE(cuda::unavailable_reason().empty());
    check_error([] { zeros({2}, {DType::Float32, Device::cuda(0)}); }, {"cuda:0", cuda::unavailable_reason()});
  }
}

TEST_CASE("printing shows values, shape and dtype") {
  std::ostringstream out;
  out << from_vector<int64_t>({1, 2, 3, 4}, {2, 2});
  CHECK(out.str().find("[[1, 2]") != std::string::npos);
  CHECK(out.str().find("shape=(2, 2)") != std::string::npos);
  CHECK(out.str().find("dtype=int64") != std::string::npos);
  std::ostringstream big;
  big << zeros({1000});
  CHECK(big.str().find("...") != std::string::npos);
  CHECK(big.str().size() < 200);
  std::ostringstream undefined;
  undefined << Tensor();
  CHECK(undefined.str() == "tensor(undefined)");
}

TEST_CASE("an undefined tensor is reported, not dereferenced") {
  const Tensor t;
  CHECK_FALSE(t.defined());
  check_error([&] { (void)t.shape(); }, {"undefined tensor"});
  check_error([&] { exp(t); }, {"exp", "undefined"});
}

TEST_CASE("memory statistics follow allocations") {
  Allocator& alloc = context(Device::cpu()).allocator();
  alloc.empty_cache();  // so that the block is exactly its size, not a cached one up to 1/8 larger
  const int64_t before = alloc.stats().in_use;
  {
    const Tensor big = empty({1 << 20}, {DType::Float64});
    CHECK(alloc.stats().in_use - before == 8 << 20);
    CHECK(alloc.stats().peak >= before + (8 << 20));
  }
  CHECK(alloc.stats().in_use == before);
  alloc.reset_peak();
  CHECK(alloc.stats().peak == before);
}

TEST_CASE("the CPU allocator hands a freed block out again instead of asking the system") {
#ifdef __SANITIZE_ADDRESS__
  MESSAGE("skipped: under AddressSanitizer the CPU allocator caches nothing (core/device.cpp)");
#else
  Allocator& alloc = context(Device::cpu()).allocator();
  alloc.empty_cache();  // so that the block freed below is the only one of its size in the cache
  const void* first = nullptr;
  {
    const Tensor a = empty({3 << 20}, {DType::Float32});  // 12 MiB: far above glibc's own caching
    first = a.raw_data();
  }
  const MemoryStats cached = alloc.stats();
  CHECK(cached.reserved - cached.in_use >= (12 << 20));
  {
    const Tensor b = empty({3 << 20}, {DType::Float32});
    CHECK(b.raw_data() == first);
    CHECK(alloc.stats().allocations == cached.allocations);
  }
  alloc.empty_cache();
  const MemoryStats emptied = alloc.stats();
  CHECK(emptied.reserved == emptied.in_use);
  CHECK(reinterpret_cast<std::uintptr_t>(first) % 64 == 0);
#endif
}

TEST_CASE("arange in every dtype: the same values, exact integers, and bool or unrepresentable ranges refused") {
  CHECK(arange(-2.0, 3.0, 2.0, {DType::Int32}).to_vector<int32_t>() == std::vector<int32_t>{-2, 0, 2});
  CHECK(arange(5.0, 0.0, -2.0, {DType::Int64}).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});
  CHECK(arange(0.0, 1.0, 0.25, {DType::Float32}).to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f});
  CHECK(arange(-1.0, 0.5, 0.5, {DType::Float64}).to_vector<double>() == std::vector<double>{-1, -0.5, 0});
  // The ends of int32, and int64 up to 2^53, where doubles still count by one.
  const double k31 = 2147483648.0, k53 = 9007199254740992.0;
  CHECK(arange(k31 - 2, k31, 1.0, {DType::Int32}).to_vector<int32_t>() == std::vector<int32_t>{2147483646, 2147483647});
  CHECK(arange(-k31, -k31 + 1, 1.0, {DType::Int32}).to_vector<int32_t>() == std::vector<int32_t>{-2147483647 - 1});
  CHECK(arange(k53 - 2, k53, 1.0, {DType::Int64}).to_vector<int64_t>() ==
        std::vector<int64_t>{9007199254740990, 9007199254740991});
  CHECK(arange(k53 - 4, k53 + 2, 2.0, {DType::Int64}).to_vector<int64_t>() ==
        std::vector<int64_t>{9007199254740988, 9007199254740990, 9007199254740992});
  check_error([] { arange(0.0, 3.0, 1.0, {DType::Bool}); }, {"arange", "bool"});
  check_error([] { arange(0.0, 2.0, 0.5, {DType::Int64}); }, {"arange", "int64", "whole start and step", "step=0.5"});
  check_error([] { arange(0.5, 2.0, 1.0, {DType::Int32}); }, {"arange", "int32", "whole start", "start=0.5"});
  check_error([&] { arange(k31 - 1, k31 + 1, 1.0, {DType::Int32}); }, {"arange", "does not fit in int32"});
  check_error([&] { arange(k53, k53 + 3, 1.0, {DType::Int64}); }, {"arange", "does not fit in int64"});
  // An empty range needs no check.
  CHECK(arange(0.5, 0.5, 1.0, {DType::Int32}).numel() == 0);
}
