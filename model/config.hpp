#pragma once
// A configuration to predict, validate, plan or run: model + hardware + GPUs + parallel layout +
// Megatron options. JSON form: see config_io.hpp (strict, versioned).
#include <string>
#include <utility>
#include <vector>

#include "model/hardware.hpp"
#include "model/model_spec.hpp"

namespace epo::model {

enum class Dispatcher { allgather, alltoall, flex };
enum class FlexBackend { deepep, hybridep };
/// GEMM precision of Transformer Engine's linear layers: bf16, FP8 (--fp8-format) or NVFP4
/// (--fp4-format e2m1 with the nvfp4 recipe; Blackwell and later).
enum class Precision { bf16, fp8, nvfp4 };
/// FP8 scaling recipe (Megatron's --fp8-recipe): what Transformer Engine keeps of a quantized
/// tensor. auto: mxfp8 on Blackwell, tensorwise before (what Bridge's FP8 presets run).
enum class Fp8Recipe { automatic, tensorwise, delayed, mxfp8, blockwise };
/// Dtype of the model parameters (Megatron's bf16 / fp16 flags; fp32 = neither). FP8 runs on top
/// of bf16 or fp16 parameters.
enum class ParamsDtype { bf16, fp16, fp32 };
enum class RecomputeGranularity { none, selective, full };
enum class CudaGraphImpl { none, local, transformer_engine, full_iteration };
/// Megatron's --attention-backend: auto, flash and fused run one fused kernel; unfused and local
/// compute the scores as a GEMM, a softmax kernel and a second GEMM, and keep the probabilities.
enum class AttentionBackend { automatic, flash, fused, unfused, local };
/// Megatron-FSDP's data_parallel_sharding_strategy: what each data-parallel rank keeps a shard of
/// (the optimizer states; also the gradients; also the parameters).
enum class FsdpSharding { no_shard, optim, optim_grads, optim_grads_params };
/// How tokens are routed: force-balanced (every expert the same load), uniform random scores,
/// skewed (expert popularity ~ Zipf with exponent `skew`), or trained (a trained router without
/// forced balance: per-expert loads spread with kTrainedRouterExpertCv, routing_stats.hpp).
enum class RoutingKind { balanced, uniform, skewed, trained };
/// How the executor issues a rank's expert GEMMs through cuBLAS (and the model counts them).
enum class ExpertGemm {
  automatic,   ///< automatic_expert_gemm (cost.hpp): by rows per expert, weight size, GPU sharing
  per_expert,  ///< one GEMM per non-empty expert
  grouped,     ///< one grouped launch (cublasGemmGroupedBatchedEx) per batch of experts
  streams,     ///< per-expert GEMMs spread over four streams
  strided,     ///< one strided-batched GEMM over equal experts (balanced routing), else per expert
};

struct Parallel {
  int tp = 1;
  int pp = 1;
  int vpp = 1;          ///< virtual stages per pipeline rank (1 = not interleaved)
  int cp = 1;
  int ep = 1;
  int etp = 1;
  int dp = 0;           ///< derived: gpus / (tp*pp*cp)
  bool sequence_parallel = false;
  int micro_batch_size = 1;
  int global_batch_size = 0;
  int seq_length = 4096;
  /// Megatron's pipeline_model_parallel_layout, e.g. "Et|(tt|)*30mL" ("" = none; see
  /// model/pipeline_layout.hpp).
  std::string pipeline_layout;
  int first_stage_layers = 0;  ///< num_layers_in_first_pipeline_stage (0 = even split)
  int last_stage_layers = 0;   ///< num_layers_in_last_pipeline_stage (0 = even split)
  bool account_for_embedding_in_pipeline_split = false;
  bool account_for_loss_in_pipeline_split = false;

