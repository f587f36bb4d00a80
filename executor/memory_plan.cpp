// One rank's device memory plan (memory_plan.hpp).
#include "executor/memory_plan.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/sizes.hpp"
#include "model/error.hpp"
#include "model/routing_stats.hpp"

namespace epo::exec {

const char* to_string(MemClass c) {
  switch (c) {
    case MemClass::weights: return "weights";
    case MemClass::gradients: return "gradients";
    case MemClass::activations: return "activations";
    case MemClass::capacity: return "capacity";
    case MemClass::transport: return "transport";
    case MemClass::scratch: return "scratch";
    case MemClass::workspace: return "workspace";
    case MemClass::cublas: return "cublas";
    case MemClass::check: return "check";
  }
  return "?";
}

const char* describe(MemClass c) {
  switch (c) {
    case MemClass::weights: return "bf16 weights of the layers run";
    case MemClass::gradients:
      return "bf16 weight gradients (no optimizer state, no fp32 main grads)";
    case MemClass::activations:
      return "per micro-batch slot, token-sized: what the backward reads";
    case MemClass::capacity:
      return "per micro-batch slot, expert-row capacity: expert inputs, fc1 and activation "
             "outputs (and their output gradients when wgrad is delayed)";
    case MemClass::transport:
      return "dispatch/combine: alltoall send/returned and received rows, flex buffers";
    case MemClass::scratch:
      return "per rank, shared by slots and layers: what one op writes and reads itself";
    case MemClass::workspace: return "layout and pointer-array workspaces, routing tables";
    case MemClass::cublas: return "the cuBLAS handle's workspace";
    case MemClass::check: return "--check: every micro-batch's output and input gradient";
  }
  return "?";
}

const Allocation& RankMemoryPlan::at(Buf id, int slot, int layer) const {
  for (const auto& b : bindings)
    if (b.id == id && b.slot == slot && b.layer == layer) return allocations[b.allocation];
  throw EPO_RUNTIME_ERROR("memory plan: no buffer ", static_cast<int>(id), " for slot ", slot,
                          " layer ", layer);
}

std::int64_t expert_capacity_rows(const model::Config& cfg, const RunShape& sh,
                                  const RankSetup& setup) {
  const std::int64_t nt = static_cast<std::int64_t>(sh.tokens) * setup.blocks;
  const std::int64_t El = sh.num_experts / setup.num_ranks, K = sh.topk;
  const std::int64_t mean = nt * K;  // rows a rank receives on average
  std::int64_t rows = mean;
  if (setup.num_ranks > 1) {
    model::RoutingShape rs;
    rs.num_experts = sh.num_experts;
    rs.topk = sh.topk;
    rs.num_ranks = setup.num_ranks;
    const auto& m = cfg.model;
    rs.num_groups = m.router_num_groups;
    rs.group_topk = m.router_group_topk;
    const double factor = model::expected_max_load_factor(
        rs, cfg.opt.routing.kind, cfg.opt.routing.skew, static_cast<double>(nt),
        cfg.opt.routing.seed);
    // The expected busiest rank, 10 % and 1024 rows above it (the draws of one run scatter around
    // the expectation; the router of `uniform` routing is a real GEMM on random weights).
    const double want = std::ceil(mean * factor * 1.10) + 1024.0;
    // A token sends at most one copy to each of the rank's experts.
    const std::int64_t most = static_cast<std::int64_t>(setup.num_ranks) * nt *
                              std::min<std::int64_t>(K, El);
    rows = std::min<std::int64_t>(most, static_cast<std::int64_t>(want));
  }
  return rows + El * (kExpertRowAlign - 1);
}

namespace {

constexpr std::int64_t kBf16 = 2;

/// Lays allocations out one after the other, 256-byte aligned, and binds pointers to them.
class Planner {
 public:
  explicit Planner(RankMemoryPlan& p) : p_(p) {}
  /// A new allocation of `count` elements of `elem_bytes`; returns its index.
  int alloc(const std::string& name, MemClass cls, std::int64_t count, std::int64_t elem_bytes) {
    const std::int64_t at = (p_.total_bytes + 255) / 256 * 256;
    const std::int64_t bytes = std::max<std::int64_t>(count, 0) * elem_bytes;
    p_.allocations.push_back({name, cls, at, bytes});
    p_.total_bytes = at + bytes;
    p_.class_bytes[static_cast<int>(cls)] += bytes;
    return static_cast<int>(p_.allocations.size()) - 1;
  }
  void bind(Buf id, int slot, int layer, int allocation) {
    p_.bindings.push_back({id, slot, layer, allocation});
  }
  /// A new allocation bound to (id, slot, layer).
  void take(Buf id, int slot, int layer, const std::string& name, MemClass cls, std::int64_t count,
            std::int64_t elem_bytes) {
    bind(id, slot, layer, alloc(name, cls, count, elem_bytes));
  }

