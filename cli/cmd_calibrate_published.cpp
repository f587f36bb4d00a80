// epo calibrate published FILE.jsonl...: predicted against published Megatron runs, side by side,
// with the error by cluster, by model and on the rows held out of a fit.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "calibration/published.hpp"
#include "calibration/published_fit.hpp"
#include "cli/commands.hpp"
#include "cli/html_output.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/json_file.hpp"

namespace epo::cli {

namespace {

struct PublishedArgs {
  std::vector<std::string> inputs;
  std::vector<std::string> profiles;  ///< cluster profiles replacing the presets, by name
  std::vector<std::string> hold_out;  ///< model presets held out of the fit
  std::vector<std::string> pairs;     ///< published A/B pairs files
  std::string json, out_dir, date, html;
  bool fast = false, fit = false, datasheet = false;
};


std::vector<calib::PublishedRow> load_all(const PublishedArgs& a, const calib::ClusterMap& clusters) {
  std::vector<calib::PublishedRow> rows;
  for (const auto& f : a.inputs) {
    auto part = calib::load_published_runs(f, clusters);
    for (auto& r : part) rows.push_back(std::move(r));
  }
  return rows;
}

int run_published(const PublishedArgs& a) {
  EPO_REQUIRE_INPUT(!a.fit || a.profiles.empty(),
                    "epo calibrate published: --fit starts from the datasheet presets; "
                    "--profile is for reporting a fitted profile");
  EPO_REQUIRE_INPUT(a.out_dir.empty() || a.fit, "epo calibrate published: --out-dir needs --fit");
  model::check_output_paths({a.json, a.html}, a.inputs);  // before any work, never an input
  calib::ClusterMap clusters;
  clusters.datasheet_only = a.datasheet || a.fit;
  for (const auto& f : a.profiles) {
    const model::HardwareProfile hw = model::load_profile_file(f);
    clusters.profiles[hw.name] = hw;
  }
  calib::Split split;
  split.held_out_models = a.hold_out;
  std::vector<calib::PublishedRow> rows = load_all(a, clusters);
  if (a.fit) {
    // Before: the datasheet presets; then fit each cluster on the rows not held out, and
    // predict every row again with the fitted profiles.
    const calib::PublishedReport before = calib::compare_published(rows, split, true);
    const auto fits = calib::fit_published(rows, split, a.date.empty() ? today_utc() : a.date);
    std::printf("epo calibrate published --fit: %zu cluster profile(s) fitted; held out: ",
                fits.size());
    for (const auto& m : a.hold_out) std::printf("%s ", m.c_str());
    std::printf("\n\n%s\n", calib::fit_published_text(fits).c_str());
    std::printf("# before the fit (datasheet presets), fast path\n");
    for (const auto& [k, st] : before.by_group)
      if (k == "all" || k == "fit" || k == "held-out")
        std::printf("%-12s n %3d  median |err| %5.1f %%  p90 %5.1f %%  mean %+6.1f %%\n",
                    k.c_str(), st.n, st.median_abs_pct, st.p90_abs_pct, st.mean_signed_pct);
    std::printf("\n");
    clusters.profiles.clear();
    for (const auto& [c, f] : fits) clusters.profiles[c] = f.profile;
    rows = load_all(a, clusters);
    if (!a.out_dir.empty())
      for (const auto& [c, f] : fits)
        model::write_json_file(a.out_dir + "/" + c + ".json", model::to_json(f.profile));
  }
  calib::PublishedReport rep = calib::compare_published(rows, split, a.fast);
  for (const auto& f : a.pairs) {
    int unmatched = 0;
    const auto more = calib::load_ab_pairs(f, rep, &unmatched);
    rep.pairs.insert(rep.pairs.end(), more.begin(), more.end());
    std::printf("epo calibrate published: %zu pair(s) of %s compared; %d name rows not modelled\n",
                more.size(), f.c_str(), unmatched);
  }
  std::printf("epo calibrate published: %zu row(s) from %zu file(s); %d not modelled%s\n\n",
              rows.size(), a.inputs.size(), rep.unsupported, a.fast ? "; fast path" : "");
  std::fputs(calib::published_report_text(rep).c_str(), stdout);
  if (!a.json.empty()) model::write_json_file(a.json, calib::to_json(rep));
  if (!a.html.empty()) write_html_report(a.html, calib::to_json(rep));
  return 0;
}

}  // namespace

void add_calibrate_published(CLI::App& cal, Runner& run) {
  auto args = std::make_shared<PublishedArgs>();
  auto* p = cal.add_subcommand(
      "published", "predict published Megatron runs (runs.jsonl, megatron_ci_runs.jsonl) and "
                   "set predicted beside published");
  p->add_option("inputs", args->inputs, "published-runs files (JSON lines)")->required();
  p->add_option("--profile", args->profiles,
                "cluster profile replacing the preset of the same name (repeatable)");
  p->add_option("--hold-out", args->hold_out,
                "model presets held out of the fit: their rows are reported apart (repeatable)")
      ->delimiter(',');
  p->add_option("--pairs", args->pairs,
                "published A/B pairs (JSON lines with a_id, b_id and their iteration times)");
  p->add_option("--json", args->json, "also write {\"rows\": [...], \"summary\": {...}}");
  p->add_option("--html", args->html,
                "also write an HTML page: predicted against published per figure, A/B pairs");
  p->add_flag("--fast", args->fast, "steady-state fast path instead of the full simulation");
  p->add_flag("--fit", args->fit,
              "fit each cluster's profile on the rows of the models not held out, then report");
  p->add_option("--out-dir", args->out_dir, "with --fit: write <cluster>.json profiles here");
  p->add_flag("--datasheet", args->datasheet,
              "use the GPUs' datasheet presets, not the fitted cluster profiles");
  p->add_option("--date", args->date, "date for the fitted profiles' provenance");
  p->callback([args, &run] { run = [args] { return run_published(*args); }; });
}

}  // namespace epo::cli
