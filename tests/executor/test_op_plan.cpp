// The runner's view of a schedule: shapes, slots, and that the schedule's waits deliver every
// input each op reads (checked against the schedule builder).
#include <algorithm>
#include <cmath>

#include "catch.hpp"
#include "executor/host_affinity.hpp"
#include "executor/op_plan.hpp"
#include "executor/run.hpp"
#include "fixtures.hpp"
#include "model/cost.hpp"
#include "model/routing_stats.hpp"
#include "model/error.hpp"

using namespace epo;

TEST_CASE("schedules of every option combination are safe for the runner") {
  for (bool overlap : {false, true})
    for (bool delay : {false, true}) {
      if (delay && !overlap) continue;  // Megatron requires overlap for delayed wgrad
      for (const char* d : {"alltoall", "flex"}) {
        const model::Config cfg = test::tiny_config(4, overlap, delay, d);
        for (bool ov : {false, true}) {
          const model::Schedule s = model::build_schedule(cfg, 0, ov);
          const int slots = exec::activation_slots(s);
          // dp = 4: the gradient reduce ops are there and checked against their producers.
          CHECK(std::count_if(s.ops.begin(), s.ops.end(), [](const model::ScheduleOp& op) {
                  return op.kind == model::OpKind::dp_grad_reduce;
                }) > 0);
          INFO("overlap " << overlap << " delay " << delay << " schedule " << ov);
          CHECK(exec::verify_schedule_for_runner(s, slots).empty());
        }
      }
    }
}

TEST_CASE("activation slots: one micro-batch alive in the baseline, two when overlapped") {
  const model::Config cfg = test::tiny_config(4, true, false);
  // Baseline (PP=1): forward then backward of each micro-batch; overlapped: the forward of
  // mb i+1 runs beside the backward of mb i.
  CHECK(exec::activation_slots(model::build_schedule(cfg, 0, false)) == 1);
  CHECK(exec::activation_slots(model::build_schedule(cfg, 0, true)) == 2);
}

TEST_CASE("the check finds an op that could start before its input") {
  const model::Config cfg = test::tiny_config(2, true, false);
  model::Schedule s = model::build_schedule(cfg, 0, true);
  // Cut the event wait of the first forward mlp (its input comes from the comm stream).
  bool cut = false;
  for (auto& op : s.ops)
    if (!cut && op.kind == model::OpKind::mlp && op.dir == model::Direction::forward) {
      for (int w = 0; w < op.num_waits; ++w)
        if (s.ops[op.waits[w]].lane == model::Lane::comm) {
          op.waits[w] = op.waits[op.num_waits - 1];
          --op.num_waits;
          cut = true;
          break;
        }
    }
  REQUIRE(cut);
  const auto errors = exec::verify_schedule_for_runner(s, 2);
  REQUIRE_FALSE(errors.empty());
  CHECK(errors.front().find("mlp.fwd") != std::string::npos);
}

TEST_CASE("the check finds a slot reused too early") {
  const model::Config cfg = test::tiny_config(2, true, false);
  const model::Schedule s = model::build_schedule(cfg, 0, true);
  // Two micro-batches are alive at once; one slot per layer would overwrite live activations.
  CHECK_FALSE(exec::verify_schedule_for_runner(s, 1).empty());
}

TEST_CASE("alltoall splits from per-expert counts") {
  // 2 ranks, 4 experts (2 per rank). counts[src][e]: rank 0 sends 1,2 to experts 0,1 (rank 0)
  // and 3,4 to experts 2,3 (rank 1); rank 1 sends 5,6 | 7,8.
  const std::vector<int> counts = {1, 2, 3, 4, 5, 6, 7, 8};
  const exec::Splits s1 = exec::alltoall_splits(counts, 2, 4, 1);
  CHECK(s1.send_rows == std::vector<std::int64_t>{11, 15});   // 5+6, 7+8
  CHECK(s1.send_off == std::vector<std::int64_t>{0, 11});
  CHECK(s1.recv_rows == std::vector<std::int64_t>{7, 15});    // 3+4 from rank 0, 7+8 from 1
  CHECK(s1.recv_off == std::vector<std::int64_t>{0, 7});
  CHECK(s1.loc_rows == std::vector<int>{10, 12});             // expert 2: 3+7, expert 3: 4+8
  CHECK(s1.loc_off == std::vector<std::int64_t>{0, 10});
  CHECK(s1.total_recv == 22);
  CHECK(s1.padded_rows == 22);
  // Expert segments padded to 4 rows: 10 -> 12, 12 -> 12.
  const exec::Splits p = exec::alltoall_splits(counts, 2, 4, 1, 4);
  CHECK(p.loc_off == std::vector<std::int64_t>{0, 12});
  CHECK(p.padded_rows == 24);
  CHECK(p.total_recv == 22);
  CHECK(p.recv_off == s1.recv_off);  // the exchange itself is not padded
  const exec::Splits f = exec::flex_splits({3, 0, 5}, 4);
  CHECK(f.loc_off == std::vector<std::int64_t>{0, 4, 4});
  CHECK(f.padded_rows == 12);
  CHECK(f.total_recv == 8);
  CHECK_THROWS_AS(exec::alltoall_splits(counts, 2, 4, 2), Error);
}

