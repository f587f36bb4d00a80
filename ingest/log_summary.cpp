#include "ingest/log_summary.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace epo::ingest {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return kNotPrinted;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// The lower median: with an even count the faster of the middle two, so that one slow interval
/// (a checkpoint, an evaluation) cannot make the typical one look like an outlier.
double lower_median(std::vector<double> v) {
  if (v.empty()) return kNotPrinted;
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

bool printed(double x) { return !std::isnan(x); }

bool far_from(double x, double med) {
  return printed(x) && printed(med) && med > 0 && (x > med * kOutlierFactor || x < med / kOutlierFactor);
}

}  // namespace

SteadyState steady_state(const TrainingLog& log) {
  SteadyState st;
  // One record per iteration (ranks may print the same line), in file order.
  std::vector<IterationRecord> recs;
  std::set<long long> seen;
  for (const auto& r : log.iterations)
    if (printed(r.elapsed_ms) && seen.insert(r.iteration).second) recs.push_back(r);
  long long interval = 0;  // the smallest step between logged iterations
  for (size_t i = 1; i < recs.size(); ++i) {
    const long long d = recs[i].iteration - recs[i - 1].iteration;
    if (d > 0 && (interval == 0 || d < interval)) interval = d;
  }
  std::vector<IterationRecord> kept;
  for (size_t i = 0; i < recs.size(); ++i) {
    const auto& r = recs[i];
    const std::string it = "iteration " + std::to_string(r.iteration) + ": ";
    const bool first_interval = i == 0 && recs.size() > 1 && r.iteration <= std::max<long long>(interval, 1);
    const bool restart = i > 0 && r.iteration < recs[i - 1].iteration;
    if (first_interval || restart) st.excluded.push_back(it + "warm-up (first logged interval" +
                                                         std::string(restart ? " after a restart)" : ")"));
    else if (r.skipped_iterations > 0 || r.nan_iterations > 0)
      st.excluded.push_back(it + "skipped or NaN iterations in the interval");
    else kept.push_back(r);
  }
  std::vector<double> t, f;
  for (const auto& r : kept) {
    t.push_back(r.elapsed_ms);
    if (printed(r.tflops_per_gpu)) f.push_back(r.tflops_per_gpu);
  }
  const double t_med = lower_median(t), f_med = lower_median(f);
  t.clear();
  f.clear();
  for (const auto& r : kept) {
    if (far_from(r.elapsed_ms, t_med) || far_from(r.tflops_per_gpu, f_med)) {
      st.excluded.push_back("iteration " + std::to_string(r.iteration) + ": outlier (more than " +
                            "1.5x from the median step time or TFLOP/s/GPU)");
      continue;
    }
    st.used.push_back(r.iteration);
    t.push_back(r.elapsed_ms);
    if (printed(r.tflops_per_gpu)) f.push_back(r.tflops_per_gpu);
    if (r.global_batch_size > 0) st.global_batch_size = r.global_batch_size;
  }
  if (!t.empty()) {
    st.step_time_ms = median(t);
    st.min_step_time_ms = *std::min_element(t.begin(), t.end());
    st.max_step_time_ms = *std::max_element(t.begin(), t.end());
  }
  if (!f.empty()) {
    st.tflops_per_gpu = median(f);
    st.min_tflops = *std::min_element(f.begin(), f.end());
    st.max_tflops = *std::max_element(f.begin(), f.end());
  }
  std::set<int> ranks;
  for (const auto& m : log.memory) {
    if (printed(m.max_allocated_mb) && !(m.max_allocated_mb <= st.peak_max_allocated_mb))
      st.peak_max_allocated_mb = m.max_allocated_mb;
    if (printed(m.max_reserved_mb) && !(m.max_reserved_mb <= st.peak_max_reserved_mb))
      st.peak_max_reserved_mb = m.max_reserved_mb;
    ranks.insert(m.rank);
  }
  st.memory_ranks = static_cast<int>(ranks.size());
  st.method = "median of the logged iterations after the first logged interval (warm-up), "
              "without intervals that skipped iterations and without records more than 1.5x "
              "from the median";
  return st;
}

}  // namespace epo::ingest
