#include "cli/check_log.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ingest/training_log.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/prediction.hpp"
#include "planner/validation.hpp"

namespace epo::cli {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

nlohmann::json num_or_null(double x) {
  return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x);
}

std::string fmt(const char* f, double x) {
  if (std::isnan(x)) return "(not in the log)";
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

/// Whether EP overlap ran: the flag, what Megatron does with it (the rules), what the log says.
void overlap_verdict(const LogConfig& lc, const std::vector<planner::Violation>& v,
                     const ingest::TrainingLog& log, nlohmann::json& j,
                     std::vector<std::string>& lines) {
  nlohmann::json evidence = nlohmann::json::array();
  nlohmann::json active = nullptr;
  if (lc.has_config) {
    const bool flag = lc.config.opt.overlap_moe_expert_parallel_comm;
    evidence.push_back(std::string("overlap_moe_expert_parallel_comm = ") +
                       (flag ? "True" : "False") +
                       (lc.bridge_block  ? " (Bridge configuration block)"
                        : lc.found_in_log ? " (arguments block)"
                                          : " (given configuration)"));
    active = flag;
    for (const auto& x : v)
      if (x.severity == planner::Severity::error &&
          (x.id.find("OVL") != std::string::npos ||
           x.message.find("overlap") != std::string::npos)) {
        evidence.push_back("Megatron refuses it: " + x.id + ": " + x.message);
        active = false;
      }
    if (flag && lc.config.model.num_experts == 0) {
      evidence.push_back("the model has no experts: nothing to overlap");
      active = false;
    }
  }
  for (const auto& w : log.overlap_warnings) {
    evidence.push_back("log " + w);
    if (w.find("Falling back to alltoall") != std::string::npos)
      evidence.push_back("the flex dispatcher fell back to alltoall");
  }
  j["overlap_active"] = active;
  j["overlap_evidence"] = evidence;
  lines.push_back(std::string("EP overlap active: ") + (active.is_null()
                                                            ? "unknown (no configuration)"
                                                        : active.get<bool>() ? "yes"
                                                                             : "no"));
  for (const auto& e : evidence) lines.push_back("  - " + e.get<std::string>());
}

}  // namespace