  /// Micro-batches per step on one data-parallel rank (gbs / (mbs * dp)).
  int num_microbatches() const {
    return static_cast<int>(global_batch_size / (static_cast<long long>(micro_batch_size) * dp));
  }
  /// Expert data-parallel size (gpus / (etp*ep*pp)).
  int expert_dp(int num_gpus) const {
    return static_cast<int>(num_gpus / (static_cast<long long>(etp) * ep * pp));
  }
};

struct Routing {
  RoutingKind kind = RoutingKind::uniform;
  double skew = 0.0;    ///< Zipf exponent for `skewed` (0 = uniform popularity)
  unsigned seed = 1;    ///< for samplers and the executor
};

struct Options {
  Dispatcher dispatcher = Dispatcher::alltoall;
  FlexBackend flex_backend = FlexBackend::deepep;
  bool overlap_moe_expert_parallel_comm = false;
  bool delay_wgrad_compute = false;
  bool ep_overlap_early_attn_memory_release = false;
  int comm_sms = 0;     ///< SMs for flex dispatch/combine; 0 = backend default
  bool moe_permute_fusion = true;
  bool moe_shared_expert_overlap = false;
  bool moe_grouped_gemm = true;
  RecomputeGranularity recompute_granularity = RecomputeGranularity::none;
  std::string recompute_method;                 ///< "", "uniform" or "block"
  int recompute_num_layers = 0;
  std::vector<std::string> recompute_modules;   ///< selective recompute modules
  /// Fine-grained activation offloading (--offload-modules): these modules' inputs wait for their
  /// backward in host memory (attn_norm, qkv_linear, core_attn, attn_proj, mlp_norm, expert_fc1,
  /// moe_act, fused_group_mlp). Memory only.
  std::vector<std::string> offload_modules;
  CudaGraphImpl cuda_graph_impl = CudaGraphImpl::none;
  std::vector<std::string> cuda_graph_modules;  ///< attn, mlp, moe, moe_router, moe_preprocess
  int cuda_device_max_connections = 32;
  /// A full garbage collection every this many steps (Megatron's --manual-gc with
  /// --manual-gc-interval; Bridge's train.manual_gc); 0 = Python's automatic collector.
  int manual_gc_interval = 0;
  Precision precision = Precision::bf16;
  Fp8Recipe fp8_recipe = Fp8Recipe::automatic;
  /// Primary weights kept quantized (--fp8-param-gather, with NVFP4 --fp4-param-gather; Bridge's
  /// tensorwise, MXFP8 and NVFP4 presets set it): the GEMM weights have no bf16 copy, and the
  /// distributed optimizer gathers them quantized.
  bool fp8_param_gather = false;
  /// Megatron's first_last_layers_bf16 with num_layers_at_start_in_bf16 / _at_end_in_bf16: the
  /// first and last decoder layers' linears stay in BF16 under FP8 or NVFP4 (0 and 0 = off).
  int bf16_layers_start = 0;
  int bf16_layers_end = 0;
  /// Linear layers kept in a higher precision than `precision` (Megatron-Core's quantization
  /// recipe file, Bridge's model.quant_recipe): modules in bf16_linears run in BF16, those in
  /// fp8_linears in FP8 under NVFP4. Names: attn, latent, mtp, shared_expert, experts, mlp,
  /// mamba_in, mamba_out (kLinearModules).
  std::vector<std::string> bf16_linears;
  std::vector<std::string> fp8_linears;
  /// The precision the linear GEMM `gemm_name` (the cost model's component name) runs in, in a
  /// layer quantized to `base`: base, its module's override above, and BF16 for the output layer
  /// (Megatron's own ColumnParallelLinear, outside Transformer Engine).
  Precision linear_precision(const char* gemm_name, Precision base) const;
  bool quantized() const { return precision != Precision::bf16; }
  ParamsDtype params_dtype = ParamsDtype::bf16;
  double attention_dropout = 0.0;  ///< Megatron's default is 0.1; MoE recipes set 0
  double hidden_dropout = 0.0;     ///< likewise
  /// Megatron-Core 0.18+: overlap the dispatch backward with the experts' wgrad (excludes EP overlap).
  bool overlap_dispatch_backward_with_experts_wgrad = false;
  /// Per-backend SM counts (moe_deepep_num_sms / moe_hybridep_num_sms; deprecated on main in
  /// favour of comm_sms = moe_flex_dispatcher_num_sms); 0 = unset.
  int deepep_num_sms = 0;
  int hybridep_num_sms = 0;
  Routing routing;
  ExpertGemm expert_gemm = ExpertGemm::automatic;  ///< executor's expert GEMM path
  double capacity_factor = 0.0;                 ///< 0 = dropless
  bool high_priority_a2a_comm_stream = false;
  /// HybridEP's per-rank receive capacity (moe_expert_rank_capacity_factor x the mean tokens a
  /// rank receives; 0 = unset): the buffers are sized ahead, so the dispatch needs no
  /// device-to-host synchronisation of token counts. With moe_paged_stash the experts' saved
  /// activations go to paged buffers of that size: what Bridge's full-iteration CUDA-graph recipes
  /// set, a graph being unable to capture a host synchronisation.
  double rank_capacity_factor = 0.0;
  bool paged_stash = false;
  /// The token counts stay on the device (HybridEP with a rank capacity and the paged stash).
  bool device_side_token_counts() const {
    return dispatcher == Dispatcher::flex && flex_backend == FlexBackend::hybridep &&
           rank_capacity_factor > 0 && paged_stash;
  }
  /// Transformer Engine's CuTe DSL fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1): fc1, the
  /// activation and fc2 of the local experts in one fused chain on Blackwell (SM100+); ignored on
  /// older GPUs.
  bool fused_grouped_mlp = false;
  AttentionBackend attention_backend = AttentionBackend::automatic;
  /// --cross-entropy-loss-fusion (Bridge's recipes: on): the loss works on the bf16 logits in
  /// place; without it Megatron's vocab-parallel cross-entropy keeps an fp32 copy of them.
  bool cross_entropy_fusion = true;
  /// --cross-entropy-fusion-impl: te (what Bridge's performance scripts set) runs TE's kernel on
  /// the bf16 logits in place (TE up to 2.17; 2.18 keeps an fp32 gradient instead); native
  /// (Megatron-LM's default) is Megatron's vocab-parallel cross-entropy under torch.compile,
  /// which keeps an fp32 softmax as the unfused loss does.
  bool cross_entropy_te = true;
  /// bias_activation_fusion (Bridge's MoE models: on; Megatron-LM's --no-bias-swiglu-fusion or
  /// --no-bias-gelu-fusion: off): the experts' GLU weighted by the routing probabilities in one
  /// kernel. Off (and for GELU experts always: Megatron has no weighted GELU kernel) the
  /// activation, its product with the fp32 probabilities and the cast back run apart.
  bool bias_activation_fusion = true;
  /// use_fused_weighted_squared_relu (Bridge's Nemotron recipes: on; Megatron-LM's default off):
  /// the same for the squared-ReLU experts of hybrid models.
  bool fused_weighted_squared_relu = true;
  /// The loss keeps an fp32 copy of the logits (its softmax) for the backward.
  bool loss_keeps_fp32_logits() const { return !(cross_entropy_fusion && cross_entropy_te); }
  /// The scores and probabilities materialised (unfused or local attention).
  bool unfused_attention() const {
    return attention_backend == AttentionBackend::unfused ||
           attention_backend == AttentionBackend::local;
  }
  bool distributed_optimizer = true;
  /// Megatron-FSDP (use_megatron_fsdp) in place of the DDP gradient buffers, with its sharding
  /// strategy. optim_grads reduce-scatters every micro-batch's gradients; optim_grads_params also
  /// all-gathers every layer's parameters before its forward and again before its backward.
  bool megatron_fsdp = false;
  FsdpSharding fsdp_sharding = FsdpSharding::optim_grads_params;
  /// HSDP (Megatron-FSDP with several distributed-optimizer instances): the optimizer states
  /// also sharded across the instances (outer_dp_sharding_strategy = optim), not replicated.
  bool fsdp_outer_optim = false;
  bool fsdp_shards_grads() const {
    return megatron_fsdp && (fsdp_sharding == FsdpSharding::optim_grads ||
                             fsdp_sharding == FsdpSharding::optim_grads_params);
  }
  bool fsdp_shards_params() const {
    return megatron_fsdp && fsdp_sharding == FsdpSharding::optim_grads_params;
  }
  /// Distributed-optimizer instances (num_distributed_optimizer_instances): each shards the
  /// optimizer over DP x CP / instances ranks (experts over expert-DP / instances); gradients are
  /// reduce-scattered inside an instance, then all-reduced across instances.
  int distributed_optimizer_instances = 1;
  /// Instances that shard the optimizer apart (1 without the distributed optimizer, which
  /// all-reduces over the whole group).
  int optimizer_instances() const { return distributed_optimizer ? distributed_optimizer_instances : 1; }
  bool overlap_grad_reduce = true;
  /// The distributed optimizer's parameter all-gather overlapped with the next step's forward
  /// (--overlap-param-gather, Bridge's default with DP > 1; Megatron needs overlap_grad_reduce
  /// for it); otherwise the all-gather runs exposed after the optimizer step.
  bool overlap_param_gather = true;
  bool param_gather_overlapped() const {
    return overlap_param_gather && overlap_grad_reduce;
  }
  bool gradient_accumulation_fusion = true;
  /// Megatron's bias_dropout_fusion: 1 on (Megatron-LM's default), 0 off
  /// (--no-bias-dropout-fusion), -1 the model's own setting (off where its experts carry biases,
  /// as Megatron-Bridge's GPT-OSS provider sets it, else on). TEGroupedMLP needs it off with
  /// biased experts. The cost model does not follow it.
  int bias_dropout_fusion = -1;
  bool bias_dropout_fusion_on(bool biased_experts) const {
    return bias_dropout_fusion < 0 ? !biased_experts : bias_dropout_fusion > 0;
  }
  /// Main-gradient buffers in fp32 (Megatron-LM's default for bf16); false = bf16, as the
  /// Megatron-Bridge performance recipes set (ddp.grad_reduce_in_fp32 = false). Memory only.
  bool grad_reduce_in_fp32 = true;
  /// Precision-aware optimizer with bf16 Adam moments (exp_avg, exp_avg_sq); fp32 master weights
  /// stay. Memory only.
  bool adam_moments_bf16 = false;

