// DeepEP kernel limits (deep_ep/buffer.py, csrc/deep_ep.cpp; reference §2.4) and the reported
// inter-node failures (§8).
#include "planner/rules_common.hpp"

namespace epo::planner::rules {

namespace {
constexpr const char* kBuf = "DeepEP deep_ep/buffer.py (set_num_sms, get_dispatch_config)";
constexpr int kSupportedRanks[] = {2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 144, 160};
bool supported_ranks(int n) {
  for (int r : kSupportedRanks)
    if (r == n) return true;
  return false;
}
}  // namespace

void add_deepep_rules(std::vector<Rule>& out) {
  add(out, "DEEPEP-NUM-SMS-EVEN", kError, kBuf, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_deepep(c)) return "";
        const int sms = c.opt.effective_comm_sms(true);
        if (sms % 2 == 0) return "";
        return cat("DeepEP needs an even SM count (\"The SM count must be even\"), got ", sms);
      },
      [](const Config& c, const ValidationContext&) {
        return cat("set moe_flex_dispatcher_num_sms (--comm-sms) to ", c.opt.comm_sms + 1);
      });
  add(out, "DEEPEP-NUM-RANKS", kError, kBuf, kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_deepep(c)) return "";
        const int n = flex_group_size(c);
        if (n < 2 || supported_ranks(n)) return "";
        return cat("DeepEP: Unsupported number of EP ranks: tp*ep = ", n,
                   " (supported: 2 4 8 16 24 32 48 64 96 128 144 160)");
      },
      "choose ep (times tp) from DeepEP's supported rank counts, or use hybridep/alltoall");
  add(out, "DEEPEP-HIDDEN-ALIGN", kError, "DeepEP csrc/deep_ep.cpp (hidden * element_size % 16)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_deepep(c) || c.model.hidden_size % 8 == 0) return "";
        return cat("DeepEP needs hidden * 2 bytes to be a multiple of 16: hidden = ",
                   c.model.hidden_size);
      },
      "use --dispatcher alltoall for this hidden size");
  add(out, "DEEPEP-LOCAL-EXPERTS", kError, "DeepEP csrc/deep_ep.cpp (num_local_experts <= 1024)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_deepep(c) || local_experts(c) <= 1024) return "";
        return cat("DeepEP supports at most 1024 local experts, got ", local_experts(c));
      },
      "raise --ep");
  add(out, "DEEPEP-CUDA-GRAPH", kError, "DeepEP deep_ep/buffer.py (CPU waits for the GPU signal)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_deepep(c) || c.opt.cuda_graph_impl == CudaGraphImpl::none) return "";
        const bool captures_dispatch =
            c.opt.cuda_graph_impl == CudaGraphImpl::full_iteration ||
            c.opt.cuda_graph_modules.empty() || has_module(c.opt.cuda_graph_modules, "moe");
        if (!captures_dispatch) return "";
        return "DeepEP's dispatch waits on the CPU for the GPU's receive counts, which is not "
               "compatible with a CUDA graph that captures it";
      },
      "use --cuda-graph-modules attn,moe_router,moe_preprocess, or --flex-backend hybridep with a capacity factor");
  add(out, "DEEPEP-INTERNODE-TIMEOUT", kWarning,
      "Megatron-Bridge#1335, #5067; Megatron-LM PR #5039 (DeepEP internode_dispatch CPU timeout)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!is_deepep(c) || c.ep_num_domains() <= 1) return "";
        return cat("DeepEP across ", c.ep_num_domains(), " NVLink domains: reported to fail with "
                   "\"DeepEP error: timeout (dispatch CPU)\" on large H100/B200 jobs");
      },
      "prefer hybridep (NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN=8), or enable IBGDA");
}

}  // namespace epo::planner::rules
