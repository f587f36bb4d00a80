#pragma once
// The device memory of one EP rank of `epo run`, planned before any allocation: every buffer the
// rank's RankState binds, its class, its offset inside the rank's one allocation and its bytes.
// RankState allocates exactly `total_bytes` and binds its pointers from `bindings`; `epo run
// --dry-run` prints the same plan on a machine without a GPU. Pure C++ (no CUDA header).
//
// What a rank keeps follows Megatron: a micro-batch slot holds what its backward reads (attention
// inputs, the expert inputs, fc1 and activation outputs, the dispatch's receive rows); what one op
// writes and reads itself (router logits, the experts' input gradients, the SwiGLU gradient, and
// with wgrad not delayed the output gradients the wgrad reads) lives in per-rank scratch that
// every slot and layer shares (ops on one stream never overlap).
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "executor/op_plan.hpp"
#include "model/config.hpp"

namespace epo::exec {

enum class Transport { local, nccl, flex };

struct RankSetup {
  int rank = 0;            ///< EP rank (0 for the reference)
  int device = 0;
  int num_ranks = 1;       ///< EP ranks the exchange spans (1 for the reference)
  int blocks = 1;          ///< token blocks held (EP size for the reference, else 1)
  int slots = 1;           ///< activation slots per layer
  int num_microbatches = 1;
  Transport transport = Transport::local;
  bool keep_outputs = false;  ///< keep every micro-batch's output and input gradient (--check)
  /// Reference of a flex run: combine with the flex kernels' rounding over this many ranks.
  int emulate_flex_ranks = 0;
};

/// What a buffer is for (the classes `epo run --dry-run` prints).
enum class MemClass {
  weights,      ///< bf16 weights of the layers run
  gradients,    ///< bf16 weight gradients (no optimizer state, no fp32 main grads)
  activations,  ///< per micro-batch slot, token-sized: what the backward reads
  capacity,     ///< per micro-batch slot, sized by the expert-row capacity: expert inputs, fc1, act
  transport,    ///< dispatch/combine buffers: alltoall send/receive rows, flex buffers
  scratch,      ///< per rank, shared by every slot and layer: what one op writes and reads itself
  workspace,    ///< layout and pointer-array workspaces, routing tables, small per-slot arrays
  cublas,       ///< the cuBLAS handle's workspace
  check,        ///< --check: every micro-batch's output and input gradient
};
constexpr int kNumMemClasses = 9;
const char* to_string(MemClass c);
/// One line on what the class holds (the legend of `epo run --dry-run`).
const char* describe(MemClass c);

/// A pointer of RankState (or of one of its slot-layers) the plan binds.
enum class Buf {
  grads, wqkv, wproj, w1s, w2s, wrouter, w1, w2,
  qkv, h, s_fc1, s_act, y, dx, dh, d_qkv, d_s_fc1, d_s_act, logits, topk_idx, topk_w, moe_out,
  loc_offsets, loc_ntpe, permuted_row, row_src_token, expert_offsets, ntpe, counts_all, layout_ws,
  token_slot, ntpr, row_w, fx_permuted_row, fx_row_src, counts_recv, row_src, row_dst,
  x_send, y_recv, x_recv, x_perm, fc1, act, y_perm, d_act, d_fc1, d_xperm,
  x0, loss_grad, output, input_grad, attn_scratch, ones, skew_log_weight, gemm_ws, cublas_ws,
  flex_fwd, flex_bwd, flex_peers_fwd, flex_peers_bwd,
};

/// One device allocation inside the rank's block (256-byte aligned offset).
struct Allocation {
  std::string name;
  MemClass cls = MemClass::scratch;
  std::int64_t offset = 0, bytes = 0;
};

/// A pointer bound to an allocation: slot and layer of a slot-layer buffer; slot -1 with a layer:
/// that layer's weights; layer -1: a rank-wide buffer, or with a slot that slot's embedding output
/// and loss gradient (the micro-batch, for the --check outputs).
struct Binding {
  Buf id;
  int slot = -1, layer = -1;
  int allocation = 0;  ///< index into RankMemoryPlan::allocations
};

struct RankMemoryPlan {
  std::int64_t tokens = 0;         ///< tokens held per micro-batch (all blocks)
  int local_experts = 0;
  std::int64_t capacity_rows = 0;  ///< expert rows the capacity-sized buffers hold
  std::int64_t attn_scratch_elems = 0;
  std::vector<Allocation> allocations;
  std::vector<Binding> bindings;
  std::int64_t total_bytes = 0;    ///< the rank's one device allocation
  std::array<std::int64_t, kNumMemClasses> class_bytes{};
  std::int64_t pinned_bytes = 0;   ///< page-locked host staging (not device memory)

  /// The allocation bound to (id, slot, layer); throws if none (a bug).
  const Allocation& at(Buf id, int slot = -1, int layer = -1) const;
};

/// Bytes of the cuBLAS workspace each rank gives its handle (NVIDIA's recommendation for Hopper).
constexpr std::int64_t kCublasWorkspaceBytes = 32LL << 20;

/// Expert rows a rank's capacity-sized buffers hold: the cost model's expected busiest rank
/// (model::expected_max_load_factor) with a margin, each local expert's segment padded to
/// kExpertRowAlign. A run that routes more rows stops with an error naming the setting.
std::int64_t expert_capacity_rows(const model::Config& cfg, const RunShape& sh,
                                  const RankSetup& setup);

/// The plan of one rank (RankState allocates and binds it).
RankMemoryPlan plan_rank_memory(const model::Config& cfg, const RunShape& sh,
                                const RankSetup& setup);

}  // namespace epo::exec
