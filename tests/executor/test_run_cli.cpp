// epo run at the command line: plans it cannot run are rejected before any GPU is touched.
#include "../cli/run_epo.hpp"
#include "catch.hpp"

using epo::test::run_epo;

TEST_CASE("epo run rejects layouts it cannot execute, naming the setting") {
  const auto tp = run_epo("run --model tiny --virtual-ranks 4 --tp 2 --iters 1");
  CHECK(tp.exit_code == 2);
  CHECK(tp.output.find("--tp 1") != std::string::npos);
  const auto layers = run_epo("run --model tiny --virtual-ranks 4 --layers 9");
  CHECK(layers.exit_code == 2);
  CHECK(layers.output.find("--layers") != std::string::npos);
  const auto iters = run_epo("run --model tiny --virtual-ranks 4 --iters 0");
  CHECK(iters.exit_code == 2);
  CHECK(iters.output.find("--iters") != std::string::npos);
}