CheckLogResult check_log(const std::string& text, const std::string& name, const ConfigFlags& f,
                         double tolerance_pct) {
  CheckLogResult r;
  const ingest::TrainingLog log = ingest::read_training_log(text);
  LogConfig lc = config_of_log(text, name, f, log);
  if (log.empty() && !lc.found_in_log)
    throw EPO_INPUT_ERROR(name,
                          ": not a training log (no iteration, memory, Step Time or "
                          "arguments line found)");
  const ingest::SteadyState st = ingest::steady_state(log);
  auto& j = r.json;
  auto& L = r.lines;
  j["schema_version"] = 1;
  j["kind"] = "check_log";
  j["config_found"] = lc.found_in_log;
  j["config"] = lc.complete ? model::to_json(lc.config) : nlohmann::json(nullptr);
  j["arguments"] = {{"read", lc.report.read.size()},
                    {"ignored", lc.report.ignored.size()},
                    {"unknown", lc.report.unknown},
                    {"not_modelled", lc.report.not_modelled},
                    {"warnings", lc.report.warnings}};
  nlohmann::json findings = nlohmann::json::array();
  L.push_back("epo check-log: " + name);
  L.push_back(
      std::string("configuration: ") +
      (lc.bridge_summary ? "Bridge configuration summary found in the log (values that differ "
                           "from Megatron-Core's defaults; the others take them)"
       : lc.bridge_block ? "Bridge configuration block found in the log"
       : lc.found_in_log ? "arguments block found in the log"
                         : "no arguments block in the log") +
      (lc.complete ? "" : "; no prediction: " + lc.missing));
  std::vector<planner::Violation> violations;
  if (lc.complete) {
    planner::ValidationContext ctx;
    if (!lc.bridge_block) ctx.frontend = planner::Frontend::mlm;
    violations = planner::validate(lc.config, ctx);
    for (const auto& v : violations)
      findings.push_back(std::string(planner::to_string(v.severity)) + " " + v.id + ": " +
                         v.message + " (fix: " + v.fix + ")");
  }
  overlap_verdict(lc, violations, log, j, L);
  // Measured.
  const double step_s = st.step_time_ms / 1000.0;
  double tokens = std::nan("");
  if (lc.complete && !std::isnan(step_s) && st.global_batch_size > 0)
    tokens = static_cast<double>(st.global_batch_size) * lc.config.par.seq_length / step_s /
             lc.config.num_gpus;
  nlohmann::json used = st.used;
  j["measured"] = {{"step_time_s", num_or_null(step_s)},
                   {"tflops_per_gpu", num_or_null(st.tflops_per_gpu)},
                   {"tokens_per_s_per_gpu", num_or_null(tokens)},
                   {"peak_memory_mb", num_or_null(st.peak_max_allocated_mb)},
                   {"peak_reserved_mb", num_or_null(st.peak_max_reserved_mb)},
                   {"iterations_used", used},
                   {"excluded", st.excluded},
                   {"method", st.method}};
  L.push_back("measured (" + std::to_string(st.used.size()) + " logged iterations; " + st.method +
              "):");
  L.push_back("  step time " + fmt("%.3f s", step_s) +
              (std::isnan(step_s) ? ""
                                  : "  (range " + fmt("%.1f", st.min_step_time_ms) + " - " +
                                        fmt("%.1f ms)", st.max_step_time_ms)) +
              "   TFLOP/s/GPU " + fmt("%.1f", st.tflops_per_gpu) + "   tokens/s/GPU " +
              (std::isnan(tokens) && !std::isnan(step_s) ? "(needs the configuration)"
                                                         : fmt("%.0f", tokens)));
  L.push_back("  peak memory: max allocated " + fmt("%.1f MB", st.peak_max_allocated_mb) +
              ", max reserved " + fmt("%.1f MB", st.peak_max_reserved_mb) + " (" +
              std::to_string(st.memory_ranks) + " ranks reported)");
  for (const auto& e : st.excluded) L.push_back("  excluded " + e);
  // Every logged iteration, and whether it counts (the page's chart; figures as printed).
  nlohmann::json iters = nlohmann::json::array();
  for (const auto& it : log.iterations)
    iters.push_back(
        {{"iteration", it.iteration},
         {"elapsed_ms", num_or_null(it.elapsed_ms)},
         {"tflops_per_gpu", num_or_null(it.tflops_per_gpu)},
         {"used", std::find(st.used.begin(), st.used.end(), it.iteration) != st.used.end()}});
  j["iterations"] = iters;
  j["log"] = name;
  j["predicted"] = nullptr;
  j["gap_pct"] = nullptr;
  j["prediction_missing"] = lc.complete ? nlohmann::json(nullptr) : nlohmann::json(lc.missing);
  if (!lc.complete) findings.push_back("no prediction: " + lc.missing);
  if (lc.complete && !planner::has_errors(violations)) {
    const model::Prediction p = model::predict(lc.config);
    const double pred_s = p.step_time_us / 1e6;
    j["predicted"] = {{"step_time_s", pred_s},
                      {"tflops_per_gpu", p.model_tflops_per_gpu},
                      {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
                      {"peak_memory_mb", p.memory.allocated_bytes / kMiB},
                      {"total_memory_mb", p.memory.total_bytes / kMiB},
                      {"capacity_mb", p.memory.capacity_bytes / kMiB},
                      {"exposed_comm_s", p.exposed_comm_us / 1e6},
                      {"overlap_gain", p.overlap_gain}};
    L.push_back("predicted (" + lc.config.model_name + " on " + std::to_string(lc.config.num_gpus) +
                " x " + lc.config.hardware_name + "):");
    L.push_back("  step time " + fmt("%.3f s", pred_s) + "   TFLOP/s/GPU " +
                fmt("%.1f", p.model_tflops_per_gpu) + "   peak allocated " +
                fmt("%.1f MB", p.memory.allocated_bytes / kMiB) + "   exposed EP communication " +
                fmt("%.1f ms", p.exposed_comm_us / 1e3));
    // The MoE layer's largest ops are where a gap most likely sits.
    auto ops = p.costs.moe_layer.ops;
    std::sort(ops.begin(), ops.end(),
              [](const auto& a, const auto& b) { return a.duration_us() > b.duration_us(); });
    std::string top;
    for (size_t i = 0; i < ops.size() && i < 4; ++i)
      top += (i ? ", " : "") + std::string(model::to_string(ops[i].kind)) + "/" +
             model::to_string(ops[i].dir) + fmt(" %.0f us", ops[i].duration_us());
    if (!top.empty()) findings.push_back("largest predicted ops of one MoE layer: " + top);
    if (!p.memory.fits)
      findings.push_back("predicted memory " + fmt("%.1f GB", p.memory.total_bytes / 1e9) +
                         " per GPU is above the " + fmt("%.1f GB", p.memory.capacity_bytes / 1e9) +
                         " the GPU holds: the run as configured here could not have fit" +
                         (lc.report.assumed.empty() ? "" : "; check the settings assumed below"));
    if (!std::isnan(step_s)) {
      const double gap = (step_s - pred_s) / pred_s * 100.0;
      j["gap_pct"] = gap;
      L.push_back("gap: measured step " + fmt("%+.1f %%", gap) +
                  " against the prediction (tolerance " + fmt("%.0f %%)", tolerance_pct));
      if (gap > tolerance_pct) r.exit_code = 4;
    }
  } else if (lc.complete) {
    findings.push_back("the configuration breaks rules Megatron enforces; no prediction");
    j["prediction_missing"] = "the configuration breaks rules Megatron enforces";
    r.exit_code = 3;
  }
  for (const auto& w : lc.report.warnings) findings.push_back("assumed: " + w);
  for (const auto& n : lc.report.not_modelled) findings.push_back("not modelled: " + n);
  if (lc.complete && st.global_batch_size > 0 &&
      st.global_batch_size != lc.config.par.global_batch_size)
    findings.push_back("the log's global batch size " + std::to_string(st.global_batch_size) +
                       " differs from the configuration's " +
                       std::to_string(lc.config.par.global_batch_size));
  nlohmann::json assumed = nlohmann::json::array();
  for (const auto& a : lc.report.assumed) {
    findings.push_back("assumed: " + a.to_string());
    assumed.push_back(
        {{"argument", a.argument}, {"key", a.key}, {"value", a.value}, {"origin", a.origin}});
  }
  j["assumed"] = assumed;
  j["findings"] = findings;
  for (const auto& x : findings) L.push_back("finding: " + x.get<std::string>());
  return r;
}

void print_check_log(const CheckLogResult& r) {
  for (const auto& l : r.lines) std::printf("%s\n", l.c_str());
}

}  // namespace epo::cli
