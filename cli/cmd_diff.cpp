// epo diff A B: two configurations (EPO JSON or plan, Megatron-LM arguments, Bridge overrides or
// printed configuration, or training logs) predicted side by side: the settings that differ
// first, then step time, exposed communication, memory, each setting's share of the change (A
// with B's value of that one setting), the MoE layer's ops per step as `epo plan` explains its
// winner, and for logs the measured change beside the predicted one.
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "cli/check_log.hpp"
#include "cli/commands.hpp"
#include "cli/ingest_flags.hpp"
#include "ingest/bridge_config.hpp"
#include "ingest/bridge_overrides.hpp"
#include "ingest/mlm_args.hpp"
#include "ingest/training_log.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/json_file.hpp"
#include "model/pipeline_layout.hpp"
#include "model/prediction.hpp"
#include "planner/explain.hpp"
#include "planner/validation.hpp"

namespace epo::cli {

namespace {

struct Side {
  std::string path, kind;
  model::Config config;
  double measured_step_s = std::nan("");
  std::vector<std::string> assumed;   ///< settings a log or argument list did not name
  std::vector<std::string> rejected;  ///< errors of the rules Megatron enforces, "ID: message"
};

/// Megatron's rules on one side (Megatron-LM's for arguments and logs, Bridge's otherwise): a
/// side Megatron would refuse is still predicted, and said to be refused.
void check_rules(Side& s) {
  planner::ValidationContext ctx;
  if (s.kind == "training log" || s.kind == "Megatron-LM arguments")
    ctx.frontend = planner::Frontend::mlm;
  for (const auto& v : planner::validate(s.config, ctx))
    if (v.severity == planner::Severity::error) s.rejected.push_back(v.id + ": " + v.message);
}

Side read_side(const std::string& path, const ConfigFlags& f) {
  Side s;
  s.path = path;
  const std::string text = read_text_input(path);
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    s.kind = "configuration";
    s.config = model::load_config_file(path);
    s.config.derive_and_check();  // dp and the checks the reader leaves to derive
    return s;
  }
  const auto log = ingest::read_training_log(text);
  LogConfig lc = config_of_log(text, path, f, log);
  if (!log.iterations.empty() || lc.found_in_log) {
    s.kind = "training log";
    EPO_REQUIRE_INPUT(lc.complete, path, ": no prediction for this log: ", lc.missing);
    s.config = lc.config;
    s.measured_step_s = ingest::steady_state(log).step_time_ms / 1000.0;
    for (const auto& x : lc.report.assumed) s.assumed.push_back(x.to_string());
    return s;
  }
  ingest::ReadReport r;
  // The file completes the base: the flags' layout alone need not hold (--gpus 8 beside the
  // default model's EP 16); the result is checked below.
  const model::Config base = build_config(f, false);
  if (ingest::looks_like_bridge_config(text)) {  // after logs: a log may hold Bridge's YAML
    s.kind = "Bridge configuration";
    s.config = ingest::config_from_bridge_config(base, text, path, r);
  } else if (text.find("--") != std::string::npos) {
    s.kind = "Megatron-LM arguments";
    s.config = ingest::config_from_mlm_args(base, text, path, r);
  } else {
    s.kind = "Bridge overrides";
    s.config = ingest::config_from_bridge_overrides(base, text, path, r);
  }
  print_read_report(s.kind + " " + path, r);
  for (const auto& x : r.assumed) s.assumed.push_back(x.to_string());
  s.config.derive_and_check();
  model::check_pipeline_layout(s.config);
  return s;
}

void flatten(const nlohmann::json& j, const std::string& prefix,
             std::map<std::string, nlohmann::json>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out[prefix] = j;
  }
}