 private:
  RankMemoryPlan& p_;
};

}  // namespace

RankMemoryPlan plan_rank_memory(const model::Config& cfg, const RunShape& sh,
                                const RankSetup& setup) {
  EPO_REQUIRE_INPUT(setup.num_ranks >= 1 && sh.num_experts % setup.num_ranks == 0,
                    "memory plan: ", sh.num_experts, " experts over ", setup.num_ranks, " ranks");
  RankMemoryPlan p;
  Planner a(p);
  const std::int64_t H = sh.hidden, NT = static_cast<std::int64_t>(sh.tokens) * setup.blocks;
  const std::int64_t K = sh.topk, E = sh.num_experts, R = setup.num_ranks;
  const std::int64_t El = E / R, F = sh.expert_ffn, Q = sh.qkv_dim, C = sh.ctx_dim;
  p.tokens = NT;
  p.local_experts = static_cast<int>(El);
  p.capacity_rows = expert_capacity_rows(cfg, sh, setup);
  const std::int64_t cap = p.capacity_rows;
  const bool flex = setup.transport == Transport::flex;
  // Delayed wgrad reads the output gradients in an op of its own: they stay per slot.
  const bool delayed = cfg.opt.delay_wgrad_compute;
  const int L = sh.num_layers;
  auto is_moe = [&](int l) { return l >= sh.first_k_dense; };
  auto ffn_of = [&](int l) -> std::int64_t { return is_moe(l) ? sh.shared_ffn : sh.dense_ffn; };
  bool any_moe = false;
  std::int64_t f_max = 0;
  for (int l = 0; l < L; ++l) {
    any_moe = any_moe || is_moe(l);
    f_max = std::max(f_max, ffn_of(l));
  }

  // Gradients in one block (zeroed by one memset per step); a layer's dense gradients are
  // contiguous, so one all-reduce covers them.
  std::int64_t grad_elems = 0;
  for (int l = 0; l < L; ++l) {
    const std::int64_t f = ffn_of(l);
    grad_elems += H * Q + C * H + H * 2 * f + f * H + (is_moe(l) ? El * H * 3 * F : 0);
  }
  a.take(Buf::grads, -1, -1, "weight gradients (bf16)", MemClass::gradients, grad_elems, kBf16);
  for (int l = 0; l < L; ++l) {
    const std::int64_t f = ffn_of(l);
    a.take(Buf::wqkv, -1, l, "attention QKV weight", MemClass::weights, H * Q, kBf16);
    a.take(Buf::wproj, -1, l, "attention output weight", MemClass::weights, C * H, kBf16);
    a.take(Buf::w1s, -1, l, is_moe(l) ? "shared expert fc1" : "dense fc1", MemClass::weights,
           H * 2 * f, kBf16);
    a.take(Buf::w2s, -1, l, is_moe(l) ? "shared expert fc2" : "dense fc2", MemClass::weights,
           f * H, kBf16);
    if (!is_moe(l)) continue;
    a.take(Buf::wrouter, -1, l, "router weight", MemClass::weights, H * E, kBf16);
    a.take(Buf::w1, -1, l, "expert fc1 weights", MemClass::weights, El * H * 2 * F, kBf16);
    a.take(Buf::w2, -1, l, "expert fc2 weights", MemClass::weights, El * F * H, kBf16);
  }

  // Rank-wide scratch, sized for the largest layer.
  const MemClass S = MemClass::scratch;
  const int d_s_act = a.alloc("shared/dense SwiGLU input gradient", S, NT * f_max, kBf16);
  int dh = -1, d_qkv = -1, d_s_fc1 = -1, d_out = -1, d_fc1 = -1, d_act = -1, d_xperm = -1;
  int logits = -1;
  if (!delayed) {
    dh = a.alloc("attention output gradient", S, NT * H, kBf16);
    d_qkv = a.alloc("QKV output gradient", S, NT * Q, kBf16);
    d_s_fc1 = a.alloc("shared expert fc1 output gradient", S, NT * 2 * f_max, kBf16);
  }
  if (any_moe) {
    logits = a.alloc("router logits (fp32)", S, NT * E, 4);
    d_act = a.alloc("expert activation gradient", S, cap * F, kBf16);
    d_xperm = a.alloc("expert input gradient", S, cap * H, kBf16);
    if (!delayed) {
      d_out = a.alloc("expert output / output gradient", S, cap * H, kBf16);
      d_fc1 = a.alloc("expert fc1 output gradient", S, cap * 2 * F, kBf16);
    }
  }

  const MemClass A = MemClass::activations, CAP = MemClass::capacity, T = MemClass::transport;
  const MemClass W = MemClass::workspace;
  for (int s = 0; s < setup.slots; ++s)
    for (int l = 0; l < L; ++l) {
      const std::int64_t f = ffn_of(l);
      a.take(Buf::qkv, s, l, "QKV output", A, NT * Q, kBf16);
      a.take(Buf::h, s, l, "attention output + residual", A, NT * H, kBf16);
      a.take(Buf::s_fc1, s, l, "shared/dense fc1 output", A, NT * 2 * f, kBf16);
      a.take(Buf::s_act, s, l, "shared/dense activation", A, NT * f, kBf16);
      a.take(Buf::y, s, l, "layer output", A, NT * H, kBf16);
      a.take(Buf::dx, s, l, "layer input gradient", A, NT * H, kBf16);
      a.bind(Buf::d_s_act, s, l, d_s_act);
      // A dense layer's dh crosses from its mlp op to its attention op: per slot.
      if (delayed || !is_moe(l)) {
        a.take(Buf::dh, s, l, "attention output gradient", A, NT * H, kBf16);
        a.take(Buf::d_qkv, s, l, "QKV output gradient", A, NT * Q, kBf16);
        a.take(Buf::d_s_fc1, s, l, "shared/dense fc1 output gradient", A, NT * 2 * f, kBf16);
      } else {
        a.bind(Buf::dh, s, l, dh);
        a.bind(Buf::d_qkv, s, l, d_qkv);
        a.bind(Buf::d_s_fc1, s, l, d_s_fc1);
      }
      if (!is_moe(l)) continue;
      a.bind(Buf::logits, s, l, logits);
      a.bind(Buf::d_act, s, l, d_act);
      a.bind(Buf::d_xperm, s, l, d_xperm);
      a.take(Buf::topk_idx, s, l, "top-k experts", A, NT * K, 4);
      a.take(Buf::topk_w, s, l, "top-k weights", A, NT * K, 4);
      a.take(Buf::moe_out, s, l, "combined expert output / its gradient", A, NT * H, kBf16);
      a.take(Buf::loc_offsets, s, l, "local expert offsets", W, El + 1, 4);
      a.take(Buf::loc_ntpe, s, l, "local expert rows", W, El, 4);
      a.take(Buf::x_perm, s, l, "expert input rows", CAP, cap * H, kBf16);
      a.take(Buf::fc1, s, l, "expert fc1 output", CAP, cap * 2 * F, kBf16);
      a.take(Buf::act, s, l, "expert activation", CAP, cap * F, kBf16);
      if (delayed) {
        a.take(Buf::y_perm, s, l, "expert output / output gradient", CAP, cap * H, kBf16);
        a.take(Buf::d_fc1, s, l, "expert fc1 output gradient", CAP, cap * 2 * F, kBf16);
      } else {
        a.bind(Buf::y_perm, s, l, d_out);
        a.bind(Buf::d_fc1, s, l, d_fc1);
      }
      if (flex) {
        a.take(Buf::token_slot, s, l, "flex token slots", W, NT * R, 4);
        a.take(Buf::ntpr, s, l, "flex tokens per rank", W, R, 4);
        a.take(Buf::row_w, s, l, "flex row weights", CAP, cap, 4);
        a.take(Buf::fx_permuted_row, s, l, "flex permuted rows", W, R * NT * K, 4);
        a.take(Buf::fx_row_src, s, l, "flex row sources", W,
               kernels::alltoall_layout_max_rows(R * NT, static_cast<int>(K),
                                                 static_cast<int>(El), kExpertRowAlign), 4);
        const std::int64_t recv_ws = static_cast<std::int64_t>(
            kernels::layout_workspace_bytes(R * NT, static_cast<int>(El)));
        a.take(Buf::layout_ws, s, l, "layout workspace", W,
               (recv_ws + 255) / 256 * 256 +
                   static_cast<std::int64_t>(kernels::layout_workspace_bytes(NT, static_cast<int>(R))),
               1);
        continue;
      }
      a.take(Buf::permuted_row, s, l, "permuted rows", W, NT * K, 4);
      a.take(Buf::row_src_token, s, l, "row source tokens", W, NT * K, 4);
      a.take(Buf::expert_offsets, s, l, "expert offsets", W, E + 1, 4);
      a.take(Buf::ntpe, s, l, "tokens per expert", W, E, 4);
      a.take(Buf::counts_all, s, l, "all ranks' tokens per expert", W, R * E, 4);
      a.take(Buf::layout_ws, s, l, "layout workspace", W,
             static_cast<std::int64_t>(kernels::layout_workspace_bytes(NT, static_cast<int>(E))), 1);
      // The send rows (dispatch forward, combine backward) and the returned rows (combine
      // forward, dispatch backward) are never alive together: one buffer.
      const int rows = a.alloc("alltoall send / returned rows", T, NT * K * H, kBf16);
      a.bind(Buf::x_send, s, l, rows);
      a.bind(Buf::y_recv, s, l, rows);
      a.take(Buf::x_recv, s, l, "alltoall received expert rows", T, cap * H, kBf16);
      a.take(Buf::row_src, s, l, "sorted row sources", W, cap, 4);
      a.take(Buf::row_dst, s, l, "sorted row destinations", W, cap, 4);
      a.take(Buf::counts_recv, s, l, "received counts", W, R * El, 4);
    }
  for (int s = 0; s < setup.slots; ++s) {
    a.take(Buf::x0, s, -1, "embedding output", A, NT * H, kBf16);
    a.take(Buf::loss_grad, s, -1, "loss gradient", A, NT * H, kBf16);
  }
  if (setup.keep_outputs)
    for (int m = 0; m < setup.num_microbatches; ++m) {
      a.take(Buf::output, m, -1, "kept output", MemClass::check, NT * H, kBf16);
      a.take(Buf::input_grad, m, -1, "kept input gradient", MemClass::check, NT * H, kBf16);
    }
  // Core-attention stand-in scratch: scores of a few (sequence, head) pairs at a time.
  const std::int64_t seq = sh.seq, half = std::max<std::int64_t>(1, seq / 2);
  const std::int64_t batches = static_cast<std::int64_t>(sh.num_heads) * sh.mbs * setup.blocks;
  const std::int64_t chunk =
      std::max<std::int64_t>(1, std::min<std::int64_t>(batches, (32LL << 20) / (seq * half)));
  p.attn_scratch_elems =
      chunk * seq * half + chunk * seq * std::max(sh.qk_head_dim, sh.v_head_dim);
  a.take(Buf::attn_scratch, -1, -1, "core-attention scores", S, p.attn_scratch_elems, kBf16);
  a.take(Buf::ones, -1, -1, "unit router weights", W, NT * K, 4);
  a.take(Buf::skew_log_weight, -1, -1, "routing popularity", W, E, 4);
  a.take(Buf::gemm_ws, -1, -1, "grouped GEMM pointer arrays", W,
         static_cast<std::int64_t>(kernels::grouped_gemm_workspace_bytes(static_cast<int>(El))), 1);
  a.take(Buf::cublas_ws, -1, -1, "cuBLAS workspace", MemClass::cublas, kCublasWorkspaceBytes, 1);
  if (flex) {
    const auto b = kernels::flex_buffer_bytes(static_cast<int>(R), static_cast<int>(NT),
                                              static_cast<int>(H), static_cast<int>(K));
    a.take(Buf::flex_fwd, -1, -1, "flex buffers (forward)", T,
           static_cast<std::int64_t>(b.total()), 1);
    a.take(Buf::flex_bwd, -1, -1, "flex buffers (backward)", T,
           static_cast<std::int64_t>(b.total()), 1);
    // Peer tables: R entries of kernels::FlexBuffers (8 pointers each).
    a.take(Buf::flex_peers_fwd, -1, -1, "flex peer table (forward)", W, R * 8, 8);
    a.take(Buf::flex_peers_bwd, -1, -1, "flex peer table (backward)", W, R * 8, 8);
  }
  // Pinned staging per slot-layer: all counts, received counts, local counts.
  const std::int64_t per = R * E + R * El + El + 64;
  p.pinned_bytes = 4 * per * setup.slots * L + 4096;
  return p;
}

}  // namespace epo::exec
