// epo calibrate ops FILE.jsonl...: predicted against published per-op benchmarks (DeepEP and
// HybridEP dispatch/combine bandwidth, Megatron-LM's single MoE layer), side by side, with the
// error by library, system and kind; --fit fits the flex kernels' parameters on a group of rows.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "calibration/op_bench.hpp"
#include "cli/commands.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/json_file.hpp"

namespace epo::cli {

namespace {

struct OpsArgs {
  std::vector<std::string> inputs;
  std::vector<std::string> profiles;  ///< cluster profiles replacing the presets, by name
  std::vector<std::string> fit_on;    ///< row selection terms of the fit group
  std::string json, out_dir, date;
  bool fit = false;
};

std::vector<calib::OpBenchRow> load_all(const OpsArgs& a, const calib::ClusterMap& clusters) {
  std::vector<calib::OpBenchRow> rows;
  for (const auto& f : a.inputs)
    for (auto& r : calib::load_op_benchmarks(f, clusters)) rows.push_back(std::move(r));
  return rows;
}

void print_split(const char* title, const calib::OpReport& rep) {
  std::printf("%s\n", title);
  for (const auto& [k, st] : rep.by_group)
    if (k == "all" || k == "fit" || k == "check")
      std::printf("%-8s n %3d  median |err| %5.1f %%  p90 %6.1f %%  mean %+7.1f %%\n", k.c_str(),
                  st.n, st.median_abs_pct, st.p90_abs_pct, st.mean_signed_pct);
  std::printf("\n");
}

int run_ops(const OpsArgs& a) {
  EPO_REQUIRE_INPUT(a.out_dir.empty() || a.fit, "epo calibrate ops: --out-dir needs --fit");
  model::check_output_paths({a.json}, a.inputs);  // before any work, never an input
  calib::ClusterMap clusters;
  for (const auto& f : a.profiles) {
    const model::HardwareProfile hw = model::load_profile_file(f);
    clusters.profiles[hw.name] = hw;
  }
  calib::OpSelect fit_on;
  for (const auto& t : a.fit_on) fit_on.add(t);
  if (a.fit && fit_on.empty()) {  // the kernels of one library; the torch API and DeepEP check
    fit_on.add("library:HybridEP");
    fit_on.add("timing:kernel_only");
  }
  std::vector<calib::OpBenchRow> rows = load_all(a, clusters);
  if (a.fit) {
    const calib::OpReport before = calib::compare_op_benchmarks(rows, fit_on);
    const std::string date = a.date.empty() ? today_utc() : a.date;
    auto fits = calib::fit_op_benchmarks(rows, fit_on, date);
    calib::fit_fp8_on_layer_pairs(rows, date, fits);
    std::printf("epo calibrate ops --fit: %zu cluster profile(s) fitted on %s\n\n%s\n", fits.size(),
                fit_on.describe().c_str(), calib::fit_op_text(fits).c_str());
    print_split("# before the fit (the cluster profiles as loaded)", before);
    for (const auto& [c, f] : fits) clusters.profiles[c] = f.profile;
    rows = load_all(a, clusters);
    if (!a.out_dir.empty())
      for (const auto& [c, f] : fits)
        model::write_json_file(a.out_dir + "/" + c + ".json", model::to_json(f.profile));
  }
  const calib::OpReport rep = calib::compare_op_benchmarks(rows, fit_on);
  std::printf("epo calibrate ops: %zu row(s) from %zu file(s); %d not modelled%s%s\n\n",
              rows.size(), a.inputs.size(), rep.unsupported, fit_on.empty() ? "" : "; fit on ",
              fit_on.describe().c_str());
  std::fputs(calib::op_report_text(rep).c_str(), stdout);
  if (a.fit) print_split("\n# after the fit", rep);
  if (!a.json.empty()) {
    nlohmann::json j = calib::to_json(rep);
    j["summary"]["fit_on"] = fit_on.empty() ? nlohmann::json() : nlohmann::json(fit_on.describe());
    model::write_json_file(a.json, j);
  }
  return 0;
}

}  // namespace

void add_calibrate_ops(CLI::App& cal, Runner& run) {
  auto args = std::make_shared<OpsArgs>();
  auto* p = cal.add_subcommand(
      "ops",
      "predict published per-op benchmarks (op_benchmarks.jsonl: DeepEP/HybridEP "
      "dispatch and combine bandwidth, one MoE layer's time) and set predicted beside "
      "published");
  p->add_option("inputs", args->inputs, "op-benchmark files (JSON lines)")->required();
  p->add_option("--profile", args->profiles,
                "cluster profile replacing the preset of the same name (repeatable)");
  p->add_option("--json", args->json, "also write {\"rows\": [...], \"summary\": {...}}");
  p->add_option("--fit-on", args->fit_on,
                "rows of the fit group, field:value[,value] (library, system, kind, timing, "
                "ranks, cluster; repeatable, all must match); the other rows are the check")
      ->allow_extra_args(false);
  p->add_flag("--fit", args->fit,
              "fit each cluster's flex parameters on the fit group (default: library:HybridEP "
              "timing:kernel_only), then report");
  p->add_option("--out-dir", args->out_dir, "with --fit: write <cluster>.json profiles here");
  p->add_option("--date", args->date, "date for the fitted profiles' provenance");
  p->callback([args, &run] { run = [args] { return run_ops(*args); }; });
}

}  // namespace epo::cli
