#include "model/schedule.hpp"

#include <algorithm>

#include "model/error.hpp"

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

namespace {

struct Side {
  int mb = -1;
  int chunk = -1;
  ChunkShape shape;
  bool last_mb = false;  // its backward is the chunk's last: gradients are final
  bool valid() const { return mb >= 0; }
  int num_layers() const { return shape.num_layers + (shape.mtp ? 1 : 0); }
};

struct LayerRef {
  int layer = -1;
  bool moe = false;
  bool mtp = false;
};

class Builder {
 public:
  Builder(const Config& cfg, bool overlapped, Schedule& s)
      : cfg_(cfg), s_(s), overlapped_(overlapped) {
    delayed_ = overlapped && cfg.opt.delay_wgrad_compute;
    early_ = overlapped && cfg.opt.ep_overlap_early_attn_memory_release;
    strict_ = !overlapped;
    const auto& o = cfg.opt;
    const bool dropless = o.capacity_factor <= 0.0;
    if (o.dispatcher == Dispatcher::alltoall) {
      dispatch_blocks_ = dropless;
    } else if (o.dispatcher == Dispatcher::flex) {
      dispatch_blocks_ = o.flex_backend == FlexBackend::deepep || dropless;
    }
    s.ops.clear();
    s.steps.clear();
    s.overlapped = overlapped;
  }

  /// A whole step of one pipeline rank.
  void init_rank(int rank) {
    rank_ = rank;
    pp_ = cfg_.par.pp;
    vpp_ = cfg_.par.vpp;
    M_ = cfg_.par.num_microbatches();
    EPO_REQUIRE_INPUT(M_ >= 1, "the step has ", M_,
                      " micro-batches (allowed: gbs >= mbs*dp, at least one micro-batch)");
    const std::vector<int> stage_layers = layers_per_virtual_stage(cfg_.model.num_layers, pp_, vpp_);
    s_.pp_rank = rank;
    s_.pp_size = pp_;
    s_.vpp = vpp_;
    s_.num_microbatches = M_;
    s_.layers_per_chunk.assign(vpp_, 0);
    s_.first_layer_of_chunk.assign(vpp_, 0);
    shapes_.resize(vpp_);
    total_layers_ = 0;
    for (int c = 0; c < vpp_; ++c) {
      shapes_[c] = chunk_shape(cfg_, stage_layers, rank, c);
      s_.layers_per_chunk[c] = shapes_[c].num_layers;
      s_.first_layer_of_chunk[c] = shapes_[c].first_layer;
      total_layers_ += shapes_[c].num_layers + (shapes_[c].mtp ? 1 : 0);
    }
    chain_.assign(static_cast<std::size_t>(M_) * vpp_, -1);
  }

  /// Steps outside a full schedule: one chunk, micro-batch ids as given, recv ops unlinked.
  void init_synthetic(int num_microbatches, int total_layers) {
    rank_ = 0;
    pp_ = 1;
    vpp_ = 1;
    M_ = num_microbatches;
    s_.pp_rank = 0;
    s_.pp_size = 1;
    s_.vpp = 1;
    s_.num_microbatches = M_;
    total_layers_ = total_layers;
    synthetic_ = true;
    chain_.assign(static_cast<std::size_t>(M_), -1);
    for (int& l : lane_last_) l = -1;
    last_gpu_op_ = -1;
  }

  void synthetic_step(const SyntheticStep& st) {
    Side f, b;
    if (st.f_microbatch >= 0) {
      f.mb = st.f_microbatch;
      f.chunk = 0;
      f.shape = st.f;
    }
    if (st.b_microbatch >= 0) {
      b.mb = st.b_microbatch;
      b.chunk = 0;
      b.shape = st.b;
      b.last_mb = st.b_last_microbatch;
    }
    step(f, b);
  }

