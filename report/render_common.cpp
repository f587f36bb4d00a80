#include <algorithm>
#include <cmath>

#include "report/json_get.hpp"
#include "report/render_detail.hpp"
#include "report/svg.hpp"

namespace epo::report::detail {

namespace {

constexpr double kGiB = 1024.0 * 1024 * 1024;

/// A configuration value that may be a plain number or {"value": ..., "source": ...}.
std::string name_of(const nlohmann::json& j) {
  if (j.is_string()) return j.get<std::string>();
  if (j.is_object() && j.contains("name") && j["name"].is_string())
    return j["name"].get<std::string>();
  return "?";
}

}  // namespace

std::string config_line(const nlohmann::json& c, const std::string& where) {
  if (!c.is_object()) return "(no configuration in the record)";
  std::string s = (c.contains("model") ? name_of(c["model"]) : "?") + " on " +
                  fmt_num(number(c, "gpus", where)) + " x " +
                  (c.contains("hardware") ? name_of(c["hardware"]) : "?");
  if (c.contains("parallel") && c["parallel"].is_object()) {
    const auto& p = c["parallel"];
    s += ": ";
    for (const char* k : {"tp", "pp", "vpp", "cp", "ep", "etp", "dp"})
      s += std::string(k) + fmt_num(number(p, k, where)) + " ";
    s += "mbs " + fmt_num(number(p, "micro_batch_size", where)) + ", gbs " +
         fmt_num(number(p, "global_batch_size", where)) + ", seq " +
         fmt_num(number(p, "seq_length", where));
  }
  if (c.contains("options") && c["options"].is_object()) {
    const auto& o = c["options"];
    const std::string d = text(o, "dispatcher", where);
    s += "; " + d + (d == "flex" ? "/" + text(o, "flex_backend", where) : "");
    s += o.value("overlap_moe_expert_parallel_comm", false) ? ", overlap on" : ", overlap off";
    if (o.value("delay_wgrad_compute", false)) s += ", delay-wgrad";
    s += ", " + text(o, "precision", where);
  }
  return s;
}

void prediction_summary(Page& page, const nlohmann::json& p, const std::string& where) {
  auto ms = [&](const char* k) { return fmt_num(number(p, k, where) / 1e3); };
  page.table(
      {"step time (ms)", "without overlap (ms)", "overlap gain (%)", "exposed EP comm (ms)",
       "tokens/s per GPU", "model TFLOP/s per GPU", "MFU (%)", "memory per GPU (GiB)", "method"},
      {{ms("step_time_us"), ms("baseline_step_time_us"),
        fmt_num(100 * number(p, "overlap_gain", where)), ms("exposed_comm_us"),
        fmt_num(number(p, "tokens_per_s_per_gpu", where)),
        fmt_num(number(p, "model_tflops_per_gpu", where)), fmt_num(100 * number(p, "mfu", where)),
        fmt_num(number(p, "peak_memory_bytes", where) / kGiB), text(p, "method", where)}});
}

void memory_chart(Page& page, const nlohmann::json& p, const std::string& where) {
  if (!p.contains("memory")) return;
  const auto& m = p["memory"];
  static const std::pair<const char*, const char*> kParts[] = {
      {"weights_bytes", "weights"},
      {"fp8_weight_bytes", "fp8 weight copies"},
      {"gradients_bytes", "gradients"},
      {"optimizer_bytes", "optimizer states"},
      {"activations_bytes", "activations"},
      {"transient_bytes", "transient at the peak"},
      {"dispatcher_buffers_bytes", "dispatcher buffers"},
      {"cuda_graph_bytes", "CUDA-graph surfaces"},
      {"workspace_bytes", "library workspaces"},
      {"framework_overhead_bytes", "framework + fragmentation"}};
  BarSpec spec;
  spec.title = "Memory per GPU against the capacity";
  spec.value_label = "memory per GPU (GiB)";
  spec.unit = "GiB";
  spec.stacked = true;
  for (const auto& [key, name] : kParts) spec.series.push_back(name);
  spec.series.push_back("total (pipeline rank, by total only)");
  const int peak = static_cast<int>(number(m, "peak_stage", where, 0));
  const nlohmann::json stages = array(m, "stage_total_bytes", where);
  const size_t n = std::max<size_t>(1, stages.size());
  for (size_t r = 0; r < n; ++r) {
    std::vector<double> row(spec.series.size(), kNaN);
    if (static_cast<int>(r) == peak) {
      for (size_t k = 0; k < std::size(kParts); ++k) {
        const double v = number(m, kParts[k].first, where, 0);
        if (v > 0) row[k] = v / kGiB;
      }
      spec.groups.push_back("pp rank " + std::to_string(r) + " (fullest)");
    } else {
      EPO_REQUIRE_INPUT(stages[r].is_number(), where, ": memory.stage_total_bytes[", r,
                        "] is not a number");
      row.back() = stages[r].get<double>() / kGiB;
      spec.groups.push_back("pp rank " + std::to_string(r));
    }
    spec.values.push_back(row);
  }
  const double cap = number(m, "capacity_bytes", where, -1);
  if (cap > 0) {
    spec.limit = cap / kGiB;
    spec.limit_label = "capacity " + fmt_num(cap / kGiB) + " GiB";
  }
  page.chart(bar_svg(spec));
}

std::string op_kind(const std::string& name) {
  const auto dot = name.find_first_of("./");
  return dot == std::string::npos ? name : name.substr(0, dot);
}

TimelineSpec timeline_spec(const nlohmann::json& t, const std::string& where, double shift_us) {
  TimelineSpec spec;
  for (const auto& l : array(t, "lanes", where))
    spec.lanes.push_back(l.is_string() ? l.get<std::string>() + " stream" : "?");
  for (const auto& op : array(t, "ops", where)) {
    EPO_REQUIRE_INPUT(op.is_array() && op.size() >= 4 && op[0].is_number_integer() &&
                          op[1].is_string() && op[2].is_number() && op[3].is_number(),
                      where, ": timeline op ", op.dump(),
                      " is not [lane, name, start_us, end_us, ...]");
    TimelineBox b;
    b.lane = op[0].get<int>();
    EPO_REQUIRE_INPUT(b.lane >= 0 && b.lane < static_cast<int>(spec.lanes.size()), where,
                      ": timeline op ", op.dump(), " names lane ", b.lane, " of ",
                      spec.lanes.size());
    const std::string name = op[1].get<std::string>();
    b.start = op[2].get<double>() - shift_us;
    b.end = op[3].get<double>() - shift_us;
    b.name = op_kind(name);
    b.title = name;
    if (op.size() >= 6 && op[4].is_number() && op[4].get<int>() >= 0)
      b.title += " mb " + std::to_string(op[4].get<int>());
    if (op.size() >= 6 && op[5].is_number() && op[5].get<int>() >= 0)
      b.title += " layer " + std::to_string(op[5].get<int>());
    b.title += ": " + fmt_num(b.end - b.start) + " us at " + fmt_num(b.start) + " us";
    spec.boxes.push_back(std::move(b));
  }
  return spec;
}

void mark_exposed(TimelineSpec& spec, int compute_lane, int comm_lane) {
  std::vector<std::pair<double, double>> cover, comm;
  for (const auto& b : spec.boxes) {
    if (b.lane == compute_lane) cover.push_back({b.start, b.end});
    if (b.lane == comm_lane && (b.name == "dispatch" || b.name == "combine"))
      comm.push_back({b.start, b.end});
  }
  std::sort(cover.begin(), cover.end());
  std::sort(comm.begin(), comm.end());
  std::vector<std::pair<double, double>> merged;
  for (const auto& c : cover) {
    if (!merged.empty() && c.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, c.second);
    else
      merged.push_back(c);
  }
  size_t k = 0;
  for (auto [s, e] : comm) {
    while (k < merged.size() && merged[k].second <= s) ++k;
    for (size_t j = k; j < merged.size() && s < e; ++j) {
      if (merged[j].first >= e) break;
      if (merged[j].first > s) {
        spec.highlights.push_back({comm_lane, s, merged[j].first, "exposed", {}});
      }
      s = std::max(s, merged[j].second);
    }
    if (s < e) spec.highlights.push_back({comm_lane, s, e, "exposed", {}});
  }
  for (auto& h : spec.highlights)
    h.title =
        "exposed communication: " + fmt_num(h.end - h.start) + " us at " + fmt_num(h.start) + " us";
}

void middle_window(const TimelineSpec& spec, int num_ops, double& t0, double& t1) {
  std::vector<std::pair<double, double>> spans;
  for (const auto& b : spec.boxes) spans.push_back({b.start, b.end});
  std::sort(spans.begin(), spans.end());
  if (spans.empty()) {
    t0 = 0, t1 = -1;
    return;
  }
  const size_t mid = spans.size() / 2, half = static_cast<size_t>(std::max(1, num_ops / 2));
  const size_t a = mid > half ? mid - half : 0, z = std::min(spans.size(), mid + half);
  t0 = spans[a].first;
  t1 = t0;
  for (size_t i = a; i < z; ++i) t1 = std::max(t1, spans[i].first);
}

}  // namespace epo::report::detail