  /// SMs the flex backend uses when comm_sms is 0 (DeepEP 20; HybridEP 24 inside one NVLink
  /// domain, 8 across domains).
  int effective_comm_sms(bool single_nvlink_domain) const;
  /// Does selective recompute cover `module` (Megatron's recompute_modules names)? No modules
  /// listed means Megatron's default, core_attn (TransformerConfig.__post_init__); an explicit
  /// empty list is read as no recompute at all.
  bool recomputes(const char* module) const;
};

struct Config {
  static constexpr int kSchemaVersion = 1;
  std::string model_name;     ///< preset name (or "custom")
  std::string hardware_name;  ///< preset or profile name
  ModelSpec model;
  HardwareProfile hw;
  int num_gpus = 0;
  /// > 0: the num_gpus EP ranks are virtual ranks sharing ONE physical GPU (the executor's
  /// single-GPU mode): compute of all ranks shares the device and the EP transport is a local copy
  /// kernel. Must equal num_gpus when set.
  int virtual_ranks = 0;
  /// The step runs decoder layers only: no embedding and no LM head/loss (what `epo run`
  /// executes), so predictions compare like with like.
  bool decoder_only = false;
  /// Fraction of the GPU's memory a configuration must leave free to count as fitting (epo plan
  /// keeps a margin for what the memory model misses; predictions use 0). Not serialised.
  double memory_headroom = 0.0;
  Parallel par;
  Options opt;

