// The helpers of tests/testing.h that other tests rely on to fail: a command that crashes must not
// read as one that succeeded.

#include "tests/testing.h"

using namespace tapestry::testing;

TEST_CASE("testing: run_shell gives the exit status and the output; a crash never reads as 0") {
  TempDir dir;
  const auto [code, out, err] = run_shell(dir, "echo out; echo err >&2; exit 3");
  CHECK(code == 3);
  CHECK(out == "out\n");
  CHECK(err == "err\n");
  CHECK(std::get<0>(run_shell(dir, "true")) == 0);
  CHECK(std::get<0>(run_shell(dir, "sh -c 'kill -SEGV $$'")) == 128 + 11);  // a program the shell ran
  CHECK(std::get<0>(run_shell(dir, "kill -SEGV $$")) == -1);                // the shell itself
  CHECK(read_text(dir.file("missing")).empty());
}