TEST_CASE("run shape of Qwen3-30B-A3B layers on 8 virtual ranks") {
  nlohmann::json j = {{"schema_version", 1}, {"model", "qwen3-30b-a3b"}, {"hardware", "h200-sxm"},
                      {"gpus", 8}, {"virtual_ranks", 8},
                      {"parallel", {{"ep", 8}, {"global_batch_size", 32}, {"seq_length", 2048}}}};
  model::Config full = model::config_from_json(j, "qwen");
  full.derive_and_check();
  const model::Config cfg = exec::with_layers(full, 2);
  const exec::RunShape s = exec::run_shape(cfg);
  CHECK(s.num_layers == 2);
  CHECK(s.tokens == 2048);
  CHECK(s.local_experts == 128 / 8);
  CHECK(s.qkv_dim == (32 + 2 * 4) * 128);  // GQA: 32 query heads, 4 KV groups of 128
  CHECK(s.ctx_dim == 32 * 128);
  CHECK(s.num_microbatches == 4);          // gbs 32 / (mbs 1 * dp 8)
  CHECK_NOTHROW(exec::check_runnable(cfg, exec::RunOptions{}));
}

TEST_CASE("plans the executor cannot run are input errors naming the setting") {
  model::Config cfg = test::tiny_config(4, true, false);
  auto message = [](const model::Config& c) {
    try {
      exec::check_runnable(c, exec::RunOptions{});
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::input);
      return std::string(e.what());
    }
    return std::string();
  };
  model::Config a = cfg;
  a.opt.dispatcher = model::Dispatcher::allgather;
  CHECK(message(a).find("allgather") != std::string::npos);
  model::Config b = cfg;
  b.opt.precision = model::Precision::fp8;
  CHECK(message(b).find("fp8") != std::string::npos);
  CHECK_THROWS_AS(exec::with_layers(cfg, 99), Error);
  exec::RunOptions bad;
  bad.iters = 0;
  CHECK_THROWS_AS(exec::check_runnable(cfg, bad), Error);
}

TEST_CASE("expert GEMM path: automatic follows the rows per expert, the weight and GPU sharing") {
  exec::Splits few, many;
  few.loc_rows = {100, 0, 300, 200};  // mean 150 rows
  const int big = static_cast<int>(model::kGroupedLaunchMaxRowsPerExpert);
  many.loc_rows = {big, big, big + 64, big - 64};  // mean exactly at the threshold
  const double qwen3_fc1 = 2048.0 * 1536, dsv3_fc1 = 7168.0 * 4096;
  const auto automatic = exec::ExpertGemm::automatic;
  CHECK(exec::resolve_expert_gemm(automatic, few, qwen3_fc1, false) == exec::ExpertGemm::grouped);
  CHECK(exec::resolve_expert_gemm(automatic, few, dsv3_fc1, true) == exec::ExpertGemm::grouped);
  // Enough rows: a small weight on a GPU of its own goes to four streams; a large weight, or a
  // GPU shared by virtual ranks, one GEMM per expert.
  CHECK(exec::resolve_expert_gemm(automatic, many, qwen3_fc1, false) == exec::ExpertGemm::streams);
  CHECK(exec::resolve_expert_gemm(automatic, many, qwen3_fc1, true) ==
        exec::ExpertGemm::per_expert);
  CHECK(exec::resolve_expert_gemm(automatic, many, dsv3_fc1, false) ==
        exec::ExpertGemm::per_expert);
  CHECK(exec::resolve_expert_gemm(automatic, many, model::kStreamsMaxWeightElems, false) ==
        exec::ExpertGemm::streams);
  CHECK(exec::resolve_expert_gemm(automatic, many, model::kStreamsMaxWeightElems + 1, false) ==
        exec::ExpertGemm::per_expert);
  // An explicit choice is kept whatever the rows.
  CHECK(exec::resolve_expert_gemm(exec::ExpertGemm::streams, few, dsv3_fc1, true) ==
        exec::ExpertGemm::streams);
  CHECK(exec::resolve_expert_gemm(exec::ExpertGemm::per_expert, few, qwen3_fc1, false) ==
        exec::ExpertGemm::per_expert);
  for (auto g : {exec::ExpertGemm::automatic, exec::ExpertGemm::per_expert,
                 exec::ExpertGemm::grouped, exec::ExpertGemm::streams})
    CHECK(model::parse_expert_gemm(model::to_string(g), "test") == g);
  CHECK_THROWS_AS(model::parse_expert_gemm("cutlass", "--expert-gemm"), Error);
}

