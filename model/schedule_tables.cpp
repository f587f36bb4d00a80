// Schedule tables and bookkeeping: Megatron's warm-up counts and chunk table, the layer split
// over virtual stages, linking pipeline sends and recvs, op names, activation counts.
#include <algorithm>

#include "model/error.hpp"
#include "model/limits.hpp"
#include "model/pipeline_layout.hpp"
#include "model/schedule.hpp"

namespace epo::model {

const char* to_string(Lane lane) {
  switch (lane) {
    case Lane::compute: return "compute";
    case Lane::comm: return "comm";
    case Lane::grad_reduce: return "grad_reduce";
  }
  return "?";
}

std::size_t PipelineSchedule::num_ops() const {
  std::size_t n = 0;
  for (const auto& r : ranks) n += r.ops.size();
  return n;
}

int megatron_num_warmup(int pp, int vpp, int num_microbatches, int pp_rank, bool overlap,
                        int group) {
  const int total = num_microbatches * vpp;
  if (pp == 1 && vpp == 1) return overlap ? std::min(1, total) : 0;
  if (vpp == 1 && !overlap) return std::min(pp - pp_rank - 1, num_microbatches);
  int w = (pp - pp_rank - 1) * 2 + (vpp - 1) * group;
  if (overlap) w += 1;
  return std::min(w, total);
}

VirtualMicrobatch megatron_virtual_microbatch(int k, bool forward, int num_microbatches, int vpp,
                                              int group) {
  // get_schedule_table: full groups of `group` micro-batches, each listing chunk 0's micro-batches,
  // then chunk 1's, ...; the last group (the first whose end reaches M) holds the rest.
  const int M = num_microbatches;
  const int last_start = M > group ? (M - group + group - 1) / group * group : 0;
  VirtualMicrobatch v;
  if (k < last_start * vpp) {
    const int in_group = k % (group * vpp);
    v.chunk = in_group / group;
    v.microbatch = k / (group * vpp) * group + in_group % group;
  } else {
    const int in_group = k - last_start * vpp;
    const int size = M - last_start;
    v.chunk = in_group / size;
    v.microbatch = last_start + in_group % size;
  }
  if (!forward) v.chunk = vpp - 1 - v.chunk;
  return v;
}

std::vector<int> layers_per_virtual_stage(int num_layers, int pp, int vpp) {
  const int stages = pp * vpp;
  EPO_REQUIRE_INPUT(num_layers >= stages, "num_layers = ", num_layers, " is fewer than pp*vpp = ",
                    stages, " (allowed: at least one layer per virtual stage)");
  const int ceil = (num_layers + stages - 1) / stages;
  std::vector<int> out(stages, ceil);
  int deficit = stages * ceil - num_layers;
  for (int i = 0; deficit > 0; ++i) {
    const int s = (i % 2 == 0) ? i / 2 : stages - 1 - i / 2;
    --out[s];
    --deficit;
  }
  return out;
}

std::vector<int> virtual_stage_layers(const Config& cfg) {
  const auto& p = cfg.par;
  if (p.pipeline_layout.empty() && p.first_stage_layers == 0 && p.last_stage_layers == 0 &&
      !p.account_for_embedding_in_pipeline_split && !p.account_for_loss_in_pipeline_split)
    return layers_per_virtual_stage(cfg.model.num_layers, p.pp, p.vpp);
  const PipelinePlacement placed = pipeline_placement(cfg);
  std::vector<int> out;
  out.reserve(placed.stages.size());
  for (const auto& s : placed.stages) out.push_back(s.num_layers);
  return out;
}

ChunkShape chunk_shape(const Config& cfg, const std::vector<int>& stage_layers, int pp_rank,
                       int chunk) {
  const int pp = cfg.par.pp, vpp = cfg.par.vpp;
  const int stage = chunk * pp + pp_rank;
  ChunkShape c;
  for (int t = 0; t < stage; ++t) c.first_layer += stage_layers[t];
  c.num_layers = stage_layers[stage];
  c.first_stage = stage == 0;
  c.last_stage = stage == pp * vpp - 1;
  c.mtp = c.last_stage && cfg.model.mtp_num_layers > 0;
  return c;
}

PipelineSchedule build_pipeline(const Config& cfg, bool overlapped) {
  check_pipeline_slots(cfg);
  check_interleaved_microbatches(cfg);  // Megatron refuses these; its schedule would deadlock
  check_dist_opt_instances(cfg);
  PipelineSchedule p;
  const int pp = cfg.par.pp;
  p.ranks.reserve(pp);
  for (int r = 0; r < pp; ++r) p.ranks.push_back(build_schedule(cfg, r, overlapped));
  if (pp == 1) return p;
  // Send of (micro-batch, chunk, direction) on each rank, then link every recv to its send:
  // forward activations come from the previous virtual stage, gradients from the next.
  const int M = cfg.par.num_microbatches(), V = cfg.par.vpp;
  auto slot = [&](int rank, int chunk, int mb, Direction dir) {
    return ((static_cast<std::size_t>(dir == Direction::forward ? 0 : 1) * pp + rank) * V + chunk) *
               M + mb;
  };
  std::vector<std::int32_t> send_of(static_cast<std::size_t>(2) * pp * V * M, -1);
  for (int r = 0; r < pp; ++r) {
    const auto& ops = p.ranks[r].ops;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].pp_role != PpRole::send) continue;
      send_of[slot(r, ops[i].chunk, ops[i].microbatch, ops[i].dir)] = static_cast<std::int32_t>(i);
    }
  }
  for (int r = 0; r < pp; ++r) {
    for (auto& op : p.ranks[r].ops) {
      if (op.pp_role != PpRole::recv) continue;
      int src_chunk = op.chunk;
      if (op.dir == Direction::forward && r == 0) src_chunk -= 1;
      if (op.dir == Direction::backward && r == pp - 1) src_chunk += 1;
      op.peer_op = send_of[slot(op.peer_rank, src_chunk, op.microbatch, op.dir)];
      if (op.peer_op < 0) {
        throw EPO_RUNTIME_ERROR("schedule: recv of micro-batch ", op.microbatch, " chunk ",
                                op.chunk, " on rank ", r, " has no matching send");
      }
    }
  }
  return p;
}