/// Settings that differ between the two configurations, as flattened EPO JSON keys. The hardware
/// and the model's sources are compared as names only; dp follows from the others.
std::vector<std::string> differing_keys(const std::map<std::string, nlohmann::json>& a,
                                        const std::map<std::string, nlohmann::json>& b) {
  std::vector<std::string> keys;
  auto skip = [](const std::string& k) {
    return (k.rfind("hardware.", 0) == 0 && k != "hardware.name") ||
           k.rfind("model.sources", 0) == 0 || k == "parallel.dp";
  };
  for (const auto& [k, v] : a) {
    const auto it = b.find(k);
    if (!skip(k) && (it == b.end() || it->second != v)) keys.push_back(k);
  }
  for (const auto& [k, v] : b)
    if (!skip(k) && !a.count(k)) keys.push_back(k);
  return keys;
}

/// A's configuration with B's value of the one setting `key`; false when it cannot stand alone
/// (the reader or the layout checks refuse it).
bool with_one_setting(const model::Config& a, const nlohmann::json& b_json, const std::string& key,
                      model::Config& out) {
  nlohmann::json j = model::to_json(a);
  nlohmann::json::json_pointer ptr("/" + [&] {
    std::string p = key;
    for (auto& ch : p)
      if (ch == '.') ch = '/';
    return p;
  }());
  if (!b_json.contains(ptr)) return false;
  if (key.rfind("hardware.", 0) == 0)
    j["hardware"] = b_json["hardware"];
  else
    j[ptr] = b_json[ptr];
  try {
    out = model::config_from_json(j, "A with one setting of B");
    out.derive_and_check();
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string shown(const std::map<std::string, nlohmann::json>& m, const std::string& k) {
  const auto it = m.find(k);
  return it == m.end() ? "(absent)" : it->second.dump();
}

nlohmann::json num_or_null(double x) {
  return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr);
}

nlohmann::json side_json(const Side& s, const model::Prediction& p) {
  return {{"path", s.path},
          {"kind", s.kind},
          {"assumed", s.assumed},
          {"rejected", s.rejected},
          {"config", model::to_json(s.config)},
          {"predicted",
           {{"step_time_s", p.step_time_us / 1e6},
            {"exposed_comm_s", p.exposed_comm_us / 1e6},
            {"tflops_per_gpu", p.model_tflops_per_gpu},
            {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
            {"memory_gb", p.memory.total_bytes / 1e9}}},
          {"measured", {{"step_time_s", num_or_null(s.measured_step_s)}}}};
}

int run_diff(const std::vector<std::string>& paths, const ConfigFlags& f,
             const std::string& json_path) {
  model::check_output_paths({json_path}, paths);
  Side a = read_side(paths[0], f), b = read_side(paths[1], f);
  check_rules(a);
  check_rules(b);
  const nlohmann::json ja_json = model::to_json(a.config), jb_json = model::to_json(b.config);
  std::map<std::string, nlohmann::json> ja, jb;
  flatten(ja_json, "", ja);
  flatten(jb_json, "", jb);
  std::printf("epo diff: A = %s (%s), B = %s (%s)\n", a.path.c_str(), a.kind.c_str(),
              b.path.c_str(), b.kind.c_str());
  for (const Side* s : {&a, &b}) {
    const char* name = s == &a ? "A" : "B";
    if (!s->assumed.empty())
      std::printf("  %s: %zu settings not named, defaults assumed (--json lists them)\n", name,
                  s->assumed.size());
    for (const auto& r : s->rejected)
      std::printf("  %s: Megatron would refuse it: %s\n", name, r.c_str());
  }
  const model::Prediction pa = model::predict(a.config), pb = model::predict(b.config);
  auto pct = [](double x, double y) { return x > 0 ? (y - x) / x * 100.0 : 0.0; };

  // The settings that differ, each with its own share: A with B's value of that setting alone.
  nlohmann::json settings = nlohmann::json::array();
  std::printf("settings that differ (step change: A with B's value of that setting alone):\n");
  const std::vector<std::string> keys = differing_keys(ja, jb);
  for (const auto& k : keys) {
    model::Config one;
    double change = std::nan("");
    if (with_one_setting(a.config, jb_json, k, one))
      change = pct(pa.step_time_us, model::predict(one).step_time_us);
    char share[64] = "(not alone: it changes with others)";
    if (!std::isnan(change)) std::snprintf(share, sizeof share, "step %+.1f%%", change);
    std::printf("  %-48s %s -> %s   %s\n", k.c_str(), shown(ja, k).c_str(), shown(jb, k).c_str(),
                share);
    settings.push_back({{"key", k},
                        {"a", ja.count(k) ? ja[k] : nlohmann::json(nullptr)},
                        {"b", jb.count(k) ? jb[k] : nlohmann::json(nullptr)},
                        {"step_change_pct_alone", num_or_null(change)}});
  }
  if (keys.empty()) std::printf("  (none)\n");

  std::printf("\n%-34s %14s %14s %9s\n", "predicted", "A", "B", "change");
  auto row = [&](const char* name, double x, double y, const char* unit) {
    std::printf("%-34s %11.2f %-2s %11.2f %-2s %+8.1f%%\n", name, x, unit, y, unit, pct(x, y));
  };
  row("step time", pa.step_time_us / 1e3, pb.step_time_us / 1e3, "ms");
  row("exposed EP communication", pa.exposed_comm_us / 1e3, pb.exposed_comm_us / 1e3, "ms");
  row("model TFLOP/s per GPU", pa.model_tflops_per_gpu, pb.model_tflops_per_gpu, "");
  row("tokens/s per GPU", pa.tokens_per_s_per_gpu, pb.tokens_per_s_per_gpu, "");
  row("memory per GPU", pa.memory.total_bytes / 1e9, pb.memory.total_bytes / 1e9, "GB");
  nlohmann::json measured = nullptr;
  if (!std::isnan(a.measured_step_s) && !std::isnan(b.measured_step_s)) {
    const double m = pct(a.measured_step_s, b.measured_step_s);
    const double p = pct(pa.step_time_us, pb.step_time_us);
    std::printf("%-34s %11.2f ms %11.2f ms %+8.1f%%   (predicted %+.1f%%)\n", "measured step time",
                a.measured_step_s * 1e3, b.measured_step_s * 1e3, m, p);
    measured = {{"step_change_pct", m}, {"predicted_step_change_pct", p}};
  }

  // Op by op, per step on one pipeline rank, as epo plan explains its winner (A the reference).
  planner::Plan plan_a{a.config, pa, 0, "A", 0}, plan_b{b.config, pb, 1, "B", 0};
  const planner::Comparison cmp = planner::compare_plans(plan_b, plan_a, "A (" + a.path + ")");
  std::printf("\nB against A, per step on one pipeline rank:\n%s",
              planner::format_comparison(cmp).c_str());

  if (!json_path.empty()) {
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& o : cmp.ops)
      ops.push_back({{"op", o.name}, {"a_us", o.reference_us}, {"b_us", o.winner_us}});
    model::write_json_file(json_path, {{"schema_version", 1},
                                       {"kind", "diff"},
                                       {"a", side_json(a, pa)},
                                       {"b", side_json(b, pb)},
                                       {"settings", settings},
                                       {"step_change_pct", pct(pa.step_time_us, pb.step_time_us)},
                                       {"measured", measured},
                                       {"ops_per_step", ops}});
  }
  return 0;
}

}  // namespace

void add_diff(CLI::App& app, Runner& run) {
  auto f = std::make_shared<ConfigFlags>();
  auto paths = std::make_shared<std::vector<std::string>>();
  auto json_path = std::make_shared<std::string>();
  auto* sub = app.add_subcommand("diff",
                                 "predict two configurations (or logs) and explain the "
                                 "difference op by op, the settings that differ first");
  // One positional of two values (CLI11 2.4 refuses a name with a space, such as "A B").
  sub->add_option("files", *paths,
                  "two files, A then B: EPO JSON, plan, Megatron-LM arguments, "
                  "Bridge overrides, Bridge configuration (YAML) or training logs")
      ->required()
      ->expected(2)
      ->type_name("FILE");
  add_config_flags(*sub, *f);
  sub->add_option("--json", *json_path, "also write the comparison as JSON");
  sub->callback([f, paths, json_path, &run]() {
    run = [f, paths, json_path]() { return run_diff(*paths, *f, *json_path); };
  });
}

}  // namespace epo::cli
