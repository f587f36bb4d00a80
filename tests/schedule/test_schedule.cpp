// Schedule structure: Megatron's warm-up counts and chunk table, the §3.4 issue order, delayed
// wgrad placement, dense/MTP layers, phase 0 / n+1 ops, pipeline links, activation counts.
#include <string>
#include <vector>

#include "catch.hpp"
#include "fixtures.hpp"
#include "model/fast_path.hpp"
#include "model/schedule.hpp"

using namespace epo::model;
using namespace epo::model::testing;

namespace {

/// Names of the layer ops of one layer step of one schedule step.
std::vector<std::string> layer_step_names(const Schedule& s, int step, int layer_step) {
  std::vector<std::string> out;
  for (int i = s.steps[step].first_op; i < s.steps[step].end_op; ++i) {
    const ScheduleOp& op = s.ops[i];
    if (op.layer_step == layer_step && op.lane != Lane::grad_reduce) out.push_back(op_name(op));
  }
  return out;
}

std::vector<std::string> step_names(const Schedule& s, int step) {
  std::vector<std::string> out;
  for (int i = s.steps[step].first_op; i < s.steps[step].end_op; ++i) {
    if (s.ops[i].lane != Lane::grad_reduce) out.push_back(op_name(s.ops[i]));
  }
  return out;
}

int index_of(const Schedule& s, int step, const std::string& name, int layer) {
  for (int i = s.steps[step].first_op; i < s.steps[step].end_op; ++i) {
    if (op_name(s.ops[i]) == name && s.ops[i].layer == layer) return i;
  }
  return -1;
}

bool waits_for(const ScheduleOp& op, int idx) {
  for (int w = 0; w < op.num_waits; ++w) {
    if (op.waits[w] == idx) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("warm-up micro-batches follow Megatron's get_pp_rank_microbatches", "[schedule]") {
  struct Row {
    int pp, vpp, m, rank, plain, overlap;
  };
  // Interleaved: (pp-rank-1)*2 + (vpp-1)*pp (+1 with overlap), capped at M*vpp; plain 1F1B
  // (vpp=1, overlap off): min(pp-rank-1, M); pp=1: 0, or 1 with overlap.
  const Row rows[] = {
      {1, 1, 8, 0, 0, 1},       // no pipelining: F0 alone with overlap
      {2, 2, 4, 0, 4, 5},       // 2*1 + 1*2 = 4
      {2, 2, 4, 1, 2, 3},       // 0 + 2
      {4, 2, 8, 0, 10, 11},     // 3*2 + 1*4
      {4, 2, 8, 3, 4, 5},       // 0 + 4
      {4, 2, 2, 0, 4, 4},       // 10 capped at M*vpp = 4
      {8, 4, 256, 0, 38, 39},   // 7*2 + 3*8
      {8, 4, 256, 7, 24, 25},   // 0 + 3*8
      {4, 1, 8, 0, 3, 7},       // plain 1F1B: pp-1; overlap uses the interleaved count 3*2+1
      {4, 1, 2, 1, 2, 5},       // plain min(2, M=2) = 2; overlap 2*2+1 = 5, capped at M*vpp = 2
  };
  for (const auto& r : rows) {
    INFO("pp " << r.pp << " vpp " << r.vpp << " M " << r.m << " rank " << r.rank);
    const int cap = r.m * r.vpp;
    CHECK(megatron_num_warmup(r.pp, r.vpp, r.m, r.rank, false, r.pp) == std::min(r.plain, cap));
    CHECK(megatron_num_warmup(r.pp, r.vpp, r.m, r.rank, true, r.pp) == std::min(r.overlap, cap));
    for (bool ov : {false, true}) {
      const Config cfg = make_config(r.pp * r.vpp, r.pp, r.vpp, r.m, ov);
      const Schedule s = build_schedule(cfg, r.rank, ov);
      const int w = std::min(ov ? r.overlap : r.plain, cap);
      CHECK(s.num_warmup == w);
      // Steps: warm-up F-only, then combined steps (or F and B apart), then B-only.
      CHECK(static_cast<int>(s.steps.size()) == (ov ? cap + w : 2 * cap));
      for (int k = 0; k < w; ++k) {
        CHECK(s.steps[k].f_microbatch >= 0);
        CHECK(s.steps[k].b_microbatch < 0);
      }
    }
  }
}

TEST_CASE("virtual micro-batches follow Megatron's schedule table", "[schedule]") {
  // pp 2 (group 2), vpp 2, M 4: mb 0,1 on chunk 0, mb 0,1 on chunk 1, then mb 2,3 likewise.
  const int mb[] = {0, 1, 0, 1, 2, 3, 2, 3};
  const int chunk[] = {0, 0, 1, 1, 0, 0, 1, 1};
  for (int k = 0; k < 8; ++k) {
    const auto f = megatron_virtual_microbatch(k, true, 4, 2, 2);
    const auto b = megatron_virtual_microbatch(k, false, 4, 2, 2);
    CHECK(f.microbatch == mb[k]);
    CHECK(f.chunk == chunk[k]);
    CHECK(b.microbatch == mb[k]);
    CHECK(b.chunk == 1 - chunk[k]);  // backward runs the chunks in reverse
  }
  // M 5, group 2: groups {0,1}, {2,3}, then the last group {4} alone.
  CHECK(megatron_virtual_microbatch(8, true, 5, 2, 2).microbatch == 4);
  CHECK(megatron_virtual_microbatch(8, true, 5, 2, 2).chunk == 0);
  CHECK(megatron_virtual_microbatch(9, true, 5, 2, 2).microbatch == 4);
  CHECK(megatron_virtual_microbatch(9, true, 5, 2, 2).chunk == 1);
}

TEST_CASE("PP=1 overlap: F0, combined steps F(i+1)+B(i), last B alone", "[schedule]") {
  const Config cfg = make_config(2, 1, 1, 3, true);
  const Schedule s = build_schedule(cfg, 0, true);
  REQUIRE(s.steps.size() == 4);
  CHECK(s.steps[0].f_microbatch == 0);
  CHECK(s.steps[0].b_microbatch == -1);
  CHECK(s.steps[1].f_microbatch == 1);
  CHECK(s.steps[1].b_microbatch == 0);
  CHECK(s.steps[2].f_microbatch == 2);
  CHECK(s.steps[2].b_microbatch == 1);
  CHECK(s.steps[3].f_microbatch == -1);
  CHECK(s.steps[3].b_microbatch == 2);
  // Phase 0: embedding, then LM-head backward; phase n+1: LM head + loss, embedding backward.
  const auto names = step_names(s, 1);
  CHECK(names.front() == "embedding.fwd");
  CHECK(names[1] == "lm_head_loss.bwd");
  CHECK(names[names.size() - 2] == "lm_head_loss.fwd");
  CHECK(names.back() == "embedding.bwd");
}

TEST_CASE("combined layer step issues in Megatron's order (reference 3.4)", "[schedule]") {
  Config cfg = make_config(2, 1, 1, 3, true, true);
  Schedule s = build_schedule(cfg, 0, true);
  // Step 1 = F(mb1) + B(mb0); layer step 0 pairs forward layer 0 with backward layer 1.
  const std::vector<std::string> expected = {
      "combine.bwd", "pre_dispatch.fwd", "mlp.bwd",  "dispatch.fwd",     "mlp_wgrad",
      "dispatch.bwd", "mlp.fwd",          "combine.fwd", "pre_dispatch.bwd", "pre_dispatch_wgrad"};
  CHECK(layer_step_names(s, 1, 0) == expected);
  // Streams, event chain and host blocking (alltoall, dropless: the dispatch syncs the host).
  const int pd_f = index_of(s, 1, "pre_dispatch.fwd", 0);
  const int di_f = index_of(s, 1, "dispatch.fwd", 0);
  const int co_b = index_of(s, 1, "combine.bwd", 1);
  const int mlp_b = index_of(s, 1, "mlp.bwd", 1);
  const int mlp_w = index_of(s, 1, "mlp_wgrad", 1);
  REQUIRE(pd_f >= 0);
  REQUIRE(di_f >= 0);
  CHECK(s.ops[di_f].lane == Lane::comm);
  CHECK(waits_for(s.ops[di_f], pd_f));   // event chain of micro-batch 1
  CHECK(waits_for(s.ops[di_f], co_b));   // comm stream FIFO
  CHECK(s.ops[di_f].host_blocks);
  // The host's synchronisation waits for the token counts copied after the router, not for the
  // communication stream's previous op.
  CHECK(s.ops[di_f].host_wait == pd_f);
  CHECK(s.ops[mlp_w].num_waits == 1);    // wgrad: stream order only
  CHECK(waits_for(s.ops[mlp_w], mlp_b));
  // The chunk's first layer (last in backward) defers its pre_dispatch wgrad to phase n+1.
  const auto second = layer_step_names(s, 1, 1);
  CHECK(second.back() == "pre_dispatch.bwd");
  const auto names = step_names(s, 1);
  CHECK(names[names.size() - 3] == "pre_dispatch_wgrad");
  // With a capacity factor (static shapes) the alltoall dispatch does not sync the host.
  cfg.opt.capacity_factor = 1.0;
  s = build_schedule(cfg, 0, true);
  CHECK_FALSE(s.ops[index_of(s, 1, "dispatch.fwd", 0)].host_blocks);
  // DeepEP's host waits for its notify kernel, queued behind the communication stream: every
  // predecessor.
  cfg.opt.capacity_factor = 0;
  cfg.opt.dispatcher = Dispatcher::flex;
  cfg.opt.flex_backend = FlexBackend::deepep;
  s = build_schedule(cfg, 0, true);
  const int flex_di = index_of(s, 1, "dispatch.fwd", 0);
  CHECK(s.ops[flex_di].host_blocks);
  CHECK(s.ops[flex_di].host_wait == -1);
}

TEST_CASE("early attention release moves pre_dispatch backward before mlp forward",
          "[schedule]") {
  Config cfg = make_config(2, 1, 1, 3, true);
  cfg.opt.ep_overlap_early_attn_memory_release = true;
  const Schedule s = build_schedule(cfg, 0, true);
  const std::vector<std::string> expected = {"combine.bwd", "pre_dispatch.fwd", "mlp.bwd",
                                             "dispatch.fwd", "dispatch.bwd", "pre_dispatch.bwd",
                                             "mlp.fwd", "combine.fwd"};
  CHECK(layer_step_names(s, 1, 0) == expected);
}

TEST_CASE("delay_wgrad_compute splits wgrad out and places it as in reference 4", "[schedule]") {
  for (bool delayed : {false, true}) {
    const Config cfg = make_config(4, 2, 2, 4, true, delayed);
    const Schedule s = build_schedule(cfg, 1, true);
    int wgrad_ops = 0;
    for (const auto& op : s.ops) wgrad_ops += op.dir == Direction::wgrad;
    // One mlp_wgrad and one pre_dispatch_wgrad per layer and micro-batch: 4 mb x 2 chunks x 1.
    CHECK(wgrad_ops == (delayed ? 2 * 4 * 2 : 0));
    if (!delayed) continue;
    for (std::size_t k = 0; k < s.steps.size(); ++k) {
      if (s.steps[k].b_microbatch < 0) continue;
      const auto names = step_names(s, static_cast<int>(k));
      // mlp_wgrad after the forward dispatch, before the backward dispatch.
      const auto w = std::find(names.begin(), names.end(), "mlp_wgrad");
      const auto db = std::find(names.begin(), names.end(), "dispatch.bwd");
      CHECK(w < db);
      // This rank is not the first stage: the chunk's (single) layer defers its attention wgrad
      // until after the backward P2P send, to overlap it.
      const auto send = std::find(names.begin(), names.end(), "pp_send.bwd");
      const auto pw = std::find(names.begin(), names.end(), "pre_dispatch_wgrad");
      REQUIRE(send != names.end());
      CHECK(send < pw);
    }
  }
}

TEST_CASE("dense layers have no dispatch/combine; the MTP layer adds mtp_post", "[schedule]") {
  Config cfg = make_config(4, 1, 1, 2, true);
  cfg.model.first_k_dense_layers = 2;
  cfg.model.mtp_num_layers = 1;
  const Schedule s = build_schedule(cfg, 0, true);
  int mtp_f = 0, mtp_b = 0;
  for (const auto& op : s.ops) {
    if (op.layer >= 0 && op.layer < 2) {
      CHECK(op.kind != OpKind::dispatch);
      CHECK(op.kind != OpKind::combine);
      CHECK_FALSE(op.is_moe);
    }
    if (op.kind == OpKind::mtp_post) {
      CHECK(op.layer == 4);
      CHECK(op.is_mtp);
      (op.dir == Direction::forward ? mtp_f : mtp_b) += 1;
    }
  }
  CHECK(mtp_f == 2);
  CHECK(mtp_b == 2);
  // Combined step, last layer step (forward MTP layer with backward layer 0): mtp_post forward
  // comes after the attention backward (v0.18+ order).
  const auto names = layer_step_names(s, 1, 4);
  CHECK(names.back() == "mtp_post.fwd");
}

TEST_CASE("the baseline is a strict chain in plain 1F1B order", "[schedule]") {
  const Config cfg = make_config(4, 4, 1, 8, false);
  const Schedule s = build_schedule(cfg, 1, false);
  CHECK(s.num_warmup == 2);
  for (std::size_t i = 1; i < s.ops.size(); ++i) {
    if (s.ops[i].lane == Lane::grad_reduce) continue;
    int prev = static_cast<int>(i) - 1;
    while (prev >= 0 && s.ops[prev].lane == Lane::grad_reduce) --prev;
    CHECK(waits_for(s.ops[i], prev));
  }
  for (const auto& op : s.ops) CHECK(op.dir != Direction::wgrad);
}

TEST_CASE("pipeline ranks link every recv to the matching send", "[schedule]") {
  for (bool ov : {false, true}) {
    const Config cfg = make_config(8, 4, 2, 8, ov);
    const PipelineSchedule p = build_pipeline(cfg, ov);
    int recvs = 0;
    for (std::size_t r = 0; r < p.ranks.size(); ++r) {
      for (const auto& op : p.ranks[r].ops) {
        if (op.pp_role != PpRole::recv) continue;
        ++recvs;
        REQUIRE(op.peer_op >= 0);
        const ScheduleOp& send = p.ranks[op.peer_rank].ops[op.peer_op];
        CHECK(send.pp_role == PpRole::send);
        CHECK(send.microbatch == op.microbatch);
        CHECK(send.dir == op.dir);
        CHECK(send.peer_rank == static_cast<int>(r));
      }
    }
    // Each (micro-batch, stage boundary) is crossed once forward and once backward.
    CHECK(recvs == 2 * 8 * (4 * 2 - 1));
  }
}

TEST_CASE("uneven layers: first and last stages hold fewer", "[schedule]") {
  const auto l = layers_per_virtual_stage(61, 8, 4);
  int sum = 0;
  for (int x : l) sum += x;
  CHECK(sum == 61);
  CHECK(l.front() == 1);
  CHECK(l.back() == 1);
  CHECK(l[1] == 1);  // 64 - 61 = 3 stages lighter: 0, 31, then 1
  CHECK(l[2] == 2);
  const auto even = layers_per_virtual_stage(64, 8, 4);
  for (int x : even) CHECK(x == 2);
}

TEST_CASE("activation peak from the step order matches the op list", "[schedule]") {
  struct Row {
    int layers, pp, vpp, m;
  };
  const Row rows[] = {{4, 1, 1, 1}, {4, 1, 1, 6}, {8, 2, 2, 4}, {8, 4, 2, 8}, {12, 4, 1, 8},
                      {10, 2, 2, 5}};
  for (const auto& r : rows) {
    for (bool ov : {false, true}) {
      Config cfg = make_config(r.layers, r.pp, r.vpp, r.m, ov);
      cfg.model.mtp_num_layers = 1;
      for (int rank = 0; rank < r.pp; ++rank) {
        INFO("layers " << r.layers << " pp " << r.pp << " vpp " << r.vpp << " M " << r.m
                       << " rank " << rank << " overlap " << ov);
        CHECK(activation_peak_layers(build_schedule(cfg, rank, ov)) ==
              activation_peak_layers_fast(cfg, rank, ov));
      }
    }
  }
  // PP=1: the baseline holds one micro-batch (L layers); overlap adds one layer of the next.
  const Config a = make_config(4, 1, 1, 6, true);
  CHECK(activation_peak_layers(build_schedule(a, 0, false)) == 4);
  CHECK(activation_peak_layers(build_schedule(a, 0, true)) == 5);
}
