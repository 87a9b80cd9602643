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
