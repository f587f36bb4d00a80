#pragma once
// Configurations shared by the planner tests.
#include <algorithm>
#include <string>
#include <vector>

#include "model/config_io.hpp"
#include "model/error.hpp"
#include "planner/examples.hpp"
#include "planner/validation.hpp"

namespace epo::planner::test {

/// A configuration built from presets with a given layout, derived fields filled.
inline model::Config make_config(const std::string& model_name, const std::string& hw, int gpus,
                                 int tp, int pp, int vpp, int ep, int gbs = 0) {
  model::Config c;
  c.model_name = model_name;
  c.model = model::load_model_preset(model_name);
  c.hardware_name = hw;
  c.hw = model::load_hardware_preset(hw);
  c.num_gpus = gpus;
  c.par.tp = tp;
  c.par.pp = pp;
  c.par.vpp = vpp;
  c.par.ep = ep;
  c.par.sequence_parallel = tp > 1;
  c.par.global_batch_size = gbs;
  c.derive_and_check();
  return c;
}

/// A search space the cache tests sample: every `stride`-th candidate (and the run after it).
struct SampledSpace {
  const char* model;
  const char* hardware;
  int gpus, gbs;
  long long stride;  ///< distance between the sampled candidates
};

/// The space's candidates with its base configuration (tp, pp, vpp, ep 1; the search varies them).
inline model::Config sampled_base(const SampledSpace& sp) {
  return make_config(sp.model, sp.hardware, sp.gpus, 1, 1, 1, 1, sp.gbs);
}

inline bool has_id(const std::vector<Violation>& v, const std::string& id) {
  return std::any_of(v.begin(), v.end(), [&](const Violation& x) { return x.id == id; });
}

}  // namespace epo::planner::test
