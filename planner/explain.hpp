#pragma once
// "Why the winner wins": the winner against a reference plan, op by op (which communication
// became hidden, which op became cheaper), in microseconds per step on one rank.
#include <string>
#include <vector>

#include "planner/search.hpp"

namespace epo::planner {

/// One op's time per step on one rank in the reference and the winner.
struct OpDelta {
  std::string name;        ///< e.g. "dispatch fwd"
  double reference_us = 0;
  double winner_us = 0;
};

struct Comparison {
  std::string reference_label;   ///< e.g. "best alltoall without overlap"
  std::string reference_key;
  double step_delta_us = 0;      ///< reference step - winner step (> 0: winner faster)
  double exposed_reference_us = 0, exposed_winner_us = 0;
  double hidden_us = 0;          ///< communication the winner hides that the reference exposes
  double comm_reference_us = 0, comm_winner_us = 0;  ///< EP communication per step, one rank
  double tokens_gain = 0;        ///< winner tokens/s / reference tokens/s - 1
  std::vector<OpDelta> ops;      ///< MoE-layer ops, per step on one rank
  std::vector<std::string> differences;  ///< settings that differ, "ep 8 -> 16"
};

/// Compares the winner with a reference plan.
Comparison compare_plans(const Plan& winner, const Plan& reference, const std::string& label);
/// Readable form of a comparison.
std::string format_comparison(const Comparison& c);

}  // namespace epo::planner
