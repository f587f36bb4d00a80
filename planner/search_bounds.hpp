#pragma once
// The search's pruning state (internal to planner/search.cpp and planner/search_bounds.cpp): the
// bounds of a candidate that passed the cheap filters and the incumbents they are tested against.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <functional>
#include <mutex>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

#include "model/config.hpp"
#include "model/memory.hpp"
#include "planner/search.hpp"
#include "planner/step_bound.hpp"

namespace epo::planner::detail {

/// A candidate that passed the cheap filters, with bounds on what the model can predict for it.
struct Bounded {
  long long idx;
  double step_lb_us;   ///< no prediction can be faster
  double mem_lb_bytes; ///< no prediction needs less
  bool reference;      ///< alltoall without overlap (the reference plans)
  int group;           ///< 0 alltoall, 1 flex (the "other dispatcher" groups)
};

/// The shape part of the step bound's costs (bound_shape_costs of model::compute_shape_costs) by
/// candidate, shared by the filter workers. Candidates that differ only in pp, vpp, the pipeline
/// layout or the overlap and early-release flags share it: compute_shape_costs reads none of
/// them (the flags change the schedule, not its ops; delay_wgrad_compute splits ops, so it
/// stays), nor dp. DeepSeek-V3 on 1,024 GPUs has about ten pipeline layouts per shape and
/// options, and the cost model took most of the filters' time before.
class ShapeCostCache {
 public:
  /// The shape part for candidate `c`; `cfg` is the search's base with `c` applied. Throws what
  /// compute_shape_costs throws (nothing is kept then).
  BoundCosts shape_part(const Candidate& c, const model::Config& cfg);

 private:
  /// The candidate's fields that the shape costs depend on.
  struct Key {
    std::int16_t tp, cp, ep, etp, mbs, comm_sms;
    std::uint8_t dispatcher, backend, delay_wgrad, recompute, cuda_graph;
    bool operator==(const Key& o) const;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const;
  };
  static Key key_of(const Candidate& c);
  std::mutex mu_;
  std::unordered_map<Key, BoundCosts, KeyHash> map_;
};

/// The weights, gradients and optimizer states of the peak rank of the layout estimated last.
/// A rank's depend on none of the options the search varies for a layout (dispatcher, overlap,
/// recompute, CUDA graphs, SM counts; model/memory.cpp), and the peak is at least that rank's
/// memory: when they alone exceed the GPU's memory, no option set of the layout fits and
/// estimate_memory need not be asked again. One per filter worker: candidates come in runs of
/// one layout.
class LayoutMemory {
 public:
  /// No option set of `c`'s layout fits (an earlier estimate of the layout showed it).
  bool cannot_fit(const Candidate& c) const {
    return known_ && layout_ == layout_of(c) && static_bytes_ > capacity_bytes_;
  }
  /// Notes `m`, the estimate of candidate `c`.
  void note(const Candidate& c, const model::MemoryBreakdown& m) {
    known_ = true;
    layout_ = layout_of(c);
    static_bytes_ = m.weights_bytes + m.fp8_weight_bytes + m.gradients_bytes + m.optimizer_bytes;
    capacity_bytes_ = m.capacity_bytes;
  }

 private:
  static std::array<int, 8> layout_of(const Candidate& c) {
    return {c.tp, c.pp, c.vpp, c.cp, c.ep, c.etp, c.mbs, c.layout};
  }
  bool known_ = false;
  std::array<int, 8> layout_{};
  double static_bytes_ = 0, capacity_bytes_ = 0;
};

/// The memory estimates of the last candidates by everything of a candidate estimate_memory
/// reads: every field but early_release (ep_overlap_early_attn_memory_release reorders the
/// overlapped schedule's ops; the memory model walks Megatron's step order, model/memory*.cpp,
/// and never reads it). A candidate with early release comes a few places after its twin without
/// (search_space.cpp: only recompute and CUDA graphs vary faster), so a table of the last
/// estimate per delayed wgrad, recompute and CUDA graphs finds the twin. One per filter worker.
class TwinMemory {
 public:
  struct Estimate {
    double total_bytes = 0;
    bool fits = false;
  };
  /// The estimate of `c`'s twin, or nullptr.
  const Estimate* find(const Candidate& c) const {
    const Slot& s = slots_[slot_of(c)];
    return s.valid && same_but_early_release(s.cand, c) ? &s.estimate : nullptr;
  }
  /// Notes `m`, the estimate of candidate `c`.
  void note(const Candidate& c, const model::MemoryBreakdown& m) {
    Slot& s = slots_[slot_of(c)];
    s.valid = true;
    s.cand = c;
    s.estimate = {m.total_bytes, m.fits};
  }

