#pragma once
// Internal to the plan search (planner/search.cpp): the filter's rule check, with each rule's
// verdict kept by the candidate fields it reads. Most rules read a few of them (the overlap flags,
// the dispatcher, the CUDA graphs), and a rule on the layout alone is asked once per layout
// (candidates come in runs of one layout, search_space.cpp) instead of once per candidate.
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "planner/search.hpp"
#include "planner/search_tune.hpp"

namespace epo::planner::detail {

/// The groups of candidate fields a rule's verdict can depend on (besides the search's base
/// configuration and context, fixed for one search), as bits of a mask.
enum RuleReads : unsigned {
  kReadsLayout = 1u,     ///< tp, pp, vpp, cp, ep, etp, micro-batch size, pipeline layout (dp, ...)
  kReadsDispatch = 2u,   ///< dispatcher, flex backend, comm SMs
  kReadsOverlap = 4u,    ///< overlap, delayed wgrad, early release (CUDA_DEVICE_MAX_CONNECTIONS)
  kReadsRecompute = 8u,  ///< recompute granularity, method, layers, modules
  kReadsGraphs = 16u,    ///< CUDA graph implementation and modules
  kReadsEverything = 31u,
};

/// A rule id and the groups of candidate fields its check reads.
struct RuleReadsEntry {
  const char* id;
  unsigned reads;
};
/// The error rules and what they read; a rule not listed reads everything (always correct, only
/// checked more often).
const std::vector<RuleReadsEntry>& rule_reads();
/// What the rule with this id reads (kReadsEverything when it is not listed).
unsigned rule_reads(const std::string& id);

/// ErrorRules::first_error for the candidates of one filter worker: the rules are grouped by what
/// they read, and each group's first failing rule is kept by the group's fields (a few per group).
/// Same answer as the plain check for every candidate, in any order
/// (tests/planner/test_rule_cache.cpp). One per worker.
class RuleVerdictCache {
 public:
  /// `rules` must outlive the object.
  explicit RuleVerdictCache(const ErrorRules& rules);
  /// rules.first_error(cfg), where `cfg` is the search's base with `c` applied (apply_candidate).
  const Rule* first_error(const Candidate& c, const model::Config& cfg);

 private:
  /// A group's fields as two words: the layout's run number (a layout never gets its number back
  /// once the fields change) with the recompute and graph choices in its top 16 bits, and the
  /// dispatch and overlap fields packed.
  struct Key {
    std::uint64_t layout_run = 0, options = 0;
    bool operator==(const Key& o) const {
      return layout_run == o.layout_run && options == o.options;
    }
  };
  static constexpr int kNumSlots = 16;
  /// A group's fields and its first failing rule (its position in ErrorRules' order, or the rule
  /// count when none fails).
  struct Slot {
    bool valid = false;
    Key key;
    int first = 0;
  };
  struct Entry {
    int idx;
    const Rule* rule;
  };
  struct Group {
    unsigned reads = 0;
    std::vector<Entry> rules;
    std::array<Slot, kNumSlots> slots{};
  };
  /// The layout fields of the candidate checked last (and the fused grouped MLP flag, which
  /// apply_candidate carries over from the candidates before), and their run number.
  struct LayoutFields {
    int f[9];
    bool operator==(const LayoutFields& o) const;
  };
  const ErrorRules* rules_;
  std::vector<Group> groups_;
  LayoutFields layout_{};
  std::uint64_t layout_run_ = 0;
};

}  // namespace epo::planner::detail
