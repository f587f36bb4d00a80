// The op-list builder: Megatron's combined-1F1B (or plain 1F1B) order of one pipeline rank,
// step by step (phase 0, layer steps in the §3.4 issue order, phase n+1).
#include <algorithm>

#include "model/error.hpp"
#include "model/layer_features.hpp"
#include "model/schedule.hpp"

namespace epo::model {

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
    // The experts' activation waits for the GPU inside the MLP forward and its recompute
    // (layer_features.hpp): the host cannot issue past it before the GPU gets there.
    act_sync_fwd_ = detail::expert_activation_syncs_host(cfg);
    act_sync_bwd_ = act_sync_fwd_ && (o.recomputes("moe_act") || o.recomputes("moe") ||
                                      o.recompute_granularity == RecomputeGranularity::full);
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
    const std::vector<int> stage_layers = virtual_stage_layers(cfg_);
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
    if (kind == OpKind::dispatch && dir == Direction::forward) {
      op.host_blocks = dispatch_blocks_;
      if (dispatch_blocks_ && cfg_.opt.dispatcher == Dispatcher::alltoall && chained)
        op.host_wait = chain_[key(side)];
    }
    if (kind == OpKind::mlp && l.moe)
      op.host_blocks = dir == Direction::forward ? act_sync_fwd_ : act_sync_bwd_;
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
  bool act_sync_fwd_ = false, act_sync_bwd_ = false;
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

}  // namespace epo::model