 private:
  struct Slot {
    bool valid = false;
    Candidate cand;
    Estimate estimate;
  };
  static std::size_t slot_of(const Candidate& c) {
    return (static_cast<std::size_t>(c.delay_wgrad != 0) * 4 + (c.recompute & 3u)) * 2 +
           (c.cuda_graph & 1u);
  }
  static bool same_but_early_release(const Candidate& a, const Candidate& b) {
    return a.tp == b.tp && a.pp == b.pp && a.vpp == b.vpp && a.cp == b.cp && a.ep == b.ep &&
           a.etp == b.etp && a.mbs == b.mbs && a.dispatcher == b.dispatcher &&
           a.backend == b.backend && a.overlap == b.overlap && a.delay_wgrad == b.delay_wgrad &&
           a.comm_sms == b.comm_sms && a.recompute == b.recompute &&
           a.cuda_graph == b.cuda_graph && a.layout == b.layout;
  }
  std::array<Slot, 16> slots_{};
};

/// The step bound of the candidate bounded last, by everything it reads (step_lower_bound_us:
/// the costs, pp, vpp, the micro-batch count, the pipeline layout and the overlap flags; the rest
/// of the configuration is the search's base). Candidates come in runs of one layout whose last
/// field, the CUDA graphs, often moves no cost: those share one bound. One per filter worker.
class LastBound {
 public:
  /// step_lower_bound_us(cfg, costs) for candidate `c` (`cfg`: the base with `c` applied).
  double bound_us(const Candidate& c, const model::Config& cfg, const BoundCosts& costs) {
    const std::array<int, 7> key{c.pp,      c.vpp,     cfg.par.num_microbatches(),
                                 c.layout,  c.overlap, c.delay_wgrad,
                                 c.early_release};
    if (valid_ && key == key_ && std::memcmp(&costs, &costs_, sizeof costs) == 0) return bound_us_;
    valid_ = false;  // stays so when the bound throws
    bound_us_ = step_lower_bound_us(cfg, costs);
    valid_ = true;
    key_ = key;
    costs_ = costs;
    return bound_us_;
  }

 private:
  // BoundCosts holds doubles only: equal bytes, equal costs.
  static_assert(sizeof(BoundCosts) % sizeof(double) == 0, "BoundCosts holds doubles only");
  bool valid_ = false;
  std::array<int, 7> key_{};
  BoundCosts costs_;
  double bound_us_ = 0;
};

/// What the evaluated plans already guarantee; a candidate whose bounds cannot beat it is
/// skipped (it can enter neither the top N, nor the Pareto front, nor a reference).
class Incumbents {
 public:
  explicit Incumbents(size_t keep) : keep_(keep) {}
  bool can_skip(const Bounded& b) {
    std::lock_guard<std::mutex> lock(mu_);
    if (b.reference && !(reference_best_ < b.step_lb_us)) return false;
    if (best_.size() < keep_ || best_.top() >= b.step_lb_us) return false;
    if (!(group_best_[b.group] < b.step_lb_us)) return false;
    for (const auto& [step, mem] : front_)
      if (step < b.step_lb_us && mem < b.mem_lb_bytes) return true;
    return false;
  }
  void add(const Bounded& b, double step_us, double mem_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    best_.push(step_us);
    if (best_.size() > keep_) best_.pop();
    group_best_[b.group] = std::min(group_best_[b.group], step_us);
    if (b.reference) reference_best_ = std::min(reference_best_, step_us);
    for (const auto& [s, m] : front_)
      if (s <= step_us && m <= mem_bytes) return;
    front_.erase(std::remove_if(front_.begin(), front_.end(),
                                [&](const std::pair<double, double>& p) {
                                  return p.first >= step_us && p.second >= mem_bytes;
                                }),
                 front_.end());
    front_.emplace_back(step_us, mem_bytes);
  }

 private:
  std::mutex mu_;
  size_t keep_;
  std::priority_queue<double> best_;  ///< the `keep_` smallest step times
  double group_best_[2] = {1e300, 1e300};
  double reference_best_ = 1e300;  ///< best alltoall plan without overlap
  std::vector<std::pair<double, double>> front_;
};

}  // namespace epo::planner::detail