  /// Fills derived fields (dp) and checks the layout against the GPUs and the model; throws an
  /// input error naming the field, its value and what is allowed.
  void derive_and_check();
  /// Tokens one micro-batch holds on one rank of the attention part (seq/(cp) * mbs).
  long long tokens_per_microbatch() const;
  /// Number of EP ranks inside one NVLink domain.
  int ep_ranks_per_nvlink_domain() const;
  /// EP ranks per node-level group (number of distinct NVLink domains the EP group spans).
  int ep_num_domains() const;
  /// Layers held by the largest (pipeline rank, virtual stage) chunk (uneven splits round up).
  int layers_per_chunk() const;
};

const char* to_string(Dispatcher d);
const char* to_string(FlexBackend b);
const char* to_string(Precision p);
const char* to_string(Fp8Recipe r);
const char* to_string(ParamsDtype d);
const char* to_string(RecomputeGranularity g);
const char* to_string(CudaGraphImpl i);
const char* to_string(AttentionBackend b);
const char* to_string(FsdpSharding f);
const char* to_string(RoutingKind k);
const char* to_string(ExpertGemm g);

// Parsers for the names above; `where` names the flag or JSON key path in the error message.
Dispatcher parse_dispatcher(const std::string& s, const std::string& where);
FlexBackend parse_flex_backend(const std::string& s, const std::string& where);
Precision parse_precision(const std::string& s, const std::string& where);
Fp8Recipe parse_fp8_recipe(const std::string& s, const std::string& where);
/// Megatron's --fp8-recipe value: its own names, and 'custom' (a user's quantizer factory) costed
/// as tensorwise.
Fp8Recipe parse_megatron_fp8_recipe(const std::string& s, const std::string& where);
ParamsDtype parse_params_dtype(const std::string& s, const std::string& where);
/// The module names bf16_linears and fp8_linears take, '|'-separated.
extern const char* const kLinearModules;
/// Checks a list of linear-module names (each once, each in kLinearModules).
void check_linear_modules(const std::vector<std::string>& names, const std::string& where);
/// Whether TE's CuTe DSL fused grouped MLP runs (fused_grouped_mlp asked for): Megatron takes the
/// fused experts only without expert tensor parallelism and with SwiGLU (experts.py,
/// _is_fused_impl_supported), TE's kernel only for MXFP8 on Blackwell; elsewhere the unfused path.
bool fused_grouped_mlp_runs(const Config& cfg);
/// The tensors of rows x ffn an expert activation keeps beyond the fused weighted kernel's (its
/// input and the fc2 input) when Megatron runs it unfused (experts.py bias_act_func, MLP with a
/// per-token scale): the activation's output before the product with the probabilities (GELU),
/// and also the GLU's or squared ReLU's intermediate (SiLU or ReLU output); 0 where it is fused.
int unfused_activation_tensors(const Config& cfg);
/// Whether a Megatron-Bridge mixed-precision preset (mixed_precision.py) keeps the primary weights
/// in FP8 (fp8_param_gather): its delayed-, current-scaling and MXFP8 presets do, the sub-channel
/// (blockwise) ones and the BF16/FP16 ones do not.
bool bridge_preset_gathers_fp8_params(const std::string& preset);
/// The FP8 recipe a Megatron-Bridge mixed-precision preset names (delayed, current scaling =
/// tensorwise, sub-channel = blockwise, MXFP8); automatic for the others.
Fp8Recipe bridge_preset_fp8_recipe(const std::string& preset);
/// The FP8 recipe a configuration runs: its own, or for `automatic` what Bridge's performance
/// recipes take on its GPU (MXFP8 on Blackwell, per-tensor current scaling before).
Fp8Recipe fp8_recipe(const Config& cfg);
/// The first and last layers a Megatron-Bridge mixed-precision preset keeps in BF16
/// (first_last_layers_bf16 with its two counts; {0, 0} = none): 1 and 1 for the current-scaling
/// presets, 2 and 2 for the Nemotron-H and Nano-v2 ones, 0 and 14 for Nemotron-3-Super's NVFP4.
std::pair<int, int> bridge_preset_bf16_layers(const std::string& preset);
RecomputeGranularity parse_recompute(const std::string& s, const std::string& where);
CudaGraphImpl parse_cuda_graph_impl(const std::string& s, const std::string& where);
AttentionBackend parse_attention_backend(const std::string& s, const std::string& where);
/// --cross-entropy-fusion-impl: true for "te", false for "native"; anything else is an input error.
bool parse_cross_entropy_te(const std::string& s, const std::string& where);
FsdpSharding parse_fsdp_sharding(const std::string& s, const std::string& where);
RoutingKind parse_routing(const std::string& s, const std::string& where);
/// "auto", "per-expert", "grouped", "streams" or "strided".
ExpertGemm parse_expert_gemm(const std::string& s, const std::string& where);

}  // namespace epo::model
