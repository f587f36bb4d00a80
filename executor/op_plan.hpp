#pragma once
// What the runner derives from a configuration and its schedule before touching a GPU: the shapes
// of one rank's layer, how many activation slots the schedule needs, and a proof that the
// schedule's stream order and event waits deliver every input an op reads (and never overwrite a
// slot still in use). Pure C++: the CPU tests run it against the schedule builder.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/schedule.hpp"

namespace epo::exec {

using model::ExpertGemm;

/// Shapes of one EP rank's step (all counts per rank and micro-batch).
struct RunShape {
  int num_ranks = 1;          ///< EP ranks
  int seq = 0, mbs = 1;
  int tokens = 0;             ///< tokens per micro-batch on one rank (seq * mbs)
  int hidden = 0;
  int num_heads = 0;
  int qk_head_dim = 0;        ///< per-head dim of the attention score GEMM
  int v_head_dim = 0;         ///< per-head dim of the context
  int qkv_dim = 0;            ///< output width of the fused QKV projection
  int ctx_dim = 0;            ///< input width of the output projection (num_heads * v_head_dim)
  int num_experts = 0, topk = 0, local_experts = 0;
  int expert_ffn = 0;         ///< width of one routed expert (fc1 is 2x with SwiGLU)
  int shared_ffn = 0;         ///< total shared-expert width, 0 = none
  int dense_ffn = 0;          ///< FFN width of dense layers
  int num_layers = 0;
  int first_k_dense = 0;
  int num_microbatches = 1;
  int comm_sms = 0;           ///< SMs of the transport kernels (flex or local copy)
};

RunShape run_shape(const model::Config& cfg);

/// Host-side split of one (slot, layer)'s alltoall token exchange for one rank.
struct Splits {
  std::vector<std::int64_t> send_rows, send_off;  ///< per destination rank (source side)
  std::vector<std::int64_t> recv_rows, recv_off;  ///< per source rank (expert side)
  std::vector<int> loc_rows;                      ///< rows per local expert (all sources)
  std::vector<std::int64_t> loc_off;              ///< padded row offset per local expert
  std::int64_t total_recv = 0;                    ///< rows received (unpadded)
  std::int64_t padded_rows = 0;                   ///< expert rows with each segment padded
};

/// Rows of each expert segment are padded to a multiple of this, so every expert's rows start
/// at the same alignment on an EP rank and on the single-rank reference (same GEMM kernels).
constexpr int kExpertRowAlign = 16;

/// Splits of rank `rank` from every rank's token copies per expert, counts[src * E + e]
/// (experts in contiguous blocks of E / num_ranks per rank). Received rows are ordered
/// [source][local expert][token], the expert-major rows of the grouped GEMM
/// [local expert][source][token], each expert segment padded to a multiple of `align` rows.
Splits alltoall_splits(const std::vector<int>& counts, int num_ranks, int num_experts, int rank,
                       int align = 1);

/// Splits of a flex receive: only the local expert rows are known (loc counts per expert).
Splits flex_splits(const std::vector<int>& loc_counts, int align = 1);

/// The path `requested` resolves to for a rank's expert rows `sp` whose GEMMs have an n x k
/// weight of `weight_elems` elements (automatic: model::automatic_expert_gemm over the mean rows
/// per local expert, the rule the cost model counts launches by; `shared_gpu` under virtual
/// ranks).
ExpertGemm resolve_expert_gemm(ExpertGemm requested, const Splits& sp, double weight_elems,
                               bool shared_gpu);

/// The note epo run prints on its expert GEMMs: model::expert_gemm_path and, when auto chose it,
/// why.
std::string expert_gemm_note(const model::Config& cfg);

/// Log weight of each of `num_experts` experts for the executor's routing draws: 0 except for
/// skewed routing, where it is ln(popularity / top popularity) of model::expert_popularity, so
/// tokens pick the experts (and ranks) the cost model assumes (launch_skewed_logits).
std::vector<float> skew_log_weights(const model::Config& cfg, int num_experts);

/// Activation slots per layer: the most micro-batches whose layer state is alive at once when the
/// schedule's ops are issued (alive from the first forward op to the last backward/wgrad op).
/// Micro-batch m uses slot m % slots.
int activation_slots(const model::Schedule& schedule);

/// For every op, the ops that must have completed on the GPU before it starts because it reads
/// their output (indices into schedule.ops).
std::vector<std::vector<int>> data_producers(const model::Schedule& schedule);

/// Checks that every data producer of every op happens before it through stream FIFO order and
/// event waits, and that an op of micro-batch m + slots never starts before the ops of m on the
/// same layer have finished. Returns one line per violation (empty: the runner may walk it).
std::vector<std::string> verify_schedule_for_runner(const model::Schedule& schedule, int slots);

}  // namespace epo::exec