  void build() {
    const int group = pp_;
    const int total = M_ * vpp_;
    const int warmup = megatron_num_warmup(pp_, vpp_, M_, rank_, overlapped_, group);
    s_.num_warmup = warmup;
    auto fwd = [&](int k) {
      auto v = megatron_virtual_microbatch(k, true, M_, vpp_, group);
      return Side{v.microbatch, v.chunk, shapes_[v.chunk], false};
    };
    auto bwd = [&](int k) {
      auto v = megatron_virtual_microbatch(k, false, M_, vpp_, group);
      return Side{v.microbatch, v.chunk, shapes_[v.chunk], v.microbatch == M_ - 1};
    };
    for (int k = 0; k < warmup; ++k) step(fwd(k), Side{});
    int max_layers = 0;
    for (const auto& c : shapes_) max_layers = std::max(max_layers, c.num_layers + 1);
    s_.ops.reserve(static_cast<std::size_t>(total) * (2 * 7 * max_layers + 12) + 4);
    s_.steps.reserve(static_cast<std::size_t>(total) * 2 + 1);
    const int remaining = total - warmup;
    for (int k = 0; k < remaining; ++k) {
      if (overlapped_) {
        step(fwd(k + warmup), bwd(k));
      } else {
        step(fwd(k + warmup), Side{});
        step(Side{}, bwd(k));
      }
    }
    for (int k = std::max(remaining, 0); k < total; ++k) step(Side{}, bwd(k));
    if (!cfg_.opt.overlap_grad_reduce) {
      ScheduleOp op = base(OpKind::dp_grad_reduce, Direction::backward, Lane::grad_reduce, -1, -1,
                           -1);
      op.grad_fraction = 1.0f;
      add_wait(op, lane_last_[0]);
      add_wait(op, lane_last_[1]);
      push(op, false);
    }
  }

 private:
  int key(const Side& s) const { return s.mb * vpp_ + s.chunk; }

  /// The i-th layer of a side's chunk in forward order (decoder layers, then the MTP layer).
  LayerRef layer_of(const Side& side, int i) const {
    if (i >= side.shape.num_layers) return {cfg_.model.num_layers, cfg_.model.num_experts > 0, true};
    const int l = side.shape.first_layer + i;
    return {l, cfg_.model.num_experts > 0 && cfg_.model.is_moe_layer(l), false};
  }

  ScheduleOp base(OpKind kind, Direction dir, Lane lane, int mb, int chunk, int layer) const {
    ScheduleOp op;
    op.kind = kind;
    op.dir = dir;
    op.lane = lane;
    op.stream = lane == Lane::compute ? StreamKind::compute : StreamKind::comm;
    op.microbatch = mb;
    op.chunk = chunk;
    op.layer = layer;
    op.step = static_cast<int>(s_.steps.size()) - 1;
    op.layer_step = layer >= 0 ? layer_step_ : -1;
    return op;
  }

  static void add_wait(ScheduleOp& op, int idx) {
    if (idx < 0) return;
    for (int i = 0; i < op.num_waits; ++i) {
      if (op.waits[i] == idx) return;
    }
    op.waits[op.num_waits++] = idx;
  }

  /// Appends the op after its stream predecessor and, when `chained`, after the previous op of its
  /// micro-batch plan (the shared CUDA event). The baseline waits for every earlier op.
  int push(const ScheduleOp& in, bool chained, const Side* side = nullptr) {
    const int idx = static_cast<int>(s_.ops.size());
    s_.ops.push_back(in);
    ScheduleOp& op = s_.ops.back();
    const int lane = static_cast<int>(op.lane);
    add_wait(op, lane_last_[lane]);
    if (chained && side) add_wait(op, chain_[key(*side)]);
    if (strict_ && op.lane != Lane::grad_reduce) add_wait(op, last_gpu_op_);
    lane_last_[lane] = idx;
    if (chained && side) chain_[key(*side)] = idx;
    if (op.lane != Lane::grad_reduce) last_gpu_op_ = idx;
    return idx;
  }

  int layer_op(OpKind kind, Direction dir, Lane lane, const Side& side, const LayerRef& l,
               bool chained) {
    ScheduleOp op = base(kind, dir, lane, side.mb, side.chunk, l.layer);
    op.is_moe = l.moe;
    op.is_mtp = l.mtp;
    if (kind == OpKind::dispatch && dir == Direction::forward) op.host_blocks = dispatch_blocks_;
    return push(op, chained, &side);
  }

  void grad_reduce_after(int op_idx, const Side& b) {
    if (!cfg_.opt.overlap_grad_reduce || !b.last_mb) return;
    ScheduleOp op = base(OpKind::dp_grad_reduce, Direction::backward, Lane::grad_reduce, -1,
                         b.chunk, s_.ops[op_idx].layer);
    op.grad_fraction = 1.0f / static_cast<float>(std::max(1, total_layers_));
    add_wait(op, op_idx);
    push(op, false);
  }

