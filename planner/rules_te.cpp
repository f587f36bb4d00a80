// Transformer Engine floors touched by delay_wgrad_compute (reference §2.6).
#include "model/limits.hpp"
#include "planner/rules_common.hpp"

namespace epo::planner::rules {

void add_te_rules(std::vector<Rule>& out) {
  add(out, "TE-NVFP4-MIN", kError, "Megatron-LM megatron/training/arguments.py:1107-1109",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (c.opt.precision != model::Precision::nvfp4 || x.te.at_least(2, 7)) return "";
        return cat("--fp4-format requires Transformer Engine >= 2.7.0.dev0 for NVFP4BlockScaling "
                   "support; TE is ", ver(x.te));
      },
      "upgrade Transformer Engine (--te 2.7), or use --precision fp8");
  // The cost model refuses the same configurations (model/limits.hpp): one statement of the rule.
  add(out, model::kNvfp4ArchRule, kError,
      "TransformerEngine transformer_engine/pytorch/quantization.py (check_nvfp4_support: compute "
      "capability 10.0+)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        return model::nvfp4_hardware_problem(c);
      },
      model::nvfp4_hardware_fix());
  add(out, model::kFp8ArchRule, kError,
      "TransformerEngine transformer_engine/pytorch/quantization.py:149-159 (_compute_fp8_support: "
      "compute capability 8.9+)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        return model::fp8_hardware_problem(c);
      },
      model::fp8_hardware_fix());
  add(out, "TE-DELAY-WGRAD-MIN", kError,
      "Megatron-LM megatron/core/extensions/transformer_engine.py:1170-1174", kAllVersions,
      kBothFrontends,
      [](const Config& c, const ValidationContext& x) -> std::string {
        if (!c.opt.delay_wgrad_compute || x.te.at_least(2, 3)) return "";
        return cat("Only TE with version >=2.3.0 supports delay_wgrad_compute now; TE is ",
                   ver(x.te));
      },
      "upgrade Transformer Engine (--te 2.3; 2.8 with overlap_grad_reduce), or drop --delay-wgrad");
  add(out, "TE-FUSED-GROUPED-MLP-UNFUSED", kWarning,
      "Megatron-LM megatron/core/transformer/moe/experts.py:395-454 (_is_fused_impl_supported)",
      kAllVersions, kBothFrontends,
      [](const Config& c, const ValidationContext&) -> std::string {
        if (!c.opt.fused_grouped_mlp || model::fused_grouped_mlp_runs(c)) return "";
        return cat("TE's fused grouped MLP is asked for but the experts run unfused here: it needs "
                   "MXFP8 on Blackwell (compute capability 10+; this GPU ",
                   c.hw.compute_capability_major, ", precision ", model::to_string(c.opt.precision),
                   "), SwiGLU experts and ETP 1 (ETP ", c.par.etp, "); predicted unfused");
      },
      "drop --fused-grouped-mlp, or run MXFP8 (--precision fp8) on Blackwell with ETP 1");
}

}  // namespace epo::planner::rules
