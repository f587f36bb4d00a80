// Transformer Engine floors touched by delay_wgrad_compute (reference §2.6).
#include "planner/rules_common.hpp"

namespace epo::planner::rules {

void add_te_rules(std::vector<Rule>& out) {
  add(out, "TE-DELAY-WGRAD-MIN", kError,
      "Megatron-LM megatron/core/extensions/transformer_engine.py:1170-1174", kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute || x.te.at_least(2, 3)) return "";
        return cat("Only TE with version >=2.3.0 supports delay_wgrad_compute now; TE is ",
                   ver(x.te));
      },
      "upgrade Transformer Engine (--te 2.3; 2.8 with overlap_grad_reduce), or drop --delay-wgrad");
}

}  // namespace epo::planner::rules
