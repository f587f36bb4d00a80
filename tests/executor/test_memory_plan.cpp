// The executor's memory plan: the layout RankState allocates and `epo run --dry-run` prints.
#include <algorithm>
#include <map>
#include <set>

#include "catch.hpp"
#include "executor/run_layout.hpp"
#include "fixtures.hpp"
#include "model/error.hpp"

using namespace epo;
using exec::Buf;
using exec::MemClass;

namespace {

model::Config preset_run(const std::string& model, int ranks, int seq, bool overlap,
                         bool delay_wgrad, const std::string& dispatcher = "alltoall") {
  nlohmann::json j = {
      {"schema_version", 1},
      {"model", model},
      {"hardware", "h200-sxm"},
      {"gpus", ranks},
      {"virtual_ranks", ranks},
      {"parallel",
       {{"ep", ranks}, {"micro_batch_size", 1}, {"global_batch_size", 2 * ranks},
        {"seq_length", seq}}},
      {"options",
       {{"dispatcher", dispatcher},
        {"overlap_moe_expert_parallel_comm", overlap},
        {"delay_wgrad_compute", delay_wgrad}}}};
  model::Config c = model::config_from_json(j, "test config");
  c.derive_and_check();
  return exec::with_moe_layers(c, 1);
}

exec::RankMemoryPlan plan_of(const model::Config& cfg, int rank = 0) {
  const exec::RunLayout lay = exec::plan_run(cfg);
  return exec::plan_rank_memory(cfg, lay.sh, exec::rank_setup(lay, rank, 0, false));
}

}  // namespace

TEST_CASE("memory plan: allocations are aligned, disjoint and add up to the allocation") {
  for (const std::string d : {"alltoall", "flex"})
    for (bool delay : {false, true}) {
      const model::Config cfg = test::tiny_config(4, true, delay, d);
      const auto p = plan_of(cfg, 1);
      std::int64_t end = 0, sum = 0;
      std::array<std::int64_t, exec::kNumMemClasses> by_class{};
      for (const auto& a : p.allocations) {
        CHECK(a.offset % 256 == 0);
        CHECK(a.offset >= end);  // laid out in order, never overlapping
        end = a.offset + a.bytes;
        sum += a.bytes;
        by_class[static_cast<int>(a.cls)] += a.bytes;
      }
      CHECK(p.total_bytes == end);
      CHECK(by_class == p.class_bytes);
      std::int64_t classes = 0;
      for (auto b : p.class_bytes) classes += b;
      CHECK(classes == sum);
      for (const auto& b : p.bindings) {
        REQUIRE(b.allocation >= 0);
        REQUIRE(b.allocation < static_cast<int>(p.allocations.size()));
      }
    }
}

TEST_CASE("memory plan: slots keep what the backward reads, scratch what one op uses itself") {
  for (bool delay : {false, true}) {
    const model::Config cfg = test::tiny_config(4, true, delay);
    const exec::RunLayout lay = exec::plan_run(cfg);
    REQUIRE(lay.slots >= 2);
    const auto p = exec::plan_rank_memory(cfg, lay.sh, exec::rank_setup(lay, 0, 0, false));
    const int layer = lay.sh.num_layers - 1;  // a MoE layer of tiny
    auto same = [&](Buf id) { return &p.at(id, 0, layer) == &p.at(id, 1, layer); };
    // Kept per slot: the attention input, the expert inputs, fc1 and activation outputs, the
    // received rows.
    for (Buf id : {Buf::qkv, Buf::h, Buf::y, Buf::x_perm, Buf::fc1, Buf::act, Buf::x_recv,
                   Buf::x_send, Buf::moe_out, Buf::topk_idx})
      CHECK_FALSE(same(id));
    // Written and read inside one op: shared by the slots.
    for (Buf id : {Buf::logits, Buf::d_act, Buf::d_xperm, Buf::d_s_act}) {
      CHECK(same(id));
      CHECK(p.at(id, 0, layer).cls == MemClass::scratch);
    }
    // The output gradients the wgrad reads stay per slot only when the wgrad is delayed.
    for (Buf id : {Buf::y_perm, Buf::d_fc1, Buf::dh, Buf::d_qkv}) CHECK(same(id) == !delay);
    // The send rows and the returned rows are never alive together: one buffer.
    CHECK(&p.at(Buf::x_send, 0, layer) == &p.at(Buf::y_recv, 0, layer));
    CHECK(&p.at(Buf::x_send, 0, layer) != &p.at(Buf::x_send, 1, layer));
  }
}