  /// TransformerLayerSchedulePlan.run(f_layer, b_layer): reference §3.4 issue order.
  void layer_step(const Side& f, const LayerRef* fl, const Side& b, const LayerRef* bl,
                  bool last_layer_in_bwd) {
    ++layer_step_;
    const Lane C = Lane::compute, X = Lane::comm;
    const Direction F = Direction::forward, B = Direction::backward, W = Direction::wgrad;
    int b_final = -1;
    if (bl && bl->mtp) layer_op(OpKind::mtp_post, B, C, b, *bl, true);
    if (bl && bl->moe) layer_op(OpKind::combine, B, X, b, *bl, true);
    if (fl) layer_op(OpKind::pre_dispatch, F, C, f, *fl, true);
    if (bl) layer_op(OpKind::mlp, B, C, b, *bl, true);
    if (fl && fl->moe) layer_op(OpKind::dispatch, F, X, f, *fl, true);
    if (bl && delayed_) layer_op(OpKind::mlp_wgrad, W, C, b, *bl, false);
    if (bl && bl->moe) layer_op(OpKind::dispatch, B, X, b, *bl, true);
    if (bl && early_) b_final = layer_op(OpKind::pre_dispatch, B, C, b, *bl, true);
    if (fl) layer_op(OpKind::mlp, F, C, f, *fl, true);
    if (fl && fl->moe) layer_op(OpKind::combine, F, X, f, *fl, true);
    if (bl && !early_) b_final = layer_op(OpKind::pre_dispatch, B, C, b, *bl, true);
    if (fl && fl->mtp) layer_op(OpKind::mtp_post, F, C, f, *fl, true);
    if (bl && delayed_) {
      if (last_layer_in_bwd) {
        deferred_wgrad_ = *bl;
        has_deferred_wgrad_ = true;
        return;
      }
      b_final = layer_op(OpKind::pre_dispatch_wgrad, W, C, b, *bl, false);
    }
    if (bl) grad_reduce_after(b_final, b);
  }