TEST_CASE("epo run's expert-GEMM note names the path and, under auto, why") {
  auto contains = [](const std::string& s, const char* part) {
    return s.find(part) != std::string::npos;
  };
  // tiny (fc1 weight 256 x 256) on 2 GPUs: 128 tokens give 64 rows per expert, 2048 give 1024.
  const auto few = exec::expert_gemm_note(test::tiny_config(2, false, false, "alltoall", true,
                                                            128, "balanced"));
  CHECK(contains(few, "expert GEMMs: grouped (auto: under 512 rows"));
  auto cfg = test::tiny_config(2, false, false, "alltoall", true, 2048, "balanced");
  const auto many = exec::expert_gemm_note(cfg);
  CHECK(contains(many, "expert GEMMs: streams (auto: 512 or more rows"));
  CHECK(contains(many, "a GPU per rank"));
  const auto shared = exec::expert_gemm_note(
      test::tiny_config(2, false, false, "alltoall", false, 2048, "balanced"));
  CHECK(contains(shared, "expert GEMMs: per-expert (auto:"));
  CHECK(contains(shared, "virtual ranks sharing the GPU"));
  cfg.opt.expert_gemm = model::ExpertGemm::grouped;
  CHECK(exec::expert_gemm_note(cfg) == "expert GEMMs: grouped (--expert-gemm)");
}

TEST_CASE("CPU lists of the GPU's local CPUs are read and written as Linux writes them") {
  CHECK(exec::parse_cpu_list("0-3,8,10-11\n", "t") == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(exec::parse_cpu_list("5", "t") == std::vector<int>{5});
  CHECK(exec::parse_cpu_list("", "t").empty());
  CHECK(exec::parse_cpu_list("4-5,0-1,5", "t") == std::vector<int>{0, 1, 4, 5});
  CHECK(exec::format_cpu_list({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11");
  CHECK(exec::format_cpu_list({}).empty());
  CHECK_THROWS_AS(exec::parse_cpu_list("3-1", "t"), Error);
  CHECK_THROWS_AS(exec::parse_cpu_list("a-b", "t"), Error);
}

TEST_CASE("skewed routing's log weights follow the cost model's expert popularity") {
  model::Config cfg = test::tiny_config(4, false, false, "alltoall");
  const int E = cfg.model.num_experts;
  CHECK(exec::skew_log_weights(cfg, E) == std::vector<float>(E, 0.0f));  // not skewed
  cfg.opt.routing.kind = model::RoutingKind::skewed;
  cfg.opt.routing.skew = 1.2;
  const auto log_w = exec::skew_log_weights(cfg, E);
  const auto pop = model::expert_popularity(E, model::RoutingKind::skewed, 1.2, cfg.opt.routing.seed);
  REQUIRE(log_w.size() == pop.size());
  CHECK(*std::max_element(log_w.begin(), log_w.end()) == Approx(0.0f).margin(1e-6));
  for (int a = 0; a < E; ++a)
    for (int b = 0; b < E; ++b)
      if (pop[a] > pop[b] * 1.0001) CHECK(log_w[a] > log_w[b]);
  // exp(log_w) is the popularity relative to the top expert.
  const double top = *std::max_element(pop.begin(), pop.end());
  for (int e = 0; e < E; ++e) CHECK(std::exp(log_w[e]) == Approx(pop[e] / top).epsilon(1e-5));
}
