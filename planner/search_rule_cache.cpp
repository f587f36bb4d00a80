#include "planner/search_rule_cache.hpp"

#include <algorithm>

#include "model/limits.hpp"
#include "planner/rules_common.hpp"

namespace epo::planner::detail {

namespace {
constexpr unsigned L = kReadsLayout, D = kReadsDispatch, O = kReadsOverlap, R = kReadsRecompute,
                   G = kReadsGraphs;
}  // namespace

const std::vector<RuleReadsEntry>& rule_reads() {
  // What each check reads of what apply_candidate sets (planner/rules_*.cpp); everything else it
  // reads (model, hardware, the other options, the context) is the same for the whole search.
  // 0: none of it (the rule passes or fails for every candidate of a search alike).
  static const std::vector<RuleReadsEntry> reads = {
      // rules_mlm.cpp
      {"MLM-GROUPED-GEMM-BF16", 0},
      {"MLM-RECOMPUTE-SELECTIVE-METHOD", R},
      // tp, cp and CUDA_DEVICE_MAX_CONNECTIONS, which apply_candidate sets from tp, cp, overlap
      {"FSDP-CDMC", L | O},  // the planner sets CUDA_DEVICE_MAX_CONNECTIONS by layout
      {"MLM-CDMC-TP-CP", L | O},
      {"MLM-DELAY-WGRAD-TE-IMPL", O},
      {"MLM-DELAY-WGRAD-OGR-TE", O},
      {"MLM-DELAY-WGRAD-GRAPH-TE", O | G},
      {"MLM-DELAY-WGRAD-GRAPH-GAF", O | G},
      {"MLM-DELAY-WGRAD-GRAPH-BIAS", O | G},
      {"MLM-DELAY-WGRAD-NO-GAF-TE", O},
      // rules_bridge.cpp
      {"BRIDGE-OVL-NUM-EXPERTS", O},
      {"BRIDGE-DELAY-WGRAD-OGR-TE", O},
      {"BRIDGE-DELAY-WGRAD-GAF-TE", O},
      {"BRIDGE-DELAY-WGRAD-GRAPH-TE", O | G},
      {"BRIDGE-DELAY-WGRAD-GRAPH-GAF", O | G},
      {"BRIDGE-DELAY-WGRAD-GRAPH-BIAS", O | G},
      {"BRIDGE-DEEPEP-GPU", D},
      {"BRIDGE-HYBRIDEP-GPU", D},
      // rules_mcore.cpp
      {"MCORE-EARLY-RELEASE-VERSION", O},
      {"MCORE-ODBW-VERSION", 0},
      {"MCORE-FLEX-HYBRIDEP-VERSION", D},
      {"MCORE-EP-NEEDS-EXPERTS", L},
      {"MCORE-DEEPEP-PAD-CAPACITY", D},
      {"MCORE-SMS-CONFLICT", D},
      {"MCORE-SHARED-EXPERT-OVERLAP-DISPATCHER", D},  // the shared-expert overlap: always off
      {"MCORE-PAD-NEEDS-CAPACITY", 0},
      // rules_capacity.cpp
      {"MCORE-RANK-CAPACITY-VERSION", 0},
      {"MCORE-RANK-CAPACITY-BACKEND", D},
      {"MCORE-PAGED-STASH-CAPACITY", 0},
      // rules_mcore_layers.cpp
      {"MCORE-RECOMPUTE-METHOD-VALUE", R},
      {"MCORE-RECOMPUTE-FULL-METHOD", R},
      {"MCORE-RECOMPUTE-FULL-NUM-LAYERS", R},  // pp only in the message
      {"MCORE-RECOMPUTE-SELECTIVE-NUM-LAYERS", R},
      {"MCORE-RECOMPUTE-MODULES-UNKNOWN", R},
      {"MCORE-RECOMPUTE-MOE-ACT-GROUPED", R},
      {"MCORE-RECOMPUTE-MLA-UP-PROJ", R},
      {"MCORE-RECOMPUTE-SHARED-EXPERTS-OVERLAP", R},
      {"MCORE-CUDA-GRAPH-MODULES-UNKNOWN", G},
      {"MCORE-CUDA-GRAPH-SCOPE-VALUES", G},
      {"MCORE-CUDA-GRAPH-FULL-ITERATION", G},
      {"MCORE-CUDA-GRAPH-FULL-ITERATION-MODULES", G},
      {"MCORE-CUDA-GRAPH-MOE-AND-ROUTER", G},
      {"MCORE-CUDA-GRAPH-PREPROCESS-NEEDS-ROUTER", G},
      {"MCORE-CUDA-GRAPH-MOE-DENSE-MODEL", G},
      {"MCORE-CUDA-GRAPH-MLP-DENSE-ONLY", G},
      {"MCORE-CUDA-GRAPH-MOE-DROP-PAD", G},
      {"MCORE-CUDA-GRAPH-PREPROCESS-DTOH", D | G},
      {"MCORE-CUDA-GRAPH-FULL-RECOMPUTE", R | G},
      {"MCORE-CUDA-GRAPH-MOE-RECOMPUTE-ROUTER", R | G},
      {"MCORE-CUDA-GRAPH-ATTN-DROPOUT", R | G},
      {"MCORE-CUDA-GRAPH-HIDDEN-DROPOUT", R | G},
      // rules_mcore.cpp, the overlap checks
      {"MCORE-PERMUTE-FUSION-TE", 0},
      {"MCORE-OVL-TORCH", O},
      {"MCORE-OVL-VPP", L | O},
      {"MCORE-OVL-EP", L | O},
      {"MCORE-OVL-DISPATCHER", D | O},
      {"MCORE-OVL-RECOMPUTE-FULL", O | R},
      {"MCORE-OVL-RECOMPUTE-METHOD", O | R},
      {"MCORE-OVL-RECOMPUTE-NUM-LAYERS", O | R},
      {"MCORE-OVL-RECOMPUTE-MOE", O | R},
      {"MCORE-OVL-PRECISION", O},
      {"MCORE-OVL-SHARED-EXPERT-OVERLAP", O},
      {"MCORE-OVL-MTP", O},
      {"MCORE-OVL-MTP-PP", L | O},
      {"MCORE-OVL-CUDA-GRAPH-SCOPE", O | G},
      {"MCORE-OVL-CUDA-GRAPH-IMPL", O | G},
      {"MCORE-DELAY-WGRAD-NEEDS-OVL", O},
      {"MCORE-DELAY-WGRAD-LEGACY-GG", O},
      {"MCORE-DELAY-WGRAD-TE-GRAPH", O | G},
      {"MCORE-ODBW-OVL", O},
      {"MCORE-ODBW-TE", 0},
      {"MCORE-ODBW-DELAY-WGRAD", O},
      {"MCORE-EARLY-RELEASE-NEEDS-OVL", O},
      // rules_pipeline.cpp
      {"MCORE-PP-LAYER-SPLIT", L},
      {"MCORE-HYBRID-PP", L},
      {"MCORE-MAMBA-TP", L},
      {model::kDistOptInstancesRule, L},  // dp, cp, expert dp
      // rules_deepep.cpp
      {"DEEPEP-NUM-SMS-EVEN", D},
      {"DEEPEP-NUM-RANKS", L | D},
      {"DEEPEP-HIDDEN-ALIGN", D},
      {"DEEPEP-LOCAL-EXPERTS", L | D},
      {"DEEPEP-CUDA-GRAPH", D | G},
      // rules_hybridep.cpp
      {"HYBRIDEP-HIDDEN-ALIGN", D},
      {"HYBRIDEP-DOMAIN-DIVIDES", L | D},
      {"HYBRIDEP-EXPERTS-PER-NODE", L | D},
      {"HYBRIDEP-FP8-DISPATCH", D},
      // rules_te.cpp
      {"MCORE-BF16-LAYERS-DELAYED", 0},
      {"MCORE-BF16-LAYERS-COUNT", L},
      {"TE-NVFP4-MIN", 0},
      {model::kNvfp4ArchRule, 0},
      {model::kFp8ArchRule, 0},
      {"TE-DELAY-WGRAD-MIN", O},
      // rules_runtime.cpp
      {"MCORE-GROUPED-MLP-BIAS", 0},
      {"MCORE-GROUPED-MLP-BIAS-DROPOUT-FUSION", 0},
      {"RUNTIME-FLEX-TPXEP", L | D},
      {"RUNTIME-FLEX-ARCH", D},
      {"RUNTIME-OVL-CUDA-GRAPH-WHOLE-LAYER", O | G},
      {model::kInterleavedMicrobatchRule, L},  // pp, vpp, micro-batch count
      {"RUNTIME-OVL-PARTIAL-CKPT", O},
      {"RUNTIME-OVL-FSDP-INTERLEAVED", L | O},
      {"RUNTIME-FULL-ITERATION-HOST-SYNC", L | D | G},
  };
  return reads;
}

unsigned rule_reads(const std::string& id) {
  for (const auto& e : rule_reads())
    if (id == e.id) return e.reads;
  return kReadsEverything;
}

RuleVerdictCache::RuleVerdictCache(const ErrorRules& rules) : rules_(&rules) {
  const auto& list = rules.rules();
  for (size_t i = 0; i < list.size(); ++i) {
    const unsigned reads = rule_reads(list[i]->id);
    auto g = std::find_if(groups_.begin(), groups_.end(),
                          [&](const Group& x) { return x.reads == reads; });
    if (g == groups_.end()) {
      groups_.emplace_back();
      g = groups_.end() - 1;
      g->reads = reads;
    }
    g->rules.push_back({static_cast<int>(i), list[i]});
  }
  // The groups are in the order of their first rules (first_error stops at the first group
  // whose first rule comes after a failing rule: so do the rules of the groups after it).
}

bool RuleVerdictCache::LayoutFields::operator==(const LayoutFields& o) const {
  return std::equal(f, f + 9, o.f);
}

const Rule* RuleVerdictCache::first_error(const Candidate& c, const model::Config& cfg) {
  // The fused grouped MLP flag apply_candidate sets from the candidate's request and its ETP: it
  // counts as a layout field. CUDA_DEVICE_MAX_CONNECTIONS is no field of its own:
  // apply_candidate sets it from tp, cp and overlap.
  const LayoutFields layout{
      {c.tp, c.pp, c.vpp, c.cp, c.ep, c.etp, c.mbs, c.layout, cfg.opt.fused_grouped_mlp}};
  if (layout_run_ == 0 || !(layout == layout_)) {
    layout_ = layout;
    ++layout_run_;
  }
  // Each field in its own bits: the dispatch and overlap fields in the options word (8 + 8 + 16
  // and 3 x 8 bits), recompute and graphs in the run word's top 16 bits (the run number stays
  // below 2^48).
  const auto u = [](std::uint64_t v, int shift) { return v << shift; };
  const std::uint64_t dispatch =
      u(c.dispatcher, 0) | u(c.backend, 8) | u(static_cast<std::uint16_t>(c.comm_sms), 16);
  const std::uint64_t flags = u(c.overlap, 32) | u(c.delay_wgrad, 40) | u(c.early_release, 48);
  const std::uint64_t recompute = u(c.recompute, 48), graphs = u(c.cuda_graph, 56);
  const int num_rules = static_cast<int>(rules_->rules().size());
  int first = num_rules;
  try {
    const rules::VerdictOnly verdict;
    for (Group& g : groups_) {
      if (g.rules.front().idx >= first) break;
      Key key;
      if (g.reads & kReadsLayout) key.layout_run = layout_run_;
      if (g.reads & kReadsRecompute) key.layout_run |= recompute;
      if (g.reads & kReadsGraphs) key.layout_run |= graphs;
      if (g.reads & kReadsDispatch) key.options |= dispatch;
      if (g.reads & kReadsOverlap) key.options |= flags;
      std::uint64_t h = (key.layout_run * 0x9e3779b97f4a7c15ull) ^ key.options;
      h = (h ^ (h >> 29)) * 0xbf58476d1ce4e5b9ull;
      Slot& s = g.slots[static_cast<size_t>((h >> 40) % kNumSlots)];
      if (!s.valid || !(s.key == key)) {
        // The group's first failing rule, whatever fails before it in other groups: it depends
        // on the group's fields only.
        s.valid = false;  // stays so if a check throws
        int mine = num_rules;
        for (const Entry& e : g.rules)
          if (!e.rule->check(cfg, rules_->ctx()).empty()) {
            mine = e.idx;
            break;
          }
        s = {true, key, mine};
      }
      first = std::min(first, s.first);
    }
  } catch (...) {
    // The groups check rules the plain check may not reach: what the plain check does (throw or
    // not) is what counts.
    return rules_->first_error(cfg);
  }
  return first < num_rules ? rules_->rules()[static_cast<size_t>(first)] : nullptr;
}

}  // namespace epo::planner::detail