  /// TransformerModelChunkSchedulePlan.run: phase 0, the layer steps, phase n+1 (§3.5).
  void step(const Side& f, const Side& b) {
    ScheduleStep st;
    st.f_microbatch = f.mb;
    st.f_chunk = f.chunk;
    st.b_microbatch = b.mb;
    st.b_chunk = b.chunk;
    st.first_op = static_cast<int>(s_.ops.size());
    s_.steps.push_back(st);
    const Lane C = Lane::compute, X = Lane::comm;
    const Direction F = Direction::forward, B = Direction::backward;
    // Phase 0: wait for the forward input, embedding; wait for the gradient, LM head backward.
    if (f.valid()) {
      if (f.shape.first_stage) {
        push(base(OpKind::embedding, F, C, f.mb, f.chunk, -1), true, &f);
      } else {
        ScheduleOp op = base(OpKind::pp_send_recv, F, C, f.mb, f.chunk, -1);
        op.pp_role = PpRole::recv;
        op.peer_rank = synthetic_ ? -1 : (rank_ + pp_ - 1) % pp_;
        push(op, true, &f);
      }
    }
    if (b.valid()) {
      if (b.shape.last_stage) {
        push(base(OpKind::lm_head_loss, B, C, b.mb, b.chunk, -1), true, &b);
      } else {
        ScheduleOp op = base(OpKind::pp_send_recv, B, C, b.mb, b.chunk, -1);
        op.pp_role = PpRole::recv;
        op.peer_rank = synthetic_ ? -1 : (rank_ + 1) % pp_;
        push(op, true, &b);
      }
    }
    // Layers: forward ascending, backward popped from the end.
    const int nf = f.valid() ? f.num_layers() : 0;
    const int nb = b.valid() ? b.num_layers() : 0;
    const int both = std::min(nf, nb);
    auto fl = [&](int i) { return layer_of(f, i); };
    auto bl = [&](int i) { return layer_of(b, nb - 1 - i); };  // popped from the end
    has_deferred_wgrad_ = false;
    layer_step_ = -1;
    if (overlapped_) {
      for (int i = 0; i < both; ++i) {
        const LayerRef a = fl(i), c = bl(i);
        layer_step(f, &a, b, &c, i == nb - 1);
      }
      for (int i = both; i < nb; ++i) {
        const LayerRef c = bl(i);
        layer_step(f, nullptr, b, &c, i == nb - 1);
      }
      for (int i = both; i < nf; ++i) {
        const LayerRef a = fl(i);
        layer_step(f, &a, b, nullptr, false);
      }
    } else {
      for (int i = 0; i < nf; ++i) {
        const LayerRef a = fl(i);
        layer_step(f, &a, b, nullptr, false);
      }
      for (int i = 0; i < nb; ++i) {
        const LayerRef c = bl(i);
        layer_step(f, nullptr, b, &c, i == nb - 1);
      }
    }
    // Phase n+1: P2P sends (issued on the comm stream), the deferred wgrad of the chunk's first
    // layer (overlaps the send), LM head + loss forward, embedding backward.
    if (f.valid() && !f.shape.last_stage) {
      ScheduleOp op = base(OpKind::pp_send_recv, F, X, f.mb, f.chunk, -1);
      op.pp_role = PpRole::send;
      op.peer_rank = synthetic_ ? -1 : (rank_ + 1) % pp_;
      push(op, true, &f);
    }
    if (b.valid() && !b.shape.first_stage) {
      ScheduleOp op = base(OpKind::pp_send_recv, B, X, b.mb, b.chunk, -1);
      op.pp_role = PpRole::send;
      op.peer_rank = synthetic_ ? -1 : (rank_ + pp_ - 1) % pp_;
      push(op, true, &b);
    }
    layer_step_ = -1;  // phase n+1 belongs to no layer step
    if (has_deferred_wgrad_) {
      const int idx = layer_op(OpKind::pre_dispatch_wgrad, Direction::wgrad, C, b,
                               deferred_wgrad_, false);
      grad_reduce_after(idx, b);
      has_deferred_wgrad_ = false;
    }
    if (f.valid() && f.shape.last_stage) {
      push(base(OpKind::lm_head_loss, F, C, f.mb, f.chunk, -1), true, &f);
    }
    if (b.valid() && b.shape.first_stage) {
      push(base(OpKind::embedding, B, C, b.mb, b.chunk, -1), true, &b);
    }
    s_.steps.back().end_op = static_cast<int>(s_.ops.size());
  }

  const Config& cfg_;
  Schedule& s_;
  int rank_ = 0;
  bool overlapped_;
  int pp_ = 1, vpp_ = 1, M_ = 1;
  bool delayed_ = false, early_ = false, strict_ = false;
  bool dispatch_blocks_ = false;
  int total_layers_ = 0;
  bool synthetic_ = false;
  std::vector<ChunkShape> shapes_;
  std::vector<int> chain_;
  int lane_last_[kNumLanes] = {-1, -1, -1};
  int last_gpu_op_ = -1;
  LayerRef deferred_wgrad_;
  bool has_deferred_wgrad_ = false;
  int layer_step_ = -1;
};

}  // namespace

Schedule build_schedule(const Config& cfg, int pp_rank, bool overlapped) {
  EPO_REQUIRE_INPUT(pp_rank >= 0 && pp_rank < cfg.par.pp, "pp_rank = ", pp_rank,
                    " is out of range (allowed: 0..", cfg.par.pp - 1, ")");
  EPO_REQUIRE_INPUT(cfg.model.mtp_num_layers <= 1 || !overlapped, "mtp_num_layers = ",
                    cfg.model.mtp_num_layers,
                    " is not supported with overlap (allowed: at most one MTP layer)");
  Schedule s;
  Builder b(cfg, overlapped, s);
  b.init_rank(pp_rank);
  b.build();
  return s;
}

PipelineSchedule build_pipeline(const Config& cfg, bool overlapped) {
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

void build_steps(const Config& cfg, bool overlapped, const SyntheticStep* steps, int num_steps,
                 int total_layers, Schedule& out) {
  int max_mb = 0;
  for (int i = 0; i < num_steps; ++i) {
    max_mb = std::max({max_mb, steps[i].f_microbatch, steps[i].b_microbatch});
  }
  Builder b(cfg, overlapped, out);
  b.init_synthetic(max_mb + 1, total_layers);
  for (int i = 0; i < num_steps; ++i) b.synthetic_step(steps[i]);
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
