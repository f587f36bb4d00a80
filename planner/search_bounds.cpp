// The search's cache of the step bound's shape costs (planner/search_bounds.hpp).
#include <cstdint>
#include <initializer_list>

#include "model/cost.hpp"
#include "planner/search_bounds.hpp"

namespace epo::planner {

namespace detail {

ShapeCostCache::Key ShapeCostCache::key_of(const Candidate& c) {
  return {c.tp,         c.cp,      c.ep,          c.etp,       c.mbs,
          c.comm_sms,   c.dispatcher, c.backend, c.delay_wgrad, c.recompute,
          c.cuda_graph};
}

bool ShapeCostCache::Key::operator==(const Key& o) const {
  return tp == o.tp && cp == o.cp && ep == o.ep && etp == o.etp && mbs == o.mbs &&
         comm_sms == o.comm_sms && dispatcher == o.dispatcher && backend == o.backend &&
         delay_wgrad == o.delay_wgrad && recompute == o.recompute && cuda_graph == o.cuda_graph;
}

std::size_t ShapeCostCache::KeyHash::operator()(const Key& k) const {
  std::uint64_t h = 0;
  for (const long long v : {static_cast<long long>(k.tp), static_cast<long long>(k.cp),
                            static_cast<long long>(k.ep), static_cast<long long>(k.etp),
                            static_cast<long long>(k.mbs), static_cast<long long>(k.comm_sms),
                            static_cast<long long>(k.dispatcher), static_cast<long long>(k.backend),
                            static_cast<long long>(k.delay_wgrad),
                            static_cast<long long>(k.recompute), static_cast<long long>(k.cuda_graph)})
    h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001b3ULL;
  return static_cast<std::size_t>(h ^ (h >> 29));
}

BoundCosts ShapeCostCache::shape_part(const Candidate& c, const model::Config& cfg) {
  const Key k = key_of(c);
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = map_.find(k);
    if (it != map_.end()) return it->second;
  }
  // Computed outside the lock: two workers may both compute a shape, with the same result.
  const BoundCosts b = bound_shape_costs(cfg.hw, model::compute_shape_costs(cfg));
  std::lock_guard<std::mutex> lock(mu_);
  map_.emplace(k, b);
  return b;
}

}  // namespace detail

}  // namespace epo::planner
