#pragma once
// Shared pieces of the rule files: version masks, predicates on the configuration, and the
// per-source registration functions validation.cpp calls in order.
#include <algorithm>
#include <string>
#include <vector>

#include "model/error.hpp"
#include "planner/validation.hpp"

namespace epo::planner::rules {

using model::Config;
using model::Dispatcher;
using model::FlexBackend;
using model::CudaGraphImpl;
using model::RecomputeGranularity;

constexpr unsigned bit(MegatronVersion v) { return 1u << static_cast<unsigned>(v); }
constexpr unsigned kAllVersions = 0x7f;
/// Versions from `v` on (inclusive).
constexpr unsigned since(MegatronVersion v) { return kAllVersions & ~(bit(v) - 1u); }
/// Versions up to `v` (inclusive).
constexpr unsigned until(MegatronVersion v) { return (bit(v) << 1u) - 1u; }
constexpr unsigned kBridge = 1u, kMlm = 2u, kBothFrontends = 3u;
/// A line of Megatron-Core's TransformerConfig (main) as a rule source.
#define EPO_TC(line) "Megatron-LM megatron/core/transformer/transformer_config.py:" line

inline bool overlap(const Config& c) { return c.opt.overlap_moe_expert_parallel_comm; }
inline bool is_flex(const Config& c) { return c.opt.dispatcher == Dispatcher::flex; }
inline bool is_deepep(const Config& c) {
  return is_flex(c) && c.opt.flex_backend == FlexBackend::deepep;
}
inline bool is_hybridep(const Config& c) {
  return is_flex(c) && c.opt.flex_backend == FlexBackend::hybridep;
}
inline bool has_module(const std::vector<std::string>& v, const char* m) {
  return std::find(v.begin(), v.end(), m) != v.end();
}
inline bool graphed(const Config& c, const char* module) {
  return c.opt.cuda_graph_impl != CudaGraphImpl::none &&
         has_module(c.opt.cuda_graph_modules, module);
}
/// Delayed wgrad of a module inside a CUDA-graphed scope (args l.1903-1934, Bridge l.470-560).
inline bool wgrad_in_graph_scope(const Config& c) {
  return graphed(c, "attn") ||
         (graphed(c, "moe_router") && c.model.shared_expert_ffn_hidden_size > 0 &&
          !c.opt.moe_shared_expert_overlap);
}
/// Size of the flex dispatcher's communication group (TP x EP: the routing map is replicated
/// across TP).
inline int flex_group_size(const Config& c) { return c.par.tp * c.par.ep; }
/// Nodes (NVLink domains) the job spans.
inline int num_nodes(const Config& c) {
  const int d = std::max(1, c.hw.nvlink_domain_size);
  return (c.num_gpus + d - 1) / d;
}
inline int local_experts(const Config& c) {
  return c.par.ep > 0 ? c.model.num_experts / c.par.ep : 0;
}
inline std::string ver(const Version& v) { return to_string(v); }
/// recompute_modules as Megatron-Core sees them: None (empty here) means ["core_attn"].
inline std::vector<std::string> recompute_modules(const Config& c) {
  if (c.opt.recompute_modules.empty()) return {"core_attn"};
  return c.opt.recompute_modules;
}
/// Whether recompute_modules as Megatron-Core sees them hold `m` (without copying the list).
inline bool recomputes(const Config& c, const char* m) {
  const auto& v = c.opt.recompute_modules;
  return v.empty() ? std::string("core_attn") == m : has_module(v, m);
}
inline bool params_16bit(const Config& c, const ValidationContext& x) {
  return x.model_bf16_or_fp16 && c.opt.params_dtype != model::ParamsDtype::fp32;
}

/// Adds a rule; `check` returns "" when the configuration passes.
template <typename Check, typename Fix>
void add(std::vector<Rule>& out, const char* id, Severity sev, const char* source, unsigned versions,
         unsigned frontends, Check check, Fix fix) {
  Rule r;
  r.id = id;
  r.severity = sev;
  r.source = source;
  r.version_mask = versions;
  r.frontends = frontends;
  r.check = check;
  r.fix = fix;
  out.push_back(std::move(r));
}
/// Adds a rule whose fix does not depend on the configuration.
template <typename Check>
void add(std::vector<Rule>& out, const char* id, Severity sev, const char* source, unsigned versions,
         unsigned frontends, Check check, const char* fix) {
  const std::string f = fix;
  add(out, id, sev, source, versions, frontends, check,
      [f](const Config&, const ValidationContext&) { return f; });
}
/// True on a thread while it asks only whether rules fail, not why (the plan search's filter
/// checks hundreds of thousands of configurations and reads no message): cat() then skips the
/// formatting. Set through VerdictOnly.
inline thread_local bool verdict_only = false;
/// Sets verdict_only for its lifetime (restoring the previous value).
class VerdictOnly {
 public:
  VerdictOnly() : saved_(verdict_only) { verdict_only = true; }
  ~VerdictOnly() { verdict_only = saved_; }
  VerdictOnly(const VerdictOnly&) = delete;
  VerdictOnly& operator=(const VerdictOnly&) = delete;

 private:
  bool saved_;
};
/// A rule's message from its parts; under verdict_only a fixed non-empty text (the rule fails
/// either way: every rule returns cat(...) only when it fails).
template <typename... Args>
std::string cat(const Args&... args) {
  if (verdict_only) return "failed";
  return ::epo::detail::concat(args...);
}
constexpr Severity kError = Severity::error;
constexpr Severity kWarning = Severity::warning;

void add_mcore_rules(std::vector<Rule>& out);
/// Recompute consistency (transformer_config.py l.1903-2005), in source order.
void add_mcore_recompute_rules(std::vector<Rule>& out);
/// CUDA-graph scope rules (transformer_config.py l.2740-2895), in source order.
void add_mcore_graph_rules(std::vector<Rule>& out);
/// The plain pipeline split's divisibility (transformer_block.py), after the config's checks.
void add_pipeline_rules(std::vector<Rule>& out);
void add_mlm_rules(std::vector<Rule>& out);
void add_bridge_rules(std::vector<Rule>& out);
void add_deepep_rules(std::vector<Rule>& out);
void add_hybridep_rules(std::vector<Rule>& out);
void add_te_rules(std::vector<Rule>& out);
void add_runtime_rules(std::vector<Rule>& out);
void add_capacity_rules(std::vector<Rule>& out);

}  // namespace epo::planner::rules
