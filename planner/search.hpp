#pragma once
// The plan search, Calculon style: small generators of candidate values, then filters (rule
// errors, memory), counted by reason and never fatal, then evaluation with the model's fast
// prediction, then a deterministic top-N (ties broken by generation order, which is fixed).
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/prediction.hpp"
#include "planner/validation.hpp"

namespace epo::planner {

/// One point of the search space, compact (the search holds millions of them).
struct Candidate {
  std::int16_t tp = 1, pp = 1, vpp = 1, cp = 1, ep = 1, etp = 1, mbs = 1;
  std::uint8_t dispatcher = 1;   ///< model::Dispatcher
  std::uint8_t backend = 0;      ///< model::FlexBackend
  std::uint8_t overlap = 0, delay_wgrad = 0, early_release = 0;
  std::int16_t comm_sms = 0;     ///< 0 = backend default
  /// model::RecomputeGranularity (selective: core_attn, moe_act, layernorm), kRecomputeMla
  /// (selective: the MLA up-projections and the dense MLPs, as Bridge's DeepSeek-V3 recipes), or
  /// kKeep.
  std::uint8_t recompute = 0;
  std::uint8_t cuda_graph = 0;   ///< 0 none, 1 TE graphs of attn, moe_router, moe_preprocess, or kKeep
  static constexpr std::uint8_t kRecomputeMla = 3;
  /// 0 Megatron's plain split, 1 balanced_pipeline_layout (pp * vpp does not divide the layers),
  /// or kKeep (the base configuration's layout fields).
  std::uint8_t layout = 0;
  /// TE's fused grouped MLP asked for (the base configuration's setting); apply_candidate keeps
  /// it where it runs (ETP 1, Blackwell, FP8), so a reused configuration does not carry another
  /// candidate's.
  std::uint8_t fused_grouped_mlp = 0;
  /// CUDA_DEVICE_MAX_CONNECTIONS: 0 = what the emitters set for the candidate, else fixed.
  std::int16_t cdmc = 0;
  /// recompute/cuda_graph value meaning "keep the base configuration's setting" (--layout).
  static constexpr std::uint8_t kKeep = 255;
};

/// What to search and how.
struct SearchSpec {
  /// Model, hardware, GPU count, sequence length, global batch size and every option the search
  /// does not vary (precision, routing, capacity factor, ...). Its layout is used when
  /// `fixed_layout` is set.
  model::Config base;
  ValidationContext ctx;
  bool fixed_layout = false;   ///< keep base's tp/pp/vpp/cp/ep/etp/mbs; choose only the options
  /// Settings the user fixed one by one (`epo plan --dispatcher alltoall --ep 8 ...`): the search
  /// varies only the others. 0 or -1 = searched.
  struct Fixed {
    int tp = 0, pp = 0, vpp = 0, cp = 0, ep = 0, etp = 0, mbs = 0;
    int dispatcher = -1, backend = -1;             ///< model::Dispatcher, model::FlexBackend
    int overlap = -1, delay_wgrad = -1, early_release = -1;  ///< 0 or 1
    int comm_sms = -1;                             ///< flex SMs (0 = the backend's default)
    int cdmc = 0;                                  ///< CUDA_DEVICE_MAX_CONNECTIONS
    bool recompute = false, cuda_graphs = false;   ///< the base's recompute / graphs kept
    /// What was fixed, for the report ("dispatcher alltoall, ep 8").
    std::vector<std::string> said;
  } fixed;
  int top_n = 10;
  int threads = 0;             ///< 0 = one per hardware thread
  /// Evaluate every candidate with the model first and filter afterwards (no early pruning):
  /// the reference the fast search must agree with.
  bool exhaustive = false;
  /// Called now and then with (candidates done, candidates total), from the calling thread.
  std::function<void(long long, long long)> progress;
};

/// An evaluated plan.
struct Plan {
  model::Config cfg;
  model::Prediction pred;
  long long order = 0;         ///< generation index (the stable tie-break key)
  std::string key;             ///< readable stable key, e.g. "tp1 pp1 ep16 ... flex/hybridep ovl"
  /// Further feasible plans with the same predicted step time and memory within 2% that differ
  /// only in comm SMs or CUDA graphs (listed once, here).
  int variants = 0;
};

struct SearchResult {
  std::vector<Plan> top;       ///< best first by tokens/s/GPU (ties: generation order)
  std::vector<Plan> pareto;    ///< step time vs memory per GPU, by step time
  std::vector<std::pair<std::string, long long>> rejected;  ///< reason -> count, most first
  long long generated = 0;     ///< candidates generated
  long long evaluated = 0;     ///< predictions made
  long long feasible = 0;      ///< evaluated candidates passing every filter
  /// Candidates not evaluated because their step-time and memory bounds show they can enter
  /// neither the top N, nor the Pareto front, nor a reference plan (fast mode only).
  long long skipped = 0;
  double seconds = 0;
  bool has_alltoall_no_overlap = false;
  Plan best_alltoall_no_overlap;  ///< the reference "no overlap" plan
  /// The winner's own layout with alltoall and overlap off (what dispatcher and overlap buy).
  bool has_same_layout_baseline = false;
  Plan same_layout_baseline;
  bool has_other_dispatcher = false;
  Plan best_other_dispatcher;  ///< best plan whose dispatcher differs from the winner's
};

/// The candidates the generators produce for this spec, in their fixed order.
std::vector<Candidate> generate_candidates(const SearchSpec& spec);
/// The configuration of a candidate: base with the candidate's layout and options applied and
/// derived fields filled (throws an input error for a layout that does not divide).
model::Config candidate_config(const model::Config& base, const Candidate& c);
/// Fills the options a candidate implies beyond its own fields (recompute modules, CUDA graph
/// modules, CUDA_DEVICE_MAX_CONNECTIONS); used by candidate_config.
void apply_candidate(model::Config& cfg, const Candidate& c);
/// Readable stable key of a configuration's searched fields.
std::string plan_key(const model::Config& cfg);

/// Runs the search. Never throws for an empty feasible set (top is then empty and `rejected`
/// says why).
SearchResult search(const SearchSpec& spec);

/// One line per reason: what eliminated the most candidates and what to relax.
std::string infeasible_advice(const SearchResult& r, const SearchSpec& spec);

}  // namespace epo::planner
