// epo calibrate bench | fit | report: measure the hardware, fit the cost model's parameters, and
// show the prediction error before and after.
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "calibration/accuracy.hpp"
#include "calibration/profile_fit.hpp"
#include "calibration/samples.hpp"
#include "cli/commands.hpp"
#include "cli/config_flags.hpp"
#include "cli/html_output.hpp"
#include "executor/bench_shapes.hpp"
#include "executor/microbench.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/json_file.hpp"
#include "report/progress.hpp"

#ifndef EPO_GIT_REVISION
#define EPO_GIT_REVISION "unknown"
#endif

namespace epo::cli {

std::string today_utc() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d", &tm);
  return buf;
}

namespace {

struct BenchArgs {
  std::string out;
  std::vector<std::string> for_configs;  ///< --for: a configuration/plan JSON or a flags string
  bool quick = false, progress = false;
  int gpus = 1, device = 0;
};

struct FitArgs {
  std::vector<std::string> inputs;  // samples file, then measurement files
  std::string base = "h200-sxm", out, date;
};

struct ReportArgs {
  std::string profile, base, json, html;
  std::vector<std::string> measurements;
};

/// The command line as typed, for the samples' context block.
std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  for (char c : raw) out += c == '\0' ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}


/// The configuration a --for value names: a configuration or plan file (as --config takes), or
/// the configuration flags of predict/plan/run in one string ("--model deepseek-v3 --ep 8 ...").
model::Config config_for(const std::string& value) {
  ConfigFlags f;
  CLI::App flags("--for");
  add_config_flags(flags, f);
  if (std::ifstream(value).good()) {
    f.config_file = value;
  } else {
    try {
      flags.parse(value, false);
    } catch (const CLI::ParseError& e) {
      throw EPO_INPUT_ERROR("--for '", value, "': neither a readable configuration file nor "
                            "configuration flags (", e.what(), ")");
    }
  }
  return build_config(f);
}

int run_bench(const BenchArgs& a) {
  model::check_output_paths({a.out}, a.for_configs);
  exec::BenchOptions opt;
  opt.device = a.device;
  opt.num_gpus = a.gpus;
  opt.git_revision = EPO_GIT_REVISION;
  opt.command_line = command_line();
  if (opt.command_line.empty())
    opt.command_line = "epo calibrate bench --out " + a.out + (a.quick ? " --quick" : "");
  if (a.quick) {
    // Enough points for every fit (two SM-limited and two bandwidth-limited copies, GEMMs below
    // and above the efficiency knee), in about a third of the time.
    opt.warmup = 2;
    opt.iters = 5;
    opt.tokens_per_expert = {16, 64, 256, 1024, 4096};
    opt.message_bytes = {1LL << 18, 1LL << 22, 1LL << 26};
  }
  for (const auto& v : a.for_configs) {
    const auto shapes = exec::config_bench_shapes(config_for(v));
    exec::add_config_shapes(opt, shapes);
    std::fprintf(stderr, "epo calibrate bench --for %s: %zu GEMM shapes, experts %d x %d -> %d "
                 "at %zu row count(s), %zu dispatch size(s)\n", shapes.label.c_str(),
                 shapes.gemm_shapes.size(), shapes.experts.num_experts, shapes.experts.hidden,
                 shapes.experts.ffn, shapes.experts.tokens_per_expert.size(),
                 shapes.dispatch_bytes.size());
  }
  std::fprintf(stderr, "epo calibrate bench: microbenchmarks on GPU %d (%d GPU(s))%s\n", a.device,
               a.gpus, a.quick ? ", quick" : "");
  nlohmann::json samples;
  report::ProgressLine line(report::progress_enabled(a.progress), "epo calibrate bench", 0.0);
  try {
    samples = exec::run_calibration_benchmarks(
        opt, [&line](int done, int total, const std::string& what) {
          line.update(done, total, what);
        });
    line.finish();
  } catch (const Error& e) {
    const std::string what = e.what();
    for (const char* sign :
         {"without CUDA", "cudaErrorNoDevice", "cudaErrorInsufficientDriver",
          "no CUDA-capable device", "no usable CUDA device", "driver version is insufficient"})
      if (what.find(sign) != std::string::npos)
        throw EPO_RUNTIME_ERROR("epo calibrate bench: no GPU or no CUDA available here (", what,
                                "). Run it on a machine with a GPU and a CUDA build of EPO; "
                                "'epo calibrate fit' and 'epo calibrate report' need no GPU");
    throw;
  }
  // Check what we are about to write reads back (the fitters' strict reader).
  const calib::Samples s = calib::samples_from_json(samples, "benchmark output");
  model::write_json_file(a.out, samples);
  std::fprintf(stderr,
               "epo calibrate bench: %zu gemm, %zu copy, %zu hbm, %zu transport, %zu contention, "
               "%zu launch, %zu host_sync samples written to %s\n",
               s.gemm.size(), s.copy.size(), s.hbm.size(), s.transport.size(),
               s.contention.size(), s.launch_us.size(), s.host_sync_us.size(), a.out.c_str());
  for (const auto& u : s.unmeasured) std::fprintf(stderr, "  not measured: %s\n", u.c_str());
  return 0;
}

