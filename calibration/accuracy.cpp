#include "calibration/accuracy.hpp"

#include <algorithm>
#include <iomanip>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "model/config_io.hpp"
#include "model/error.hpp"

namespace epo::calib {

using model::HardwareProfile;

const char* to_string(MetricKind k) {
  switch (k) {
    case MetricKind::op:
      return "op mean";
    case MetricKind::step_time:
      return "step time";
    case MetricKind::baseline_step_time:
      return "baseline step time";
    case MetricKind::overlap_gain:
      return "overlap gain";
    case MetricKind::exposed_comm:
      return "exposed comm";
    case MetricKind::peak_memory:
      return "peak memory";
  }
  return "?";
}

namespace {

const char* error_unit(MetricKind k) {
  return k == MetricKind::overlap_gain ? "pp" : k == MetricKind::exposed_comm ? "%step" : "%";
}

double ape(double predicted, double measured) {
  return measured != 0 ? std::abs(predicted - measured) / std::abs(measured) * 100.0 : 0.0;
}

/// The configuration as a ranking key: everything but the dispatcher and the overlap flags.
std::string ranking_key(const MeasuredRun& m) {
  nlohmann::json j = model::to_json(m.config);
  j.erase("hardware");
  auto& o = j["options"];
  for (const char* k : {"dispatcher", "flex_backend", "overlap_moe_expert_parallel_comm",
                        "delay_wgrad_compute", "ep_overlap_early_attn_memory_release", "comm_sms"})
    o.erase(k);
  j["layers"] = m.layers;
  return j.dump();
}

std::string flag_diff(const MeasuredRun& a, const MeasuredRun& b) {
  const auto& x = a.config.opt;
  const auto& y = b.config.opt;
  std::vector<std::string> d;
  if (x.dispatcher != y.dispatcher || x.flex_backend != y.flex_backend) d.push_back("dispatcher");
  if (x.overlap_moe_expert_parallel_comm != y.overlap_moe_expert_parallel_comm)
    d.push_back("overlap");
  if (x.delay_wgrad_compute != y.delay_wgrad_compute) d.push_back("delay_wgrad");
  if (x.ep_overlap_early_attn_memory_release != y.ep_overlap_early_attn_memory_release)
    d.push_back("early_release");
  if (x.comm_sms != y.comm_sms) d.push_back("comm_sms");
  std::string s;
  for (const auto& e : d) s += (s.empty() ? "" : "+") + e;
  return s;
}

}  // namespace

ErrorStats error_stats(std::vector<double> e) {
  ErrorStats s;
  s.count = static_cast<int>(e.size());
  if (e.empty()) return s;
  std::sort(e.begin(), e.end());
  const size_t n = e.size();
  s.median = n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
  const size_t rank = static_cast<size_t>(std::ceil(0.9 * static_cast<double>(n)));
  s.p90 = e[std::max<size_t>(rank, 1) - 1];
  s.max = e.back();
  return s;
}

BaseHardware base_hardware(const std::string& name) {
  return [name](const MeasuredRun& m) {
    if (!name.empty()) return model::load_hardware_preset(name);
    std::string n = m.config.hardware_name;
    const std::string suffix = "-calibrated";
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      n.resize(n.size() - suffix.size());
    try {
      return model::load_hardware_preset(n);
    } catch (const Error&) {
      throw EPO_INPUT_ERROR(m.file, ": its configuration's hardware '", m.config.hardware_name,
                            "' is not a preset; name the base preset with --base");
    }
  };
}

AccuracyReport accuracy_report(const std::vector<MeasuredRun>& runs, const BaseHardware& base,
                               const HardwareProfile& profile) {
  AccuracyReport rep;
  rep.profile_name = profile.name;
  std::map<MetricKind, std::pair<std::vector<double>, std::vector<double>>> errs;
  std::vector<std::string> group_order;
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> group_errs;
  std::vector<double> step_before(runs.size()), step_after(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const MeasuredRun& m = runs[i];
    const HardwareProfile base_hw = base(m);
    const RunPrediction b = predict_measured(m, base_hw);
    const RunPrediction a = predict_measured(m, profile);
    step_before[i] = b.step_time_us;
    step_after[i] = a.step_time_us;
    RunAccuracy ra;
    ra.file = m.file;
    ra.label = run_label(m);
    ra.repeats = m.repeats;
    ra.step_spread = m.step_spread;
    ra.base_name = base_hw.name;
    auto add = [&](const std::string& name, MetricKind kind, double meas, double pb, double pa) {
      MetricRow row{name, kind, meas, pb, pa, 0, 0};
      if (kind == MetricKind::overlap_gain) {
        row.error_before = std::abs(pb - meas) * 100.0;
        row.error_after = std::abs(pa - meas) * 100.0;
      } else if (kind == MetricKind::exposed_comm) {
        row.error_before = m.step_time_us > 0 ? std::abs(pb - meas) / m.step_time_us * 100.0 : 0.0;
        row.error_after = m.step_time_us > 0 ? std::abs(pa - meas) / m.step_time_us * 100.0 : 0.0;
      } else {
        row.error_before = ape(pb, meas);
        row.error_after = ape(pa, meas);
      }
      errs[kind].first.push_back(row.error_before);
      errs[kind].second.push_back(row.error_after);
      if (kind == MetricKind::step_time) {
        const auto& c = m.config;
        const std::string g = c.model_name + " r" +
                              std::to_string(c.virtual_ranks > 0 ? c.virtual_ranks : c.num_gpus) +
                              (c.virtual_ranks > 0 ? "v " : " ") +
                              model::to_string(c.opt.dispatcher);
        if (!group_errs.count(g)) group_order.push_back(g);
        group_errs[g].first.push_back(row.error_before);
        group_errs[g].second.push_back(row.error_after);
      }
      ra.rows.push_back(row);
    };
    for (const auto& [key, us] : m.op_mean_us) {
      auto pb = b.op_mean_us.find(key), pa = a.op_mean_us.find(key);
      if (us <= 0 || pb == b.op_mean_us.end() || pa == a.op_mean_us.end()) continue;
      add(key, MetricKind::op, us, pb->second, pa->second);
    }
    add("step_time_us", MetricKind::step_time, m.step_time_us, b.step_time_us, a.step_time_us);
    if (m.baseline_step_time_us > 0) {
      add("baseline_step_time_us", MetricKind::baseline_step_time, m.baseline_step_time_us,
          b.baseline_step_time_us, a.baseline_step_time_us);
      add("overlap_gain", MetricKind::overlap_gain, m.overlap_gain, b.overlap_gain, a.overlap_gain);
    }
    add("exposed_comm_us", MetricKind::exposed_comm, m.exposed_comm_us, b.exposed_comm_us,
        a.exposed_comm_us);
    if (m.peak_memory_bytes > 0)
      add("peak_memory_bytes", MetricKind::peak_memory, m.peak_memory_bytes, b.peak_memory_bytes,
          a.peak_memory_bytes);
    rep.runs.push_back(ra);
  }
  for (auto kind : {MetricKind::step_time, MetricKind::baseline_step_time, MetricKind::op,
                    MetricKind::overlap_gain, MetricKind::exposed_comm, MetricKind::peak_memory}) {
    auto it = errs.find(kind);
    if (it == errs.end()) continue;
    rep.stats.push_back({kind, error_stats(it->second.first), error_stats(it->second.second)});
  }
  for (const auto& g : group_order)
    rep.groups.push_back(
        {g, error_stats(group_errs[g].first), error_stats(group_errs[g].second)});
  // Ranking: runs with the same key differ only in dispatcher / overlap flags.
  std::vector<std::string> keys;
  for (const auto& m : runs) keys.push_back(ranking_key(m));
  for (size_t i = 0; i < runs.size(); ++i) {
    for (size_t j = i + 1; j < runs.size(); ++j) {
      if (keys[i] != keys[j]) continue;
      const std::string differs = flag_diff(runs[i], runs[j]);
      if (differs.empty()) continue;  // repeats of one configuration: nothing to rank
      RankPair p;
      p.a = rep.runs[i].label;
      p.b = rep.runs[j].label;
      p.differs = differs;
      p.measured_a = runs[i].step_time_us;
      p.measured_b = runs[j].step_time_us;
      p.before_a = step_before[i];
      p.before_b = step_before[j];
      p.after_a = step_after[i];
      p.after_b = step_after[j];
      const double lo = std::min(p.measured_a, p.measured_b);
      const double rel = lo > 0 ? std::abs(p.measured_a - p.measured_b) / lo : 0.0;
      p.must_match = rel > kRankingThreshold;
      p.resolved = p.must_match &&
                   rel > std::max(rep.runs[i].step_spread, rep.runs[j].step_spread);
      const bool meas_a_faster = p.measured_a < p.measured_b;
      p.match_before = (p.before_a < p.before_b) == meas_a_faster;
      p.match_after = (p.after_a < p.after_b) == meas_a_faster;
      rep.pairs.push_back(p);
    }
  }
  return rep;
}

std::string accuracy_report_text(const AccuracyReport& r) {
  std::ostringstream os;
  char buf[320];
  for (const auto& run : r.runs) {
    os << "run " << run.label << "  (" << run.file << ")";
    if (run.repeats > 1)
      os << "  median of " << run.repeats << " repeats, step times " << std::fixed
         << std::setprecision(1) << 100.0 * run.step_spread << " % apart" << std::defaultfloat;
    os << "\n";
    std::snprintf(buf, sizeof buf, "  %-26s %14s %16s %12s %14s %12s\n", "metric", "measured",
                  ("before " + run.base_name).substr(0, 16).c_str(), "err", "after", "err");
    os << buf;
    for (const auto& row : run.rows) {
      const char* u = error_unit(row.kind);
      std::snprintf(buf, sizeof buf, "  %-26s %14.6g %16.6g %7.2f%-5s %14.6g %7.2f%-5s\n",
                    row.name.c_str(), row.measured, row.before, row.error_before, u, row.after,
                    row.error_after, u);
      os << buf;
    }
    os << "\n";
  }
  os << "summary over " << r.runs.size() << " run(s): absolute error (% ; pp = percentage points; "
     << "%s = percent of the measured step time)\n";
  std::snprintf(buf, sizeof buf, "  %-20s %5s | %9s %9s %9s | %9s %9s %9s\n", "metric", "n",
                "med(bef)", "p90(bef)", "max(bef)", "med(aft)", "p90(aft)", "max(aft)");
  os << buf;
  for (const auto& s : r.stats) {
    std::snprintf(buf, sizeof buf, "  %-20s %5d | %9.2f %9.2f %9.2f | %9.2f %9.2f %9.2f  %s\n",
                  to_string(s.kind), s.after.count, s.before.median, s.before.p90, s.before.max,
                  s.after.median, s.after.p90, s.after.max, error_unit(s.kind));
    os << buf;
  }
  os << "  peak memory: the executor's arena (weights, bf16 gradients, activation slots sized for\n"
        "  its capacity rows, transport buffers) against the model's peak without optimizer\n"
        "  states and without the CUDA context / NCCL / cuBLAS workspaces it keeps outside.\n";
  if (r.groups.size() > 1) {
    os << "step time by group (model, ranks, dispatcher): absolute error %\n";
    std::snprintf(buf, sizeof buf, "  %-34s %5s | %9s %9s | %9s %9s\n", "group", "n", "med(bef)",
                  "max(bef)", "med(aft)", "max(aft)");
    os << buf;
    for (const auto& g : r.groups) {
      std::snprintf(buf, sizeof buf, "  %-34s %5d | %9.2f %9.2f | %9.2f %9.2f\n", g.name.c_str(),
                    g.after.count, g.before.median, g.before.max, g.after.median, g.after.max);
      os << buf;
    }
  }
  int must = 0, ok_before = 0, ok_after = 0, resolved = 0, res_before = 0, res_after = 0;
  if (!r.pairs.empty()) {
    os << "\nranking of runs that differ only in dispatcher / overlap flags (must match when the "
          "measured step times differ by > "
       << kRankingThreshold * 100 << "%)\n";
    for (const auto& p : r.pairs) {
      const double diff =
          std::abs(p.measured_a - p.measured_b) / std::min(p.measured_a, p.measured_b) * 100;
      std::snprintf(
          buf, sizeof buf,
          "  %-40s vs %-40s [%s] measured %.5g / %.5g us (%.1f%%): before %s, after %s%s\n",
          p.a.c_str(), p.b.c_str(), p.differs.c_str(), p.measured_a, p.measured_b, diff,
          p.match_before ? "right" : "WRONG", p.match_after ? "right" : "WRONG",
          !p.must_match ? " (within threshold)"
                        : p.resolved ? "" : " (within the repeats' spread)");
      os << buf;
      if (p.must_match) {
        ++must;
        ok_before += p.match_before;
        ok_after += p.match_after;
      }
      if (p.resolved) {
        ++resolved;
        res_before += p.match_before;
        res_after += p.match_after;
      }
    }
    os << "  ranking right for " << ok_before << "/" << must << " pairs before calibration, "
       << ok_after << "/" << must << " after\n";
    if (resolved < must)
      os << "  of them, pairs whose difference also exceeds both runs' repeat spread: right for "
         << res_before << "/" << resolved << " before, " << res_after << "/" << resolved
         << " after\n";
  }
  return os.str();
}

nlohmann::json to_json(const AccuracyReport& r) {
  nlohmann::json runs = nlohmann::json::array();
  for (const auto& run : r.runs) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& row : run.rows)
      rows.push_back({{"metric", row.name},
                      {"kind", to_string(row.kind)},
                      {"measured", row.measured},
                      {"predicted_before", row.before},
                      {"predicted_after", row.after},
                      {"error_before", row.error_before},
                      {"error_after", row.error_after},
                      {"error_unit", error_unit(row.kind)}});
    runs.push_back(
        {{"file", run.file}, {"label", run.label}, {"base", run.base_name},
         {"repeats", run.repeats}, {"step_spread", run.step_spread}, {"rows", rows}});
  }
  nlohmann::json stats = nlohmann::json::array();
  for (const auto& s : r.stats) {
    auto st = [](const ErrorStats& e) {
      return nlohmann::json{
          {"count", e.count}, {"median", e.median}, {"p90", e.p90}, {"max", e.max}};
    };
    stats.push_back({{"metric", to_string(s.kind)},
                     {"error_unit", error_unit(s.kind)},
                     {"before", st(s.before)},
                     {"after", st(s.after)}});
  }
  nlohmann::json groups = nlohmann::json::array();
  for (const auto& g : r.groups)
    groups.push_back({{"group", g.name},
                      {"count", g.after.count},
                      {"step_error_before", {{"median", g.before.median}, {"max", g.before.max}}},
                      {"step_error_after", {{"median", g.after.median}, {"max", g.after.max}}}});
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& p : r.pairs)
    pairs.push_back({{"a", p.a},
                     {"b", p.b},
                     {"differs", p.differs},
                     {"measured_a_us", p.measured_a},
                     {"measured_b_us", p.measured_b},
                     {"before_a_us", p.before_a},
                     {"before_b_us", p.before_b},
                     {"after_a_us", p.after_a},
                     {"after_b_us", p.after_b},
                     {"must_match", p.must_match},
                     {"resolved", p.resolved},
                     {"match_before", p.match_before},
                     {"match_after", p.match_after}});
  return {{"schema_version", 1},       {"kind", "calibration_report"},
          {"profile", r.profile_name}, {"runs", runs},
          {"summary", stats},          {"groups", groups},
          {"ranking", pairs}};
}

}  // namespace epo::calib
