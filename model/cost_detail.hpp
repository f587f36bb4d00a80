#pragma once
// Shapes shared by the cost and memory models (internal to model/).
#include "model/config.hpp"
#include "model/cost.hpp"

namespace epo::model::detail {

/// Per-rank sizes of one micro-batch, derived once from the configuration.
struct Shapes {
  double tokens = 0;          ///< tokens of one micro-batch on this rank's attention (seq/cp*mbs)
  double moe_tokens = 0;      ///< tokens this rank routes (tokens / tp with sequence parallel)
  double recv_pairs = 0;      ///< token-expert pairs the busiest EP rank receives
  double recv_pairs_mean = 0; ///< mean token-expert pairs per EP rank
  /// Rows the busiest rank's experts compute: the received pairs times the expert tensor
  /// parallelism (alltoall gathers them over the ETP group after the exchange; allgather and flex
  /// exchange over the ETP x EP group, one copy for each ETP rank), each row on ffn / etp.
  double expert_rows = 0;
  double expert_rows_mean = 0;  ///< the same for the mean rank
  double load_factor = 1;     ///< busiest / mean
  double distinct_ranks = 0;  ///< expected distinct destination ranks per token (own included)
  double distinct_nodes = 0;  ///< expected distinct NVLink domains per token (own included)
  int ep_ranks_per_domain = 1;
  int ep_domains = 1;
  int local_experts = 0;
  double act_bytes = 2;       ///< bytes per activation element (bf16)
  double dispatch_bytes = 2;  ///< bytes per element sent by the forward dispatch (BF16 rows)
  /// The linear layers' GEMM precision (per module: Options::linear_precision).
  Precision quant = Precision::bf16;
  /// FP8 with per-tensor current scaling (Hopper's default recipe): the input's amax is taken in
  /// a pass of its own before the cast, one more read of the BF16 tensor.
  bool fp8_amax_pass = false;
};

Shapes make_shapes(const Config& cfg);

/// expert_gemm_path (cost.hpp) with the configuration's shapes already made.
ExpertGemm expert_gemm_path(const Config& cfg, const Shapes& s);

/// Parameters of one decoder layer's parts (whole model, before any sharding).
struct LayerParams {
  double attention = 0;   ///< attention projections + norms
  double router = 0;
  double shared_expert = 0;
  double expert = 0;      ///< one routed expert
  double dense_mlp = 0;
};
LayerParams layer_params(const ModelSpec& m);

/// Parameters one GPU holds: dense (sharded by tp, replicated over dp*cp) and expert (sharded by
/// ep*etp, replicated over expert-dp), for the first pipeline stage.
struct GpuParams {
  double dense = 0;
  double expert = 0;
};
GpuParams gpu_params(const Config& cfg);

/// Ranks one distributed-optimizer instance shards a parameter over: the dense ones over DP x CP,
/// the experts' over expert-DP, each divided among the instances (at least 1). Whether anything is
/// sharded (the distributed optimizer, Megatron-FSDP) is the caller's to say.
struct ShardRanks {
  double dense = 1, expert = 1;
};
ShardRanks shard_ranks(const Config& cfg);
/// Decoder layers on one pipeline rank, as the layer costs count them (a hybrid model's MoE
/// layers, which carry their share of the other mixers; layer_hybrid.cpp).
double rank_decoder_layers(const Config& cfg);

/// One micro-batch through this rank's decoder layers, each op alone, us: the forward ops, or
/// the backward and weight-gradient ops.
double rank_layers_us(const Config& cfg, const StepCosts& sc, bool forward);
/// A ring collective (all-gather or reduce-scatter) over n ranks whose full buffer is `bytes`, us.
double ring_time_us(const HardwareProfile& hw, double bytes, int n, bool over_network);
/// Megatron-FSDP's costs (use_megatron_fsdp): the per-micro-batch all-gathers and
/// reduce-scatters and what of them the step sees (StepCosts::fsdp_exposed_us); the end-of-step
/// reduction and gather keep only what crosses the distributed-optimizer instances.
void add_fsdp_costs(const Config& cfg, StepCosts& sc);

}  // namespace epo::model::detail
