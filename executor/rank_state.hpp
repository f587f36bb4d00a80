#pragma once
// Everything one EP rank owns on its GPU: streams, cuBLAS handle, weights and gradients of the
// layers it runs, activations of each (slot, layer), receive buffers, pinned host staging and the
// per-op events. Allocated once, from one device allocation laid out by plan_rank_memory (so
// out-of-memory is reported before anything runs, and `epo run --dry-run` prints the same plan). A "reference" rank holds all experts and the tokens of all EP ranks (`blocks`
// of tokens, each run through attention with the same GEMM shapes as on its own rank).
#include <cstdint>
#include <memory>
#include <vector>

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <nccl.h>

#include "executor/gpu_resources.hpp"
#include "executor/memory_plan.hpp"
#include "executor/op_plan.hpp"
#include "kernels/launchers.hpp"
#include "model/config.hpp"

namespace epo::exec {

using bf16 = __nv_bfloat16;

struct LayerWeights {
  bool moe = true;
  int mlp_ffn = 0;  ///< shared-expert width (MoE layer) or dense FFN width (dense layer); 0 none
  bf16 *wqkv = nullptr, *wproj = nullptr;  // [H][qkv], [ctx][H]
  bf16* wrouter = nullptr;                 // [H][E]
  bf16 *w1s = nullptr, *w2s = nullptr;     // [H][2f], [f][H] (shared expert or dense MLP)
  bf16 *w1 = nullptr, *w2 = nullptr;       // [El][H][2F], [El][F][H]
  bf16 *g_wqkv = nullptr, *g_wproj = nullptr, *g_w1s = nullptr, *g_w2s = nullptr;
  bf16 *g_w1 = nullptr, *g_w2 = nullptr;
  std::int64_t dense_grad_elems = 0;  ///< g_wqkv..g_w2s are one contiguous block of this size
};

/// Activations of one micro-batch slot of one layer.
struct SlotLayer {
  // forward, source side
  bf16 *qkv = nullptr, *h = nullptr, *s_fc1 = nullptr, *s_act = nullptr;
  bf16* y = nullptr;               // [NT][H]; holds the shared expert's output until the combine
  float* logits = nullptr;
  int* topk_idx = nullptr;
  float* topk_w = nullptr;
  int *permuted_row = nullptr, *row_src_token = nullptr, *expert_offsets = nullptr;
  int* ntpe = nullptr;             // [E] token copies per expert (alltoall counts)
  int* counts_all = nullptr;       // [R][E] all ranks' ntpe (NCCL all-gather target)
  void* layout_ws = nullptr;
  bf16* x_send = nullptr;          // [NT*K][H]; reused for the combine-backward rows
  bf16* y_recv = nullptr;          // [NT*K][H] (x_send's memory); the dispatch-backward rows too
  int *token_slot = nullptr, *ntpr = nullptr;  // flex layout
  // expert side
  bf16* x_recv = nullptr;          // [cap][H]; also y_back, d_recv, d_back (disjoint lifetimes)
  bf16 *x_perm = nullptr, *fc1 = nullptr, *act = nullptr, *y_perm = nullptr;  // y_perm = d_out
  bf16 *d_act = nullptr, *d_fc1 = nullptr, *d_xperm = nullptr;
  int *row_src = nullptr, *row_dst = nullptr, *loc_offsets = nullptr, *loc_ntpe = nullptr;
  int* counts_recv = nullptr;      // [R][El] device copy of the received split
  float* row_w = nullptr;          // [cap] flex: router weight of each expert row
  int *fx_permuted_row = nullptr, *fx_row_src = nullptr;  // flex receive-side layout
  // backward, source side
  bf16* moe_out = nullptr;         // [NT][H]; also dh_moe
  bf16 *dh = nullptr, *d_s_act = nullptr, *d_s_fc1 = nullptr, *d_qkv = nullptr, *dx = nullptr;
  // host
  int* counts_host = nullptr;      // pinned [R][E]
  int* recv_counts_host = nullptr; // pinned [R][El]
  int* loc_ntpe_host = nullptr;    // pinned [El]
  Splits splits;
  std::uint64_t flex_seq_fwd = 0, flex_seq_bwd = 0;
  std::unique_ptr<Event> counts_ready;
};

/// One rank's flex buffers (forward set and backward set) and their device peer tables.
struct FlexState {
  kernels::FlexBuffers fwd, bwd;
  kernels::FlexBuffers *peers_fwd = nullptr, *peers_bwd = nullptr;  // device [R]
  kernels::FlexError* error = nullptr;                               // mapped pinned
  std::uint64_t seq_fwd = 0, seq_bwd = 0;
};

class RankState {
 public:
  RankState(const model::Config& cfg, const RunShape& shape, const RankSetup& setup);
  RankState(const RankState&) = delete;
  RankState& operator=(const RankState&) = delete;

