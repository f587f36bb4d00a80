// Summaries, the measurement document and the measured trace records, from hand-made records.
#include "catch.hpp"
#include "executor/measurement.hpp"

using namespace epo;
using model::Direction;
using model::Lane;
using model::OpKind;

namespace {

exec::OpRecord rec(int rank, int step, bool ov, OpKind k, Direction d, Lane lane, double s,
                   double e) {
  exec::OpRecord r;
  r.rank = rank;
  r.step = step;
  r.overlapped = ov;
  r.kind = k;
  r.dir = d;
  r.lane = lane;
  r.name = "x";
  r.microbatch = 0;
  r.layer = 0;
  r.start_us = s;
  r.end_us = e;
  return r;
}

// One step on two ranks: rank 0 computes [0,10) and communicates [8,14) -> 4 us exposed;
// rank 1 computes [1,5) and communicates [5,7) -> 2 us exposed.
std::vector<exec::OpRecord> two_rank_step(bool ov) {
  return {rec(0, 0, ov, OpKind::mlp, Direction::forward, Lane::compute, 0, 10),
          rec(0, 0, ov, OpKind::dispatch, Direction::forward, Lane::comm, 8, 14),
          rec(1, 0, ov, OpKind::mlp, Direction::forward, Lane::compute, 1, 5),
          rec(1, 0, ov, OpKind::dispatch, Direction::forward, Lane::comm, 5, 7)};
}

}  // namespace

TEST_CASE("summary: step span, exposed communication") {
  const auto r = two_rank_step(true);
  const exec::ScheduleSummary shared = exec::summarize(r, true, true);
  CHECK(shared.num_steps == 1);
  CHECK(shared.step_time_us == Approx(14.0));      // first start 0, last end 14 (one clock)
  CHECK(shared.exposed_comm_us == Approx(3.0));    // (4 + 2) / 2 ranks
  CHECK(shared.comm_busy_us == Approx(4.0));       // (6 + 2) / 2
  const exec::ScheduleSummary own = exec::summarize(r, true, false);
  CHECK(own.step_time_us == Approx(14.0));         // longest rank span: rank 0, 14; rank 1, 6
  CHECK(exec::summarize(r, false, true).num_steps == 0);
}

TEST_CASE("measurement document: keys, gain from the baseline, op means") {
  auto r = two_rank_step(true);
  // Baseline: same ops, all serial: rank 0 [0,10) then [10,16) -> 16 us, 6 us exposed.
  r.push_back(rec(0, 0, false, OpKind::mlp, Direction::forward, Lane::compute, 0, 10));
  r.push_back(rec(0, 0, false, OpKind::dispatch, Direction::forward, Lane::comm, 10, 16));
  exec::RunInfo info;
  info.virtual_ranks = 2;
  info.gpus = 1;
  info.layers = 1;
  info.iters = 1;
  info.warmup = 0;
  info.routing = "uniform";
  info.overlapped = true;
  info.shared_clock = true;
  info.peak_memory_bytes = {100, 200};
  info.device_used_bytes = {4096};
  const auto j = exec::measurement_json({{"gpu", "test"}}, {{"schema_version", 1}}, info, r);
  CHECK(j["schema_version"] == 1);
  CHECK(j["kind"] == "measurement");
  for (const char* k : {"context", "config", "run", "ops", "summary"}) CHECK(j.contains(k));
  for (const char* k : {"virtual_ranks", "gpus", "layers", "iters", "warmup", "routing",
                        "expert_gemm", "expert_gemm_path", "device_used_bytes"})
    CHECK(j["run"].contains(k));
  CHECK(j["run"].size() == 9);
  CHECK(j["run"]["device_used_bytes"][0] == 4096);
  const auto& s = j["summary"];
  CHECK(s["step_time_us"].get<double>() == Approx(14.0));
  CHECK(s["baseline_step_time_us"].get<double>() == Approx(16.0));
  CHECK(s["overlap_gain"].get<double>() == Approx(16.0 / 14.0 - 1.0));
  CHECK(s["exposed_comm_us"].get<double>() == Approx(3.0));
  CHECK(s["baseline_exposed_comm_us"].get<double>() == Approx(6.0));
  CHECK(s["peak_memory_bytes"] == nlohmann::json({100, 200}));
  CHECK(s["op_mean_us"]["mlp/forward"].get<double>() == Approx(7.0));       // (10 + 4) / 2
  CHECK(s["op_mean_us"]["dispatch/forward"].get<double>() == Approx(4.0));  // (6 + 2) / 2
  REQUIRE(j["ops"].size() == r.size());
  const auto& op = j["ops"][1];
  CHECK(op["schedule"] == "overlapped");
  CHECK(op["op"] == "dispatch");
  CHECK(op["direction"] == "forward");
  CHECK(op["stream"] == "comm");
  CHECK(op["start_us"].get<double>() == Approx(8.0));
}

TEST_CASE("measured trace records: pid offset, shifted to the step start") {
  auto r = two_rank_step(true);
  for (auto& x : r) x.start_us += 100, x.end_us += 100;
  const auto t = exec::measured_trace_records(r, true, 0, 4, true);
  REQUIRE(t.size() == 4);
  CHECK(t[0].rank == 4);
  CHECK(t[2].rank == 5);
  CHECK(t[0].start_ns == 0);
  CHECK(t[2].start_ns == 1000);  // rank 1 starts 1 us after rank 0 on the shared clock
  CHECK(t[1].lane == Lane::comm);
  const auto own = exec::measured_trace_records(r, true, 0, 0, false);
  CHECK(own[2].start_ns == 0);   // per-rank clocks: each rank's step starts at 0
}