const char* op_name(const ScheduleOp& op) {
  const bool f = op.dir == Direction::forward;
  switch (op.kind) {
    case OpKind::pre_dispatch: return f ? "pre_dispatch.fwd" : "pre_dispatch.bwd";
    case OpKind::dispatch: return f ? "dispatch.fwd" : "dispatch.bwd";
    case OpKind::mlp: return f ? "mlp.fwd" : "mlp.bwd";
    case OpKind::combine: return f ? "combine.fwd" : "combine.bwd";
    case OpKind::mlp_wgrad: return "mlp_wgrad";
    case OpKind::pre_dispatch_wgrad: return "pre_dispatch_wgrad";
    case OpKind::mtp_post: return f ? "mtp_post.fwd" : "mtp_post.bwd";
    case OpKind::embedding: return f ? "embedding.fwd" : "embedding.bwd";
    case OpKind::lm_head_loss: return f ? "lm_head_loss.fwd" : "lm_head_loss.bwd";
    case OpKind::pp_send_recv:
      if (op.pp_role == PpRole::recv) return f ? "pp_recv.fwd" : "pp_recv.bwd";
      return f ? "pp_send.fwd" : "pp_send.bwd";
    case OpKind::dp_grad_reduce: return "dp_grad_reduce";
  }
  return "?";
}

int activation_peak_layers(const Schedule& schedule) {
  int alive = 0, peak = 0;
  for (const auto& op : schedule.ops) {
    if (op.kind != OpKind::pre_dispatch) continue;
    if (op.dir == Direction::forward) {
      peak = std::max(peak, ++alive);
    } else if (op.dir == Direction::backward) {
      --alive;
    }
  }
  return peak;
}

}  // namespace epo::model
