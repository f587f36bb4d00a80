// epo run on one GPU with virtual ranks, small shapes: --check passes for both dispatchers,
// overlap off and on, delayed wgrad; the measurement has every op of every measured step; skewed
// routing's draws follow the expert weights.
#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "catch.hpp"
#include "executor/exec_kernels.hpp"
#include "executor/run.hpp"
#include "fixtures.hpp"
#include "kernels/launchers.hpp"
#include "model/error.hpp"
#include "model/schedule.hpp"

using namespace epo;

namespace {

void run_and_check(const model::Config& cfg) {
  exec::RunOptions opt;
  opt.iters = 2;
  opt.warmup = 1;
  opt.check = true;
  const exec::RunResult r = exec::run_plan(cfg, opt);
  for (const auto& f : r.check.failures) UNSCOPED_INFO(f);
  CHECK(r.check.ran);
  CHECK(r.check.schedules_bit_identical);
  CHECK(r.check.max_output_error <= r.check.output_tolerance);
  CHECK(r.check.max_grad_error <= r.check.grad_tolerance);
  CHECK(r.check.passed);
  const bool overlap = cfg.opt.overlap_moe_expert_parallel_comm;
  const auto sched = model::build_schedule(cfg, 0, overlap);
  const std::size_t per_step = sched.ops.size() * static_cast<std::size_t>(cfg.par.ep);
  const std::size_t base_ops = model::build_schedule(cfg, 0, false).ops.size() * cfg.par.ep;
  CHECK(r.measurement["ops"].size() == opt.iters * (per_step + (overlap ? base_ops : 0)));
  const auto& s = r.measurement["summary"];
  CHECK(s["step_time_us"].get<double>() > 0);
  CHECK(s["peak_memory_bytes"].size() == static_cast<std::size_t>(cfg.par.ep));
  for (const auto& op : r.measurement["ops"]) CHECK(op["end_us"].get<double>() >= op["start_us"].get<double>());
  CHECK(r.trace_json.find("traceEvents") != std::string::npos);
}

}  // namespace

TEST_CASE("virtual ranks, alltoall: check passes with overlap off, on, and delayed wgrad") {
  for (int ranks : {2, 4}) {
    INFO(ranks << " virtual ranks");
    run_and_check(test::tiny_config(ranks, false, false, "alltoall"));
    run_and_check(test::tiny_config(ranks, true, false, "alltoall"));
    run_and_check(test::tiny_config(ranks, true, true, "alltoall"));
  }
}

TEST_CASE("virtual ranks, flex: check passes with overlap off, on, and delayed wgrad") {
  for (int ranks : {2, 4}) {
    INFO(ranks << " virtual ranks");
    run_and_check(test::tiny_config(ranks, false, false, "flex"));
    run_and_check(test::tiny_config(ranks, true, false, "flex"));
    run_and_check(test::tiny_config(ranks, true, true, "flex"));
  }
}

TEST_CASE("balanced and skewed routing run and check") {
  run_and_check(test::tiny_config(4, true, false, "alltoall", false, 128, "balanced"));
  model::Config skewed = test::tiny_config(4, true, true, "flex", false, 128, "skewed");
  skewed.opt.routing.skew = 0.5;
  run_and_check(skewed);
}

TEST_CASE("a run larger than the GPU is refused before allocating, with runs that fit") {
  model::Config cfg = test::tiny_config(2, true, false, "alltoall", false, 1 << 22);
  std::size_t free_before = 0, total = 0;
  REQUIRE(cudaMemGetInfo(&free_before, &total) == cudaSuccess);
  try {
    exec::run_plan(cfg, exec::RunOptions{});
    FAIL("a 4M-token micro-batch on every rank should not fit");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(e.kind() == ErrorKind::input);
    CHECK(m.find("needs") != std::string::npos);
    CHECK(m.find("free") != std::string::npos);
    CHECK(m.find("--dry-run") != std::string::npos);
    CHECK(m.find("--seq") != std::string::npos);  // a shorter sequence that fits
  }
  std::size_t free_after = 0;
  REQUIRE(cudaMemGetInfo(&free_after, &total) == cudaSuccess);
  CHECK(free_after + (64u << 20) >= free_before);  // nothing of the run was left allocated
}

TEST_CASE("skewed routing draws experts in proportion to their weights") {
  // Top-1 of log weight + Gumbel noise picks expert e with probability w_e / sum(w) exactly.
  const int T = 1 << 18, E = 16;
  std::vector<float> logw(E);
  double sum = 0;
  for (int e = 0; e < E; ++e) sum += std::exp(logw[e] = -0.3f * static_cast<float>((e * 7) % E));
  float *logits = nullptr, *dlogw = nullptr, *w = nullptr;
  int* idx = nullptr;
  REQUIRE(cudaMalloc(&logits, sizeof(float) * T * E) == cudaSuccess);
  REQUIRE(cudaMalloc(&dlogw, sizeof(float) * E) == cudaSuccess);
  REQUIRE(cudaMalloc(&w, sizeof(float) * T * 2) == cudaSuccess);
  REQUIRE(cudaMalloc(&idx, sizeof(int) * T * 2) == cudaSuccess);
  REQUIRE(cudaMemcpy(dlogw, logw.data(), sizeof(float) * E, cudaMemcpyHostToDevice) == cudaSuccess);
  for (int k : {1, 2}) {
    INFO("top-" << k);
    exec::launch_skewed_logits(logits, T, E, dlogw, 1234u + k, nullptr);
    kernels::launch_routing(logits, nullptr, T, E, k, 1, 1, kernels::ScoreFunction::kSoftmax,
                            k > 1, 1.0f, idx, w, nullptr);
    std::vector<int> h(static_cast<std::size_t>(T) * k);
    REQUIRE(cudaMemcpy(h.data(), idx, sizeof(int) * h.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<double> freq(E, 0.0);
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < k; ++j) {
        REQUIRE(h[t * k + j] >= 0);
        REQUIRE(h[t * k + j] < E);
        freq[h[t * k + j]] += 1.0 / T;
      }
      if (k == 2) CHECK(h[t * 2] != h[t * 2 + 1]);  // distinct experts per token
    }
    for (int e = 0; e < E; ++e) {
      const double p = std::exp(logw[e]) / sum;
      if (k == 1) CHECK(freq[e] == Approx(p).margin(5.0 * std::sqrt(p * (1 - p) / T)));
      else CHECK(freq[e] >= p);  // without replacement: every expert gains from a second pick
    }
  }
  cudaFree(logits);
  cudaFree(dlogw);
  cudaFree(w);
  cudaFree(idx);
}
