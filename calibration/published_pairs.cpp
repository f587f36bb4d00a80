// Published A/B pairs: two runs that differ in one setting, found in the rows or read from a
// pairs file, and their report (each pair, then the repeats of one pair merged).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "calibration/published.hpp"
#include "calibration/published_detail.hpp"
#include "model/config_io.hpp"

namespace epo::calib {

using namespace detail;

namespace {

/// The settings an A/B pair may differ in, each as a printable value of the row's config.
std::vector<std::pair<std::string, std::string>> settings_of(const model::Config& c) {
  const auto& o = c.opt;
  const auto& p = c.par;
  std::string rc = model::to_string(o.recompute_granularity);
  for (const auto& m : o.recompute_modules) rc += "," + m;
  std::string graphs = model::to_string(o.cuda_graph_impl);
  for (const auto& m : o.cuda_graph_modules) graphs += "," + m;
  std::string disp = model::to_string(o.dispatcher);
  if (o.dispatcher == model::Dispatcher::flex)
    disp += std::string("/") + model::to_string(o.flex_backend);
  const std::string overlap =
      std::to_string(o.overlap_moe_expert_parallel_comm) + std::to_string(o.delay_wgrad_compute);
  return {{"overlap", overlap},
          {"dispatcher", disp},
          {"recompute", rc},
          {"cuda graphs", graphs},
          {"routing", model::to_string(o.routing.kind)},
          {"micro-batch", std::to_string(p.micro_batch_size)},
          {"global batch", std::to_string(p.global_batch_size)},
          {"layout", std::to_string(p.tp) + "/" + std::to_string(p.pp) + "/" +
                         std::to_string(p.vpp) + "/" + std::to_string(p.cp) + "/" +
                         std::to_string(p.ep)}};
}

/// The pairs with repeats merged: the same two runs measured again (CI keeps every golden version)
/// differ by run-to-run noise, so a pair's published change is the median of its repeats and
/// their range the noise it carries. A prediction is right in sign where the repeats agree in
/// sign, and inside their range where they do not.
std::string merged_pairs_text(const PublishedReport& rep) {
  std::map<std::string, std::vector<const AbPair*>> groups;
  for (const auto& p : rep.pairs)
    groups[p.setting + " " + rep.rows[p.a].row->id + " -> " + rep.rows[p.b].row->id].push_back(&p);
  if (groups.size() == rep.pairs.size()) return "";
  std::ostringstream os;
  os << "\n# the same pairs, repeats merged (median published change; [range] = run-to-run "
        "spread)\n";
  int consistent = 0, sign = 0, close = 0, mixed = 0, inside = 0;
  char line[640];
  for (const auto& [key, ps] : groups) {
    std::vector<double> pub;
    for (const AbPair* p : ps) pub.push_back(p->published_change_pct);
    std::sort(pub.begin(), pub.end());
    const double med = pub.size() % 2 ? pub[pub.size() / 2]
                                      : 0.5 * (pub[pub.size() / 2 - 1] + pub[pub.size() / 2]);
    const double pred = ps.front()->predicted_change_pct;
    AbPair merged = *ps.front();
    merged.published_change_pct = med;
    const bool agree = pub.front() * pub.back() > 0 || ps.size() == 1;
    std::string verdict;
    if (agree) {
      ++consistent;
      const bool near = std::fabs(pred - med) <= 5.0;
      sign += merged.sign_right();
      close += merged.sign_right() && near;
      verdict = merged.sign_right() ? (near ? "ok" : "sign") : "WRONG";
    } else {
      ++mixed;
      const bool in = pred >= pub.front() && pred <= pub.back();
      inside += in;
      verdict = in ? "inside" : "outside";
    }
    std::snprintf(line, sizeof line, "  %2d x %+7.1f%% pub [%+.1f, %+.1f] %+7.1f%% pred %-7s %s\n",
                  static_cast<int>(ps.size()), med, pub.front(), pub.back(), pred, verdict.c_str(),
                  key.c_str());
    os << line;
  }
  std::snprintf(line, sizeof line,
                "# %d distinct pairs: %d whose repeats agree in sign (sign right %d, also within 5 "
                "points %d); %d whose repeats disagree (prediction inside their range %d)\n",
                static_cast<int>(groups.size()), consistent, sign, close, mixed, inside);
  os << line;
  return os.str();
}

}  // namespace

std::vector<AbPair> find_ab_pairs(const PublishedReport& rep) {
  std::vector<AbPair> pairs;
  for (size_t i = 0; i < rep.rows.size(); ++i) {
    const ComparedRow& a = rep.rows[i];
    if (!a.row->config || a.row->status != "current" || a.metric != "tflops_per_gpu") continue;
    for (size_t k = i + 1; k < rep.rows.size(); ++k) {
      const ComparedRow& b = rep.rows[k];
      if (!b.row->config || b.row->status != "current" || b.metric != "tflops_per_gpu") continue;
      const PublishedRow &ra = *a.row, &rb = *b.row;
      const model::Config &ca = *ra.config, &cb = *rb.config;
      if (ra.model_preset != rb.model_preset || ra.cluster != rb.cluster ||
          ra.release != rb.release || ra.source_type != rb.source_type ||
          ca.num_gpus != cb.num_gpus || ca.par.seq_length != cb.par.seq_length ||
          ca.opt.precision != cb.opt.precision || lower(ra.precision) != lower(rb.precision))
        continue;
      const auto sa = settings_of(ca), sb = settings_of(cb);
      int differ = 0;
      std::string what;
      for (size_t s = 0; s < sa.size(); ++s)
        if (sa[s].second != sb[s].second) {
          ++differ;
          what = sa[s].first;
        }
      if (differ != 1) continue;
      AbPair p;
      p.a = static_cast<int>(i);
      p.b = static_cast<int>(k);
      p.setting = what;
      p.published_change_pct =
          (rb.published.tflops_per_gpu / ra.published.tflops_per_gpu - 1) * 100;
      p.predicted_change_pct = (b.predicted.tflops_per_gpu / a.predicted.tflops_per_gpu - 1) * 100;
      pairs.push_back(p);
    }
  }
  return pairs;
}

std::vector<AbPair> load_ab_pairs(const std::string& path, const PublishedReport& rep,
                                  int* unmatched) {
  std::map<std::string, int> by_id;
  for (size_t i = 0; i < rep.rows.size(); ++i) by_id[rep.rows[i].row->id] = static_cast<int>(i);
  std::vector<AbPair> pairs;
  *unmatched = 0;
  for_each_json_line(path, [&](const nlohmann::json& j, int) {
    const auto a = by_id.find(str_field(j, "a_id")), b = by_id.find(str_field(j, "b_id"));
    const double ta = num_field(j, "a_iteration_time_s_median"),
                 tb = num_field(j, "b_iteration_time_s_median");
    if (a == by_id.end() || b == by_id.end() || !rep.rows[a->second].row->config ||
        !rep.rows[b->second].row->config || !(ta > 0) || !(tb > 0)) {
      ++*unmatched;
      return;
    }
    AbPair p;
    p.a = a->second;
    p.b = b->second;
    p.setting = str_field(j, "pair_type");
    // Step time of b against a, as a throughput change (a shorter step is a gain).
    p.published_change_pct = (ta / tb - 1) * 100;
    p.predicted_change_pct =
        (rep.rows[p.a].predicted.step_time_s / rep.rows[p.b].predicted.step_time_s - 1) * 100;
    pairs.push_back(p);
  });
  return pairs;
}

std::string detail::pairs_text(const PublishedReport& rep) {
  if (rep.pairs.empty()) return "";
  std::ostringstream os;
  char line[640];
  os << "\n# A/B pairs (one setting differs; change of throughput, b against a)\n";
  int right = 0, within5 = 0;
  for (const auto& p : rep.pairs) {
    const bool close = std::fabs(p.predicted_change_pct - p.published_change_pct) <= 5.0;
    right += p.sign_right();
    within5 += p.sign_right() && close;
    std::snprintf(line, sizeof line, "  %-13s %+7.1f%% pub %+7.1f%% pred %-5s  %s -> %s\n",
                  p.setting.c_str(), p.published_change_pct, p.predicted_change_pct,
                  p.sign_right() ? (close ? "ok" : "sign") : "WRONG", rep.rows[p.a].row->id.c_str(),
                  rep.rows[p.b].row->id.c_str());
    os << line;
  }
  std::snprintf(line, sizeof line, "# %d pairs: sign right %d, sign right and within 5 points %d\n",
                static_cast<int>(rep.pairs.size()), right, within5);
  os << line;
  os << merged_pairs_text(rep);
  return os.str();
}

}  // namespace epo::calib
