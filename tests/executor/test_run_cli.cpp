// epo run at the command line: plans it cannot run are rejected before any GPU is touched.
#include <cstdint>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

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

TEST_CASE("epo run --dry-run prints each rank's memory by class without a GPU") {
  const auto r = run_epo("run --model deepseek-v3 --hardware h200-sxm --gpus 8 --virtual-ranks 8 "
                         "--ep 8 --moe-layers 1 --seq 4096 --mbs 1 --gbs 16 --overlap --dry-run");
  CHECK(r.exit_code == 0);
  for (const char* what : {"weights", "gradients", "activations", "capacity", "transport",
                           "scratch", "workspace", "cublas", "2 micro-batches of 4096 tokens",
                           "fits"})
    CHECK(r.output.find(what) != std::string::npos);
  const auto big = run_epo("run --model deepseek-v3 --hardware h200-sxm --gpus 8 "
                           "--virtual-ranks 8 --ep 8 --moe-layers 8 --seq 4096 --mbs 1 --gbs 16 "
                           "--dry-run");
  CHECK(big.exit_code == 0);
  CHECK(big.output.find("does NOT fit") != std::string::npos);
  CHECK(big.output.find("--layers") != std::string::npos);
  const auto both = run_epo("run --model tiny --virtual-ranks 4 --layers 1 --moe-layers 1 "
                            "--dry-run");
  CHECK(both.exit_code == 2);
}

TEST_CASE("epo run --dry-run --json writes each rank's plan") {
  const std::string path = "dry_run_plan_test.json";
  std::remove(path.c_str());
  const auto r = run_epo("run --model tiny --hardware h200-sxm --gpus 4 --virtual-ranks 4 --ep 4 "
                         "--seq 512 --gbs 8 --dispatcher flex --dry-run --json " + path);
  REQUIRE(r.exit_code == 0);
  std::ifstream in(path);
  REQUIRE(in.good());
  const auto j = nlohmann::json::parse(in);
  CHECK(j["kind"] == "run_memory_plan");
  REQUIRE(j["rank_plans"].size() == 4u);
  std::int64_t sum = 0;
  for (const auto& p : j["rank_plans"]) sum += p["total_bytes"].get<std::int64_t>();
  CHECK(j["device_bytes"].get<std::int64_t>() == sum + j["reserve_bytes"].get<std::int64_t>());
  CHECK(j["fits"] == true);
  std::remove(path.c_str());
}
