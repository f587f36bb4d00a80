// epo run on one GPU with virtual ranks, small shapes: --check passes for both dispatchers,
// overlap off and on, delayed wgrad; the measurement has every op of every measured step.
#include "catch.hpp"
#include "executor/run.hpp"
#include "fixtures.hpp"
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

TEST_CASE("out of memory names the sizes and the settings to reduce") {
  model::Config cfg = test::tiny_config(2, true, false, "alltoall", false, 1 << 22);
  try {
    exec::run_plan(cfg, exec::RunOptions{});
    FAIL("a 4M-token micro-batch on every rank should not fit");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(m.find("out of device memory") != std::string::npos);
    CHECK(m.find("asked") != std::string::npos);
    CHECK(m.find("free") != std::string::npos);
    CHECK(m.find("--seq") != std::string::npos);
  }
}