  const RunShape& shape() const { return sh_; }
  const RankSetup& setup() const { return set_; }
  int rank() const { return set_.rank; }
  int tokens() const { return nt_; }             ///< tokens held per micro-batch (all blocks)
  int local_experts() const { return el_; }
  std::int64_t capacity_rows() const { return cap_; }
  std::int64_t allocated_bytes() const { return static_cast<std::int64_t>(arena_.bytes()); }
  const RankMemoryPlan& memory_plan() const { return plan_; }
  const model::Config& config() const { return cfg_; }

  cudaStream_t compute() const { return compute_.get(); }
  cudaStream_t comm() const { return comm_.get(); }
  cudaStream_t grad() const { return grad_.get(); }
  cublasHandle_t blas() const { return blas_.get(); }

  LayerWeights& weights(int layer) { return layers_[layer]; }
  SlotLayer& slot(int microbatch, int layer) {
    return slots_[microbatch % set_.slots][layer];
  }
  bf16* embedding_out(int microbatch) { return x0_[microbatch % set_.slots]; }
  bf16* loss_grad(int microbatch) { return g_[microbatch % set_.slots]; }
  bf16* output(int mb) { return outputs_.empty() ? nullptr : outputs_[mb]; }
  bf16* input_grad(int mb) { return input_grads_.empty() ? nullptr : input_grads_[mb]; }
  bf16* attn_scratch() { return attn_scratch_; }
  std::int64_t attn_scratch_elems() const { return attn_scratch_elems_; }
  const float* ones() const { return ones_; }
  const float* skew_log_weight() const { return skew_log_weight_; }
  /// Pointer-array workspace of the grouped expert GEMMs (kernels::grouped_gemm_workspace_bytes).
  void* gemm_workspace() const { return gemm_ws_; }
  FlexState& flex() { return flex_; }
  ncclComm_t nccl = nullptr;         ///< set by the runner in NCCL mode
  /// The counts all-gather's communicator (NCCL mode): a split of `nccl`, as Megatron's TPxEP
  /// group is apart from its EP group, so the all-gather issued in pre_dispatch on the compute
  /// stream never queues behind the other micro-batch's token all-to-all.
  ncclComm_t nccl_meta = nullptr;
  bool dense_grads_reduced = false;  ///< dp_grad_reduce summed dense grads over ranks

  /// Zeros every gradient (start of a step), on the compute stream.
  void zero_grads();
  /// Deterministic seeds: token block b of micro-batch mb, and its loss gradient.
  std::uint64_t token_seed(int block, int mb) const;
  std::uint64_t grad_seed(int block, int mb) const;

  /// Per-op events of the schedule being run: start/end of op i (resized by the runner).
  std::vector<Event> op_start, op_end;
  Event origin;

 private:
  void bind(const Binding& b, char* base);
  void bind_grads(bf16* g, std::int64_t elems);
  void init_weights();

  model::Config cfg_;
  RunShape sh_;
  RankSetup set_;
  int nt_ = 0, el_ = 0;
  std::int64_t cap_ = 0;
  RankMemoryPlan plan_;
  Stream compute_, comm_, grad_;
  CublasHandle blas_;
  DeviceBuffer arena_;
  PinnedBuffer pinned_;
  std::vector<LayerWeights> layers_;
  std::vector<std::vector<SlotLayer>> slots_;
  std::vector<bf16*> x0_, g_, outputs_, input_grads_;
  bf16* attn_scratch_ = nullptr;
  std::int64_t attn_scratch_elems_ = 0;
  float* ones_ = nullptr;
  float* skew_log_weight_ = nullptr;
  char* gemm_ws_ = nullptr;
  bf16* grad_block_ = nullptr;
  std::int64_t grad_block_elems_ = 0;
  FlexState flex_;
  std::unique_ptr<PinnedBuffer> flex_error_holder_;
};

}  // namespace epo::exec
