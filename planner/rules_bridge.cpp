// Megatron-Bridge validation (comm_overlap.py, flex_dispatcher_backend.py; reference §2.5) and the
// Bridge documentation's advice on when overlap does not pay (§7).
#include "planner/rules_common.hpp"

namespace epo::planner::rules {

namespace {
constexpr const char* kCo = "Megatron-Bridge src/megatron/bridge/training/comm_overlap.py:470-560";
constexpr const char* kFlex = "Megatron-Bridge src/megatron/bridge/training/flex_dispatcher_backend.py:33-88";
constexpr const char* kDoc = "Megatron-Bridge docs/training/communication-overlap.md";
bool deepep_gpu_ok(const Config& c) {
  const int m = c.hw.compute_capability_major;
  const std::string& n = c.hw.gpu_name;
  return m == 8 || m == 9 || n.rfind("NVIDIA B200", 0) == 0 || n.rfind("NVIDIA B300", 0) == 0;
}
bool hybridep_gpu_ok(const Config& c) {
  const int m = c.hw.compute_capability_major;
  return m == 8 || m == 9 || m == 10;
}
}  // namespace

void add_bridge_rules(std::vector<Rule>& out) {
  add(out, "BRIDGE-OVL-NUM-EXPERTS", kError, kCo, kAllVersions, kBridge,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.model.num_experts > 1) return "";
        return cat("overlap_moe_expert_parallel_comm is only supported when num_moe_experts > 1, "
                   "but got ", c.model.num_experts);
      },
      "drop --overlap for this model");
  add(out, "BRIDGE-DELAY-WGRAD-OGR-TE", kError, kCo, kAllVersions, kBridge,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute || !c.opt.overlap_grad_reduce || x.te.at_least(2, 7))
          return "";
        return cat("delay_wgrad_compute with overlap_grad_reduce needs TE >= 2.7; TE is ", ver(x.te));
      },
      "upgrade Transformer Engine (--te 2.7), or set options.overlap_grad_reduce false");
  add(out, "BRIDGE-DELAY-WGRAD-GAF-TE", kError, kCo, kAllVersions, kBridge,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute || !c.opt.gradient_accumulation_fusion || x.te.at_least(2, 7))
          return "";
        return cat("delay_wgrad_compute with gradient_accumulation_fusion needs TE >= 2.7; TE is ",
                   ver(x.te));
      },
      "upgrade Transformer Engine (--te 2.7)");
  add(out, "BRIDGE-DELAY-WGRAD-GRAPH-TE", kError, kCo, kAllVersions, kBridge,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute || !wgrad_in_graph_scope(c) || x.te.at_least(2, 12))
          return "";
        return cat("delayed wgrad inside a CUDA-graphed scope needs TE >= 2.12; TE is ", ver(x.te));
      },
      "upgrade Transformer Engine (--te 2.12), or drop attn (and moe_router with a shared expert) from --cuda-graph-modules");
  add(out, "BRIDGE-DELAY-WGRAD-GRAPH-GAF", kError, kCo, kAllVersions, kBridge,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.delay_wgrad_compute || !wgrad_in_graph_scope(c) ||
            c.opt.gradient_accumulation_fusion)
          return "";
        return "delayed wgrad inside a CUDA-graphed scope needs gradient_accumulation_fusion";
      },
      "set options.gradient_accumulation_fusion true in the config file");
  add(out, "BRIDGE-DELAY-WGRAD-GRAPH-BIAS", kError, kCo, kAllVersions, kBridge,
      [](const Config& c, const ValidationContext& x) -> std::string {
        const bool bias = x.add_bias_linear || x.add_qkv_bias || c.model.linear_bias;
        if (!c.opt.delay_wgrad_compute || !graphed(c, "attn") || !bias) return "";
        return "CUDA graph with delay_wgrad_compute does not support attention bias for now";
      },
      "drop --add-bias-linear / --add-qkv-bias, or attn from --cuda-graph-modules");
  add(out, "BRIDGE-DEEPEP-GPU", kError, kFlex, kAllVersions, kBridge,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!is_deepep(c) || deepep_gpu_ok(c) || x.bridge_apply_flex_backend) return "";
        return cat("DeepEP is supported for Ampere, Hopper, and Blackwell (B200/B300) GPUs. "
                   "Current GPU: ", c.hw.gpu_name);
      },
      "use --flex-backend hybridep on this GPU");
  add(out, "BRIDGE-DEEPEP-FALLBACK", kWarning, kFlex, kAllVersions, kBridge,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!is_deepep(c) || deepep_gpu_ok(c) || !x.bridge_apply_flex_backend) return "";
        return cat("apply_flex_dispatcher_backend silently falls back to alltoall for DeepEP on ",
                   c.hw.gpu_name, "; the job runs the alltoall dispatcher, not DeepEP");
      },
      "use --flex-backend hybridep on this GPU");
  add(out, "BRIDGE-HYBRIDEP-GPU", kError, kFlex, kAllVersions, kBridge,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!is_hybridep(c) || hybridep_gpu_ok(c) || x.bridge_apply_flex_backend) return "";
        return cat("HybridEP is supported for GB200, GB300 with NVL72 and for Ampere, Hopper, B200 "
                   "and B300 GPUs. Current GPU: ", c.hw.gpu_name);
      },
      "use --dispatcher alltoall on this GPU");
  add(out, "BRIDGE-HYBRIDEP-FALLBACK", kWarning, kFlex, kAllVersions, kBridge,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!is_hybridep(c) || hybridep_gpu_ok(c) || !x.bridge_apply_flex_backend) return "";
        return cat("apply_flex_dispatcher_backend silently falls back to alltoall for HybridEP on ",
                   c.hw.gpu_name);
      },
      "use --dispatcher alltoall on this GPU");
  add(out, "BRIDGE-OVL-MODEL-ONLY", kWarning,
      "Megatron-Bridge src/megatron/bridge/training/comm_overlap.py:397-439,618", kAllVersions,
      kBridge,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!x.bridge_overlap_on_model_only ||
            (!overlap(c) && !c.opt.delay_wgrad_compute))
          return "";
        return "overlap/delay_wgrad set only on model.*: CommOverlapConfig.setup() overwrites them "
               "with its own value (False), so the job runs without overlap";
      },
      "set comm_overlap.overlap_moe_expert_parallel_comm=true (and comm_overlap.delay_wgrad_compute), as epo plan writes them for Bridge; drop --bridge-overlap-on-model-only");
  add(out, "BRIDGE-FLEX-BACKEND-WITHOUT-FLEX", kWarning, kDoc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!x.flex_backend_given || is_flex(c)) return "";
        return cat("moe_flex_dispatcher_backend=", model::to_string(c.opt.flex_backend),
                   " is given but the dispatcher is ", model::to_string(c.opt.dispatcher),
                   ": the backend is ignored");
      },
      "use --dispatcher flex, or drop --flex-backend (and options.flex_backend in the config file)");
  add(out, "BRIDGE-OVL-SMALL-EP", kWarning, kDoc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.opt.dispatcher != Dispatcher::alltoall || c.par.ep <= 1 || c.par.ep > 4 ||
            num_nodes(c) > 2)
          return "";
        return cat("overlap with alltoall, ep = ", c.par.ep, " on ", num_nodes(c),
                   " node(s): small-EP alltoall runs can get slower, the scheduling overhead is "
                   "larger than the communication hidden");
      },
      "measure without --overlap; use overlap for large EP, inter-node all-to-all");
  add(out, "BRIDGE-OVL-FEW-MICROBATCHES", kWarning, kDoc, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!overlap(c) || c.par.dp <= 0) return "";
        const int m = c.par.num_microbatches();
        const int want = std::max(4, 2 * c.par.pp);
        if (m >= want) return "";
        return cat("only ", m, " micro-batch(es) per step: the first forward and the last backward "
                   "(and the warm-up/cool-down) cannot be overlapped, little is hidden");
      },
      "raise --gbs or lower --mbs so each rank has >= max(4, 2*pp) micro-batches");
}

}  // namespace epo::planner::rules
