// Precision settings in both frontends: Bridge's mixed-precision presets (read and written),
// Megatron-LM's FP8 / NVFP4 flags, and the mixed-precision layers and modules neither preset
// names carry.
#include <sstream>
#include <tuple>

#include "model/error.hpp"
#include "planner/emit.hpp"

namespace epo::planner {

using model::Precision;

void apply_mixed_precision(model::Options& o, const std::string& v, const std::string& w) {
  using model::ParamsDtype;
  if (v == "null") {
    o.params_dtype = ParamsDtype::fp32;
    o.precision = Precision::bf16;
    return;
  }
  const bool bf16 = v.find("bf16") != std::string::npos, fp16 = v.rfind("fp16", 0) == 0;
  const bool fp8 = v.find("fp8") != std::string::npos, fp4 = v.find("nvfp4") != std::string::npos;
  EPO_REQUIRE_INPUT(bf16 || fp16, w, ": '", v,
                    "' is not a modelled preset (allowed: bf16_mixed, fp16_mixed, "
                    "bf16_with_fp8_*_mixed, fp16_with_fp8_*_mixed, *_with_mxfp8_mixed, "
                    "*bf16_with_nvfp4_mixed)");
  o.params_dtype = fp16 ? ParamsDtype::fp16 : ParamsDtype::bf16;
  o.precision = fp4 ? Precision::nvfp4 : fp8 ? Precision::fp8 : Precision::bf16;
  o.fp8_param_gather = model::bridge_preset_gathers_fp8_params(v);
  o.fp8_recipe = model::bridge_preset_fp8_recipe(v);
  // Presets that keep layers in BF16 (mixed_precision.py).
  std::tie(o.bf16_layers_start, o.bf16_layers_end) = model::bridge_preset_bf16_layers(v);
}

std::string bridge_mixed_precision(const model::Config& c) {
  const bool fp16 = c.opt.params_dtype == model::ParamsDtype::fp16;
  if (c.opt.params_dtype == model::ParamsDtype::fp32) return "null";
  if (c.opt.precision == Precision::nvfp4) return "bf16_with_nvfp4_mixed";
  if (c.opt.precision != Precision::fp8) return fp16 ? "fp16_mixed" : "bf16_mixed";
  // The recipe planned (by default MXFP8 on Blackwell, per-tensor current scaling on Hopper, as
  // Bridge's performance recipes run).
  const std::string base = fp16 ? "fp16_with_" : "bf16_with_";
  switch (model::fp8_recipe(c)) {
    case model::Fp8Recipe::mxfp8: return base + "mxfp8_mixed";
    case model::Fp8Recipe::delayed: return base + "fp8_delayed_scaling_mixed";
    case model::Fp8Recipe::blockwise: return base + "fp8_subchannel_scaling_mixed";
    default: return base + "fp8_current_scaling_mixed";
  }
}

std::string mixed_precision_notes(const model::Config& c, const char* comment) {
  const auto& o = c.opt;
  std::ostringstream os;
  if (!o.quantized()) return "";
  if (o.bf16_layers_start + o.bf16_layers_end > 0)
    os << comment << " the first " << o.bf16_layers_start << " and last " << o.bf16_layers_end
       << " layers in BF16: first_last_layers_bf16=true, num_layers_at_start_in_bf16="
       << o.bf16_layers_start << ", num_layers_at_end_in_bf16=" << o.bf16_layers_end
       << " (on the recipe's MixedPrecisionConfig object; a preset name cannot carry them)\n";
  auto list = [](const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
    return s;
  };
  if (!o.bf16_linears.empty())
    os << comment << " linears kept in BF16 (" << list(o.bf16_linears)
       << "): a Transformer Engine quantization recipe file (Bridge model.quant_recipe, "
          "Megatron-LM --te-precision-config-file) with a bf16 matcher for each\n";
  if (!o.fp8_linears.empty())
    os << comment << " linears in MXFP8 under NVFP4 (" << list(o.fp8_linears)
       << "): the same file, an mxfp8 matcher for each\n";
  return os.str();
}

void mlm_precision_args(const model::Config& c, std::vector<std::string>& a) {
  const auto& o = c.opt;
  auto kv = [&](const std::string& k, const std::string& v) { a.push_back(k + " " + v); };
  if (o.precision == Precision::fp8) {
    // The recipe planned (by default MXFP8 on Blackwell, per-tensor current scaling on Hopper);
    // the block-scaled ones in E4M3 both ways.
    const model::Fp8Recipe r = model::fp8_recipe(c);
    const bool blocks = r == model::Fp8Recipe::mxfp8 || r == model::Fp8Recipe::blockwise;
    kv("--fp8-format", blocks ? "e4m3" : "hybrid");
    kv("--fp8-recipe", model::to_string(r));
    if (o.fp8_param_gather) a.push_back("--fp8-param-gather");
  } else if (o.precision == Precision::nvfp4) {
    kv("--fp4-format", "e2m1");
    kv("--fp4-recipe", "nvfp4");
    if (o.fp8_param_gather) a.push_back("--fp4-param-gather");
  }
  if (o.quantized() && o.bf16_layers_start + o.bf16_layers_end > 0) {
    a.push_back("--first-last-layers-bf16");
    kv("--num-layers-at-start-in-bf16", std::to_string(o.bf16_layers_start));
    kv("--num-layers-at-end-in-bf16", std::to_string(o.bf16_layers_end));
  }
}

}  // namespace epo::planner