int run_fit(const FitArgs& a) {
  EPO_REQUIRE_INPUT(!a.inputs.empty(),
                    "epo calibrate fit: give the samples file (from epo "
                    "calibrate bench), then any measurement files (from epo run --json)");
  model::check_output_paths({a.out}, a.inputs);
  const calib::Samples samples = calib::load_samples_file(a.inputs[0]);
  std::vector<calib::MeasuredRun> runs;
  for (size_t i = 1; i < a.inputs.size(); ++i)
    runs.push_back(calib::load_measurement_file(a.inputs[i]));
  runs = calib::merge_repeats(runs);
  const model::HardwareProfile base = model::load_hardware_preset(a.base);
  const calib::ProfileFit pf =
      calib::fit_profile(base, samples, runs, a.date.empty() ? today_utc() : a.date);
  std::printf("epo calibrate fit: base %s, samples %s, %zu measured run(s)\n\n", a.base.c_str(),
              a.inputs[0].c_str(), runs.size());
  std::fputs(calib::fit_report_text(pf).c_str(), stdout);
  model::write_json_file(a.out, model::to_json(pf.profile));
  std::printf("profile written to %s (use it with --profile)\n", a.out.c_str());
  return 0;
}

int run_report(const ReportArgs& a) {
  std::vector<std::string> inputs = a.measurements;
  inputs.push_back(a.profile);
  model::check_output_paths({a.json, a.html}, inputs);
  const model::HardwareProfile profile = model::load_profile_file(a.profile);
  std::vector<calib::MeasuredRun> runs;
  for (const auto& f : a.measurements) runs.push_back(calib::load_measurement_file(f));
  runs = calib::merge_repeats(runs);
  const calib::AccuracyReport rep =
      calib::accuracy_report(runs, calib::base_hardware(a.base), profile);
  std::printf("epo calibrate report: %zu run(s); before = base preset%s, after = profile %s\n\n",
              runs.size(), a.base.empty() ? " named by each run" : (" " + a.base).c_str(),
              a.profile.c_str());
  std::fputs(calib::accuracy_report_text(rep).c_str(), stdout);
  if (!a.json.empty()) model::write_json_file(a.json, calib::to_json(rep));
  if (!a.html.empty()) write_html_report(a.html, calib::to_json(rep));
  return 0;
}

}  // namespace

void add_calibrate(CLI::App& app, Runner& run) {
  auto* cal = app.add_subcommand("calibrate",
                                 "measure the hardware, fit the cost model, report "
                                 "the prediction error");
  cal->require_subcommand(1);

  auto bench = std::make_shared<BenchArgs>();
  auto* b = cal->add_subcommand("bench", "run the calibration microbenchmarks (GPU build only)");
  b->add_option("--out", bench->out, "samples JSON to write")->required();
  b->add_flag("--quick", bench->quick, "fewer sizes and repetitions");
  b->add_option("--for", bench->for_configs,
                "also measure the shapes this configuration runs (its GEMMs forward and backward, "
                "its experts at its routing's rows, its dispatch bytes): a configuration or plan "
                "JSON, or its flags in one string, e.g. \"--model deepseek-v3 --ep 8\"; "
                "repeatable");
  b->add_option("--gpus", bench->gpus, "GPUs to use (>= 2 measures NCCL and flex over NVLink)");
  b->add_option("--device", bench->device, "first GPU");
  b->add_flag("--progress", bench->progress,
              "progress line on stderr even when it is not a terminal");
  b->callback([bench, &run] { run = [bench] { return run_bench(*bench); }; });

  auto fit = std::make_shared<FitArgs>();
  auto* f = cal->add_subcommand("fit", "fit the cost model's parameters to samples (and runs)");
  f->add_option("inputs", fit->inputs, "samples.json [measurement.json ...]")->required();
  f->add_option("--base", fit->base, "hardware preset the profile starts from");
  f->add_option("--out", fit->out, "profile JSON to write")->required();
  f->add_option("--date", fit->date, "date for the provenance (default: today, UTC)");
  f->callback([fit, &run] { run = [fit] { return run_fit(*fit); }; });

  auto rep = std::make_shared<ReportArgs>();
  auto* r =
      cal->add_subcommand("report", "predicted against measured, before and after calibration");
  r->add_option("--profile", rep->profile, "calibrated profile JSON")->required();
  r->add_option("measurements", rep->measurements, "measurement JSON files (from epo run --json)")
      ->required();
  r->add_option("--base", rep->base, "preset for 'before' (default: each run's hardware)");
  r->add_option("--json", rep->json, "also write the report as JSON");
  r->add_option("--html", rep->html,
                "also write an HTML page: predicted against measured per metric, before and after");
  r->callback([rep, &run] { run = [rep] { return run_report(*rep); }; });

  add_calibrate_published(*cal, run);
  add_calibrate_ops(*cal, run);
}

}  // namespace epo::cli
