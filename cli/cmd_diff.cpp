// epo diff A B: two configurations (EPO JSON or plan, Megatron-LM arguments, Bridge overrides, or
// training logs) predicted side by side: the settings that differ first, then step time, exposed
// communication, memory and the MoE layer's ops, and for logs the measured change beside the
// predicted one.
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

#include "cli/check_log.hpp"
#include "cli/commands.hpp"
#include "cli/ingest_flags.hpp"
#include "ingest/bridge_overrides.hpp"
#include "ingest/mlm_args.hpp"
#include "ingest/training_log.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/prediction.hpp"

namespace epo::cli {

namespace {

struct Side {
  std::string path, kind;
  model::Config config;
  double measured_step_s = std::nan("");
};

Side read_side(const std::string& path, const ConfigFlags& f) {
  Side s;
  s.path = path;
  const std::string text = read_text_input(path);
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    s.kind = "configuration";
    s.config = model::load_config_file(path);
    return s;
  }
  const auto log = ingest::read_training_log(text);
  LogConfig lc = config_of_log(text, path, f, log);
  if (!log.iterations.empty() || lc.found_in_log) {
    s.kind = "training log";
    EPO_REQUIRE_INPUT(lc.complete, path, ": ", lc.missing);
    s.config = lc.config;
    s.measured_step_s = ingest::steady_state(log).step_time_ms / 1000.0;
    return s;
  }
  ingest::ReadReport r;
  const model::Config base = build_config(f);
  if (text.find("--") != std::string::npos) {
    s.kind = "Megatron-LM arguments";
    s.config = ingest::config_from_mlm_args(base, text, path, r);
  } else {
    s.kind = "Bridge overrides";
    s.config = ingest::config_from_bridge_overrides(base, text, path, r);
  }
  print_read_report(s.kind + " " + path, r);
  s.config.derive_and_check();
  return s;
}

void flatten(const nlohmann::json& j, const std::string& prefix, std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  } else {
    out[prefix] = j.dump();
  }
}

}  // namespace

void add_diff(CLI::App& app, Runner& run) {
  auto f = std::make_shared<ConfigFlags>();
  auto paths = std::make_shared<std::vector<std::string>>();
  auto* sub = app.add_subcommand("diff", "predict two configurations (or logs) and explain the "
                                         "difference op by op, the settings that differ first");
  // One positional of two values (CLI11 2.4 refuses a name with a space, such as "A B").
  sub->add_option("files", *paths, "two files, A then B: EPO JSON, plan, Megatron-LM arguments, "
                                   "Bridge overrides or training logs")
      ->required()
      ->expected(2)
      ->type_name("FILE");
  add_config_flags(*sub, *f);
  sub->callback([f, paths, &run]() {
    run = [f, paths]() {
      const Side a = read_side((*paths)[0], *f), b = read_side((*paths)[1], *f);
      std::map<std::string, std::string> ja, jb;
      flatten(model::to_json(a.config), "", ja);
      flatten(model::to_json(b.config), "", jb);
      std::printf("epo diff: A = %s (%s), B = %s (%s)\n", a.path.c_str(), a.kind.c_str(),
                  b.path.c_str(), b.kind.c_str());
      std::printf("settings that differ:\n");
      int n = 0;
      for (const auto& [k, v] : ja) {
        const auto it = jb.find(k);
        const std::string w = it == jb.end() ? "(absent)" : it->second;
        if (w != v && k.rfind("hardware.", 0) != 0 && k.rfind("model.sources", 0) != 0) {
          std::printf("  %-48s %s -> %s\n", k.c_str(), v.c_str(), w.c_str());
          ++n;
        }
      }
      if (n == 0) std::printf("  (none)\n");
      const model::Prediction pa = model::predict(a.config), pb = model::predict(b.config);
      auto pct = [](double x, double y) { return x > 0 ? (y - x) / x * 100.0 : 0.0; };
      std::printf("\n%-34s %14s %14s %9s\n", "predicted", "A", "B", "change");
      auto row = [&](const char* name, double x, double y, const char* unit) {
        std::printf("%-34s %11.2f %-2s %11.2f %-2s %+8.1f%%\n", name, x, unit, y, unit, pct(x, y));
      };
      row("step time", pa.step_time_us / 1e3, pb.step_time_us / 1e3, "ms");
      row("exposed EP communication", pa.exposed_comm_us / 1e3, pb.exposed_comm_us / 1e3, "ms");
      row("model TFLOP/s per GPU", pa.model_tflops_per_gpu, pb.model_tflops_per_gpu, "");
      row("tokens/s per GPU", pa.tokens_per_s_per_gpu, pb.tokens_per_s_per_gpu, "");
      row("memory per GPU", pa.memory.total_bytes / 1e9, pb.memory.total_bytes / 1e9, "GB");
      if (!std::isnan(a.measured_step_s) && !std::isnan(b.measured_step_s))
        std::printf("%-34s %11.2f ms %11.2f ms %+8.1f%%   (predicted %+.1f%%)\n", "measured step time",
                    a.measured_step_s * 1e3, b.measured_step_s * 1e3,
                    pct(a.measured_step_s, b.measured_step_s), pct(pa.step_time_us, pb.step_time_us));
      // The MoE layer's ops, matched by kind and direction.
      std::map<std::string, std::pair<double, double>> ops;
      for (const auto& op : pa.costs.moe_layer.ops)
        ops[std::string(model::to_string(op.kind)) + "/" + model::to_string(op.dir)].first += op.duration_us();
      for (const auto& op : pb.costs.moe_layer.ops)
        ops[std::string(model::to_string(op.kind)) + "/" + model::to_string(op.dir)].second += op.duration_us();
      std::printf("\none MoE layer, per op (us)         %14s %14s %9s\n", "A", "B", "change");
      for (const auto& [k, v] : ops)
        if (std::fabs(v.second - v.first) > 0.005 * std::max(v.first, v.second) || v.first == 0)
          std::printf("  %-32s %14.1f %14.1f %+9.1f\n", k.c_str(), v.first, v.second, v.second - v.first);
      return 0;
    };
  });
}

}  // namespace epo::cli
