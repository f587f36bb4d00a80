// Predicted against published: error statistics, the comparison, the report as text and JSON
// (the A/B pairs in published_pairs.cpp).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "calibration/published.hpp"
#include "calibration/published_detail.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/prediction.hpp"

namespace epo::calib {

using namespace detail;

ErrorStats error_stats(const std::vector<double>& signed_pct) {
  ErrorStats s;
  std::vector<double> a;
  double sum = 0;
  for (double x : signed_pct) {
    if (!std::isfinite(x)) continue;
    a.push_back(std::fabs(x));
    sum += x;
  }
  s.n = static_cast<int>(a.size());
  if (a.empty()) return s;
  std::sort(a.begin(), a.end());
  auto quantile = [&](double q) {
    const double pos = q * (a.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(a.size() - 1, lo + 1);
    return a[lo] + (a[hi] - a[lo]) * (pos - lo);
  };
  s.median_abs_pct = quantile(0.5);
  s.p90_abs_pct = quantile(0.9);
  s.mean_signed_pct = sum / a.size();
  return s;
}

namespace {

/// A release label as numbers ("26.04.01" -> 26, 4, 1), so that a later release compares greater.
std::vector<int> release_order(const std::string& release) {
  std::vector<int> v;
  std::istringstream is(release);
  for (std::string part; std::getline(is, part, '.');)
    v.push_back(std::atoi(part.c_str()));
  return v;
}

/// One configuration across releases: model, cluster, GPUs, precision, layout and batch.
std::string config_key(const PublishedRow& r) {
  const model::Config& c = *r.config;
  const auto& p = c.par;
  std::ostringstream os;
  os << r.model_preset << '|' << r.cluster << '|' << c.num_gpus << '|' << r.precision << '|'
     << p.tp << ',' << p.pp << ',' << p.vpp << ',' << p.cp << ',' << p.ep << ',' << p.etp << '|'
     << p.micro_batch_size << ',' << p.global_batch_size << ',' << p.seq_length;
  return os.str();
}

/// Current rows whose configuration a later release in the input publishes again: the model
/// predicts today's software, and those rows are the same job on older software.
std::set<const PublishedRow*> rerun_in_later_release(const std::vector<PublishedRow>& rows) {
  std::map<std::string, std::vector<int>> newest;
  auto dated = [](const PublishedRow& r) {
    return r.config && !r.release.empty() && (r.status == "current" || r.status.empty());
  };
  for (const auto& r : rows) {
    if (!dated(r)) continue;
    auto& n = newest[config_key(r)];
    n = std::max(n, release_order(r.release));
  }
  std::set<const PublishedRow*> out;
  for (const auto& r : rows)
    if (dated(r) && release_order(r.release) < newest[config_key(r)]) out.insert(&r);
  return out;
}

/// How far the published FLOPs per token may differ from Megatron-LM's count before the row is
/// compared as tokens/s (the rows of one counter agree within 1.3 %: rounding of both figures).
constexpr double kFlopsCountTolerance = 0.03;

/// Published FLOPs per token over the model's (1 when either rate is missing).
double flops_count_ratio(const RunFigures& pub, const RunFigures& pred) {
  const double p = pub.tflops_per_gpu / pub.tokens_per_s_per_gpu;
  const double m = pred.tflops_per_gpu / pred.tokens_per_s_per_gpu;
  return std::isfinite(p) && std::isfinite(m) && p > 0 && m > 0 ? p / m : 1.0;
}

}  // namespace

PublishedReport compare_published(const std::vector<PublishedRow>& rows, const Split& split,
                                  bool fast) {
  PublishedReport rep;
  std::map<std::string, std::vector<double>> groups;
  const std::set<const PublishedRow*> rerun = rerun_in_later_release(rows);
  for (const auto& r : rows) {
    ComparedRow c;
    c.row = &r;
    if (!r.config) {
      ++rep.unsupported;
      rep.rows.push_back(c);
      continue;
    }
    const model::Config& cfg = *r.config;
    const model::Prediction pr =
        model::predict(cfg, fast ? model::PredictMode::fast : model::PredictMode::full);
    c.predicted.tflops_per_gpu = pr.model_tflops_per_gpu;
    c.predicted.tokens_per_s_per_gpu = pr.tokens_per_s_per_gpu;
    c.predicted.step_time_s = pr.step_time_us * 1e-6;
    // Published peaks are PyTorch's max_memory_allocated: compare what the model says is
    // allocated (on the rank that published it); whether it fits is decided on the total with
    // the allocator's reserve.
    const auto& stages = pr.memory.stage_allocated_bytes;
    const double allocated =
        r.memory_of_last_rank && !stages.empty() ? stages.back() : pr.memory.allocated_bytes;
    c.predicted.peak_memory_gb = allocated / 1e9;
    c.predicted.fits = pr.memory.fits ? 1 : 0;
    const RunFigures& pub = r.published;
    const bool tokens = std::isfinite(pub.tokens_per_s_per_gpu) && pub.tokens_per_s_per_gpu > 0;
    const double count = flops_count_ratio(pub, c.predicted);
    if (tokens && std::abs(count - 1) > kFlopsCountTolerance) {
      // The publisher counted other FLOPs per token than Megatron-LM's formula (another counter
      // release, e.g. sliding windows counted or an MTP layer left out): the same tokens/s is
      // another TFLOP/s, so the rate is compared as tokens.
      c.metric = "tokens_per_s_per_gpu";
      c.error_pct = (c.predicted.tokens_per_s_per_gpu / pub.tokens_per_s_per_gpu - 1) * 100;
      char buf[160];
      std::snprintf(buf, sizeof buf,
                    "published FLOPs per token %.1f %% of Megatron-LM's count: error on tokens/s",
                    count * 100);
      c.note = buf;
    } else if (std::isfinite(pub.tflops_per_gpu) && pub.tflops_per_gpu > 0) {
      c.metric = "tflops_per_gpu";
      c.error_pct = (c.predicted.tflops_per_gpu / pub.tflops_per_gpu - 1) * 100;
    } else if (std::isfinite(pub.tokens_per_s_per_gpu) && pub.tokens_per_s_per_gpu > 0) {
      c.metric = "tokens_per_s_per_gpu";
      c.error_pct = (c.predicted.tokens_per_s_per_gpu / pub.tokens_per_s_per_gpu - 1) * 100;
    } else if (std::isfinite(pub.step_time_s) && pub.step_time_s > 0) {
      // As the throughput figures: predicted rate against published (a shorter step is faster).
      c.metric = "step_time_s";
      c.error_pct = (pub.step_time_s / c.predicted.step_time_s - 1) * 100;
    }
    if (pub.fits >= 0) {
      ++rep.memory_checked;
      if (pub.fits == c.predicted.fits) ++rep.memory_right;
    }
    if (pub.fits != 0 && std::isfinite(pub.peak_memory_gb) && pub.peak_memory_gb > 0 &&
        std::isfinite(c.predicted.peak_memory_gb)) {
      ++rep.peak_checked;
      const double err = (c.predicted.peak_memory_gb / pub.peak_memory_gb - 1) * 100;
      if (std::abs(err) <= kPeakMemoryTolerancePct) ++rep.peak_within;
    }
    // Only rows a fit can use (current, a published TFLOP/s/GPU or a CI step time, a model not
    // held out) count as "fit"; the Megatron-LM CI rows are also reported as their own group.
    if (split.active()) {
      const bool fittable = r.status == "current" &&
                            (c.metric == "tflops_per_gpu" || !c.note.empty() || fits_on_step_time(r));
      c.split = split.held_out(r) || !fittable ? "held-out" : "fit";
    }
    if (std::isfinite(c.error_pct) && r.status != "failed-OOM") {
      // Superseded rows and CI rows with scattered iteration times are reported apart.
      const bool current = r.status == "current" || r.status.empty();
      const std::string status = current ? "" : r.status + ":";
      groups[status + "all"].push_back(c.error_pct);
      if (current) {
        groups["cluster:" + r.cluster].push_back(c.error_pct);
        groups["model:" + r.model_preset].push_back(c.error_pct);
        if (r.source_type == "megatron-lm-ci") {
          groups["ci"].push_back(c.error_pct);
          groups["ci:cluster:" + r.cluster].push_back(c.error_pct);
        }
        if (!c.split.empty()) {
          groups[c.split].push_back(c.error_pct);
          groups[c.split + ":cluster:" + r.cluster].push_back(c.error_pct);
          if (!rerun.count(&r)) {
            groups["newest:" + c.split].push_back(c.error_pct);
            groups["newest:" + c.split + ":cluster:" + r.cluster].push_back(c.error_pct);
          }
        }
      }
    }
    rep.rows.push_back(c);
  }
  for (const auto& [k, v] : groups) rep.by_group[k] = error_stats(v);
  rep.pairs = find_ab_pairs(rep);
  return rep;
}

namespace {

std::string fmt(double v, const char* f = "%.1f") {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

nlohmann::json num_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json figures_json(const RunFigures& f) {
  return {{"tflops_per_gpu", num_or_null(f.tflops_per_gpu)},
          {"tokens_per_s_per_gpu", num_or_null(f.tokens_per_s_per_gpu)},
          {"step_time_s", num_or_null(f.step_time_s)},
          {"peak_memory_gb", num_or_null(f.peak_memory_gb)},
          {"fits", f.fits < 0 ? nlohmann::json() : nlohmann::json(f.fits == 1)}};
}

}  // namespace

std::string published_report_text(const PublishedReport& rep) {
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line, "%-66s %-12s %5s %8s %8s %7s %7s %7s %4s %s\n", "# id", "cluster",
                "gpus", "pub_tf", "pred_tf", "err_%", "pub_GB", "pred_GB", "fit", "split");
  os << line;
  for (const auto& c : rep.rows) {
    const PublishedRow& r = *c.row;
    if (!r.config) continue;
    const std::string pub = c.metric == "tflops_per_gpu" ? fmt(r.published.tflops_per_gpu)
                            : c.metric.empty()          ? "-"
                                                        : fmt(NAN);
    std::snprintf(line, sizeof line, "%-66.66s %-12s %5d %8s %8s %7s %7s %7s %4s %s%s\n",
                  r.id.c_str(), r.cluster.c_str(), r.config->num_gpus, pub.c_str(),
                  fmt(c.predicted.tflops_per_gpu).c_str(), fmt(c.error_pct, "%+.1f").c_str(),
                  fmt(r.published.peak_memory_gb).c_str(), fmt(c.predicted.peak_memory_gb).c_str(),
                  c.predicted.fits ? "yes" : "NO", c.split.c_str(),
                  r.status == "current" || r.status.empty() ? "" : (" [" + r.status + "]").c_str());
    os << line;
    if (!c.note.empty()) os << "    " << c.note << "\n";
  }
  os << "\n# rows not modelled\n";
  for (const auto& c : rep.rows)
    if (!c.row->config) os << "  " << c.row->id << ": " << c.row->unsupported << "\n";
  os << "\n# error of TFLOP/s/GPU (else tokens/s/GPU, else the rate 1 / step time), current rows;"
        " + = predicted faster than published;\n# newest: without the rows whose configuration"
        " a later release publishes again (the same job on older software)\n";
  std::snprintf(line, sizeof line, "%-36s %4s %10s %8s %10s\n", "# group", "n", "median|%|",
                "p90|%|", "mean_%");
  os << line;
  for (const auto& [k, s] : rep.by_group) {
    std::snprintf(line, sizeof line, "%-36s %4d %10.1f %8.1f %+10.1f\n", k.c_str(), s.n,
                  s.median_abs_pct, s.p90_abs_pct, s.mean_signed_pct);
    os << line;
  }
  os << pairs_text(rep);
  std::snprintf(line, sizeof line, "\n# memory: %d of %d rows that publish fit/OOM agree; %d rows not modelled\n",
                rep.memory_right, rep.memory_checked, rep.unsupported);
  os << line;
  std::snprintf(line, sizeof line,
                "# peak memory (max allocated; Megatron-LM CI rows: the last rank's): %d of %d "
                "rows within %.0f %%\n",
                rep.peak_within, rep.peak_checked, kPeakMemoryTolerancePct);
  os << line;
  return os.str();
}

nlohmann::json to_json(const PublishedReport& rep) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& c : rep.rows) {
    const PublishedRow& r = *c.row;
    nlohmann::json o = {{"id", r.id},
                        {"model", r.model},
                        {"system", r.system},
                        {"status", r.status},
                        {"model_preset", r.model_preset.empty() ? nlohmann::json() : nlohmann::json(r.model_preset)},
                        {"cluster", r.cluster.empty() ? nlohmann::json() : nlohmann::json(r.cluster)},
                        {"published", figures_json(r.published)},
                        {"predicted", r.config ? figures_json(c.predicted) : nlohmann::json()},
                        {"error_pct", num_or_null(c.error_pct)},
                        {"error_metric", c.metric.empty() ? nlohmann::json() : nlohmann::json(c.metric)},
                        {"split", c.split.empty() ? nlohmann::json() : nlohmann::json(c.split)},
                        {"assumptions", r.assumptions},
                        {"note", c.note.empty() ? nlohmann::json() : nlohmann::json(c.note)},
                        {"unsupported", r.config ? nlohmann::json() : nlohmann::json(r.unsupported)}};
    rows.push_back(o);
  }
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [k, s] : rep.by_group)
    groups[k] = {{"n", s.n}, {"median_abs_pct", s.median_abs_pct}, {"p90_abs_pct", s.p90_abs_pct},
                 {"mean_signed_pct", s.mean_signed_pct}};
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& p : rep.pairs)
    pairs.push_back({{"a", rep.rows[p.a].row->id},
                     {"b", rep.rows[p.b].row->id},
                     {"setting", p.setting},
                     {"published_change_pct", p.published_change_pct},
                     {"predicted_change_pct", p.predicted_change_pct},
                     {"sign_right", p.sign_right()}});
  return {{"schema_version", 1},
          {"rows", rows},
          {"ab_pairs", pairs},
          {"summary",
           {{"error_pct", groups},
            {"unsupported_rows", rep.unsupported},
            {"memory_rows_checked", rep.memory_checked},
            {"memory_rows_agree", rep.memory_right},
            {"peak_memory_rows_checked", rep.peak_checked},
            {"peak_memory_rows_within_10pct", rep.peak_within}}}};
}

}  // namespace epo::calib
