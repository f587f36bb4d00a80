#include "ingest/bridge_overrides.hpp"

#include "ingest/arg_value.hpp"
#include "ingest/shell_words.hpp"
#include "model/error.hpp"

namespace epo::ingest {

namespace {

/// Sections whose keys are Megatron's field names (TransformerConfig, the training, DDP,
/// communication-overlap, optimizer and mixed-precision configs).
bool is_megatron_section(const std::string& s) {
  return s == "model" || s == "train" || s == "ddp" || s == "comm_overlap" || s == "optimizer" ||
         s == "mixed_precision" || s == "dataset" || s == "scheduler" || s == "checkpoint" ||
         s == "logger" || s == "profiling" || s == "rng" || s == "dist" || s == "tokenizer";
}

/// The Megatron name a Bridge key sets, or "" when it is not one.
std::string dest_of_key(const std::string& key) {
  if (key == "dataset.seq_length" || key == "dataset.sequence_length") return "seq_length";
  if (key == "mixed_precision.fp8") return "fp8";
  // TransformerConfig's names where Megatron-LM's argument differs: a printed Bridge
  // configuration holds the former (--num-experts and --swiglu set these fields).
  if (key == "model.num_moe_experts") return "num_experts";
  if (key == "model.gated_linear_unit") return "swiglu";
  const auto dot = key.find('.');
  if (dot == std::string::npos || key.find('.', dot + 1) != std::string::npos) return "";
  return is_megatron_section(key.substr(0, dot)) ? key.substr(dot + 1) : "";
}

/// Hydra's instantiation keys (`_target_`, `_call_`, `_partial_`, `_args_`, `_name_`): how to
/// build an object, not a setting.
bool is_hydra_key(const std::string& key) {
  const std::string last = key.substr(key.rfind('.') + 1);
  return last.size() > 2 && last.front() == '_' && last.back() == '_';
}

}  // namespace

model::Config config_from_bridge_settings(const model::Config& base,
                                          const std::vector<BridgeSetting>& settings,
                                          ReadReport& report, Unset unset) {
  std::vector<ArgValue> args;
  std::vector<std::string> unknown_keys;
  bool backend_deleted = false;
  for (const auto& [key, value, where] : settings) {
    const std::string w_key = where + " (" + key + ")";
    if (key == "mixed_precision") {
      // Bridge's precision recipes: bf16_mixed, fp16_mixed, bf16_with_fp8_*_mixed, ...
      args.push_back({"fp8", value.find("fp8") != std::string::npos ? "hybrid" : "None", w_key});
      args.push_back({"fp4", value.find("nvfp4") != std::string::npos ? "e2m1" : "None", w_key});
      const model::Fp8Recipe recipe = model::bridge_preset_fp8_recipe(value);
      if (recipe != model::Fp8Recipe::automatic)
        args.push_back({"fp8_recipe", model::to_string(recipe), w_key});
      // Its MXFP8, current- and delayed-scaling presets keep the primary weights in FP8.
      if (model::bridge_preset_gathers_fp8_params(value))
        args.push_back({"fp8_param_gather", "True", w_key});
      const auto [start, end] = model::bridge_preset_bf16_layers(value);
      args.push_back({"first_last_layers_bf16", start + end > 0 ? "True" : "False", w_key});
      args.push_back({"num_layers_at_start_in_bf16", std::to_string(start), w_key});
      args.push_back({"num_layers_at_end_in_bf16", std::to_string(end), w_key});
      if (value.find("fp16") != std::string::npos)
        report.warnings.push_back(w_key + ": fp16 training modelled as bf16");
      report.read.push_back("mixed_precision");
      continue;
    }
    if (is_hydra_key(key)) {
      report.ignored.push_back(key);
      continue;
    }
    const std::string dest = dest_of_key(key);
    if (dest.empty() || !(is_table_argument(dest) || is_known_megatron_argument(dest))) {
      unknown_keys.push_back(key);
      continue;
    }
    const Value v(value, w_key);
    if (dest == "moe_flex_dispatcher_backend" && v.is_none()) backend_deleted = true;
    // TransformerConfig takes num_query_groups as given; Megatron-LM only with
    // --group-query-attention.
    if (dest == "num_query_groups" && !v.is_none())
      args.push_back({"group_query_attention", "True", w_key});
    args.push_back({dest, value, w_key});
  }
  model::Config c = apply_megatron_args(base, args, unset, report);
  // Bridge: without a flex backend the recipe's dispatcher falls back to all-to-all.
  if (backend_deleted && c.opt.dispatcher == model::Dispatcher::flex)
    c.opt.dispatcher = model::Dispatcher::alltoall;
  for (const auto& k : unknown_keys) report.unknown.push_back(k);
  return c;
}

model::Config config_from_bridge_overrides(const model::Config& base, const std::string& text,
                                           const std::string& source, ReadReport& report) {
  std::vector<BridgeSetting> settings;
  for (const auto& [line_no, line] : logical_lines(text)) {
    for (const auto& w : shell_words(line)) {
      std::string s = w.text;
      bool del = false;
      if (!s.empty() && s[0] == '+') s = s.substr(1 + (s.size() > 1 && s[1] == '+'));
      else if (!s.empty() && s[0] == '~') {
        s = s.substr(1);
        del = true;
      }
      const auto eq = s.find('=');
      if (!del && (eq == std::string::npos || eq == 0 || s.rfind("--", 0) == 0)) continue;
      settings.push_back({s.substr(0, eq), del ? "None" : s.substr(eq + 1),
                          source + " line " + std::to_string(line_no)});
    }
  }
  EPO_REQUIRE_INPUT(!settings.empty(), source, ": no Bridge overrides (section.key=value) found");
  return config_from_bridge_settings(base, settings, report);
}

}  // namespace epo::ingest
