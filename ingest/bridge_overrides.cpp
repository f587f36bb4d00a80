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
  const auto dot = key.find('.');
  if (dot == std::string::npos || key.find('.', dot + 1) != std::string::npos) return "";
  return is_megatron_section(key.substr(0, dot)) ? key.substr(dot + 1) : "";
}

}  // namespace

model::Config config_from_bridge_overrides(const model::Config& base, const std::string& text,
                                           const std::string& source, ReadReport& report) {
  std::vector<ArgValue> args;
  std::vector<std::string> unknown_keys;
  bool backend_deleted = false;
  for (const auto& [line_no, line] : logical_lines(text)) {
    for (const auto& w : shell_words(line)) {
      std::string s = w.text;
      const std::string where = source + " line " + std::to_string(line_no);
      bool del = false;
      if (!s.empty() && s[0] == '+') s = s.substr(1 + (s.size() > 1 && s[1] == '+'));
      else if (!s.empty() && s[0] == '~') {
        s = s.substr(1);
        del = true;
      }
      const auto eq = s.find('=');
      if (!del && (eq == std::string::npos || eq == 0 || s.rfind("--", 0) == 0)) continue;
      const std::string key = del ? s.substr(0, eq) : s.substr(0, eq);
      const std::string value = del ? "None" : s.substr(eq + 1);
      const std::string w_key = where + " (" + key + ")";
      if (key == "mixed_precision") {
        // Bridge's precision recipes: bf16_mixed, fp16_mixed, bf16_with_fp8_*_mixed, ...
        args.push_back({"fp8", value.find("fp8") != std::string::npos ? "hybrid" : "None", w_key});
        if (value.find("fp16") != std::string::npos)
          report.warnings.push_back(w_key + ": fp16 training modelled as bf16");
        report.read.push_back("mixed_precision");
        continue;
      }
      if (key.size() >= 8 && key.compare(key.size() - 8, 8, "_target_") == 0) {
        report.ignored.push_back(key);  // Hydra's class to build, not a setting
        continue;
      }
      const std::string dest = dest_of_key(key);
      if (dest.empty() || !(is_table_argument(dest) || is_known_megatron_argument(dest))) {
        unknown_keys.push_back(key);
        continue;
      }
      if (dest == "moe_flex_dispatcher_backend" && Value(value, w_key).is_none()) backend_deleted = true;
      args.push_back({dest, value, w_key});
    }
  }
  EPO_REQUIRE_INPUT(!args.empty() || !unknown_keys.empty(), source,
                    ": no Bridge overrides (section.key=value) found");
  model::Config c = apply_megatron_args(base, args, Unset::keep_base, report);
  // Bridge: without a flex backend the recipe's dispatcher falls back to all-to-all.
  if (backend_deleted && c.opt.dispatcher == model::Dispatcher::flex)
    c.opt.dispatcher = model::Dispatcher::alltoall;
  for (const auto& k : unknown_keys) report.unknown.push_back(k);
  return c;
}

}  // namespace epo::ingest