TEST_CASE("memory plan: expert-row capacity follows the routing") {
  const model::Config cfg = test::tiny_config(4, false, false, "alltoall", false, 4096);
  const exec::RunLayout lay = exec::plan_run(cfg);
  const auto& sh = lay.sh;
  const std::int64_t mean = static_cast<std::int64_t>(sh.tokens) * sh.topk;
  const std::int64_t pad = static_cast<std::int64_t>(sh.local_experts) * (exec::kExpertRowAlign - 1);
  // The single-rank reference holds every rank's tokens and receives exactly their rows.
  const auto ref = exec::plan_rank_memory(cfg, sh, exec::reference_setup(lay));
  CHECK(ref.capacity_rows == mean * lay.ranks + static_cast<std::int64_t>(sh.num_experts) *
                                                    (exec::kExpertRowAlign - 1));
  const auto uniform = exec::expert_capacity_rows(cfg, sh, exec::rank_setup(lay, 0, 0, false));
  CHECK(uniform >= mean + pad);
  // Never more rows than every token sending one copy to each of the rank's experts.
  CHECK(uniform <= static_cast<std::int64_t>(lay.ranks) * sh.tokens *
                           std::min(sh.topk, sh.local_experts) + pad);
  model::Config skewed = cfg;
  skewed.opt.routing.kind = model::RoutingKind::skewed;
  skewed.opt.routing.skew = 1.2;
  CHECK(exec::expert_capacity_rows(skewed, sh, exec::rank_setup(lay, 0, 0, false)) > uniform);
}

TEST_CASE("memory plan: the whole run on one GPU sums its virtual ranks") {
  const model::Config cfg = test::tiny_config(4, true, true);
  const exec::RunLayout lay = exec::plan_run(cfg);
  const auto m = exec::run_memory(cfg, lay, true);
  REQUIRE(m.ranks.size() == 4u);
  std::int64_t sum = 0;
  for (const auto& r : m.ranks) sum += r.total_bytes;
  CHECK(m.device_bytes == sum + m.reserve_bytes);
  CHECK(m.reference_bytes > 0);
  CHECK(m.ranks[0].class_bytes[static_cast<int>(MemClass::check)] > 0);  // --check keeps outputs
}

TEST_CASE("memory plan: one MoE layer of every preset, two micro-batches of 4096 tokens on 8 "
          "virtual ranks, fits one H200") {
  for (const std::string m : {"deepseek-v3", "kimi-k2", "qwen3-235b-a22b", "qwen3-30b-a3b",
                              "qwen2-57b-a14b", "mixtral-8x22b", "mixtral-8x7b", "gpt-oss-120b",
                              "moonlight-16b-a3b"})
    for (bool overlap : {false, true}) {
      INFO(m << " overlap " << overlap);
      const model::Config cfg = preset_run(m, 8, 4096, overlap, overlap);
      const auto mem = exec::run_memory(cfg, exec::plan_run(cfg), false);
      CHECK(static_cast<double>(mem.device_bytes) <= cfg.hw.hbm_bytes);
    }
  const model::Config oss = preset_run("gpt-oss-120b", 4, 8192, true, true);
  CHECK(static_cast<double>(exec::run_memory(oss, exec::plan_run(oss), false).device_bytes) <=
        oss.hw.hbm_bytes);
}

TEST_CASE("memory plan: a run that does not fit is offered smaller runs that do") {
  model::Config big = preset_run("deepseek-v3", 8, 4096, true, true);
  big.model.num_layers = 4;
  big.derive_and_check();
  const auto capacity = static_cast<std::int64_t>(big.hw.hbm_bytes);
  exec::RunOptions opt;
  REQUIRE(exec::run_memory(big, exec::plan_run(big), false).device_bytes > capacity);
  const auto smaller = exec::runs_that_fit(big, opt, capacity);
  REQUIRE_FALSE(smaller.empty());
  CHECK(smaller.front().find("--layers ") != std::string::npos);
  // One layer whose activations do not fit: shorter sequences do.
  const model::Config longer = preset_run("deepseek-v3", 8, 16384, true, true);
  REQUIRE(exec::run_memory(longer, exec::plan_run(longer), false).device_bytes > capacity);
  bool seq = false;
  for (const auto& s : exec::runs_that_fit(longer, opt, capacity))
    seq = seq || s.find("--seq ") != std::string::npos;
  CHECK(seq);
}

TEST_CASE("a run is refused before allocating when its plan exceeds the free memory") {
  const model::Config cfg = preset_run("deepseek-v3", 8, 4096, true, true);
  const exec::RunLayout lay = exec::plan_run(cfg);
  const exec::RunOptions opt;
  const auto need = exec::run_memory(cfg, lay, false).device_bytes;
  CHECK_NOTHROW(exec::require_fits(cfg, lay, opt, need, need));
  try {
    exec::require_fits(cfg, lay, opt, need / 2, need);
    FAIL("half the memory it needs should be refused");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK(e.kind() == ErrorKind::input);
    CHECK(m.find("needs") != std::string::npos);
    CHECK(m.find("--dry-run") != std::string::npos);
    CHECK(m.find("these fit") != std::string::npos);
  }
}
