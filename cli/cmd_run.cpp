// epo run: execute a plan on GPUs with the schedule the simulator plays and measure it op by op;
// prints measured next to predicted (op means, step times, gain, exposed communication, memory).
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>

#include "cli/commands.hpp"
#include "cli/config_flags.hpp"
#include "cli/html_output.hpp"
#include "cli/predict_report.hpp"
#include "cli/run_dry.hpp"
#include "cli/report_format.hpp"
#include "executor/process_layout.hpp"
#include "executor/run.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/json_file.hpp"
#include "model/prediction.hpp"
#include "model/result_bounds.hpp"
#include "model/simulate.hpp"
#include "report/timeline_json.hpp"

namespace epo::cli {

namespace {

struct RunArgs {
  ConfigFlags cfg;
  std::string plan, json_path, trace_path, html_path;
  int layers = 0, moe_layers = 0, iters = 5, warmup = 2, gpus_per_process = 0;
  bool check = false, no_raw_alltoall = false, mpi = false, dry_run = false;
};

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string out;
  for (char c : raw) out += c == '\0' ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? "epo run" : out;
}

void print_side_by_side(const nlohmann::json& m, const model::Prediction& p) {
  const auto& s = m["summary"];
  std::printf("\n%-26s %14s %14s\n", "op (mean per layer/mb)", "measured_us", "predicted_us");
  for (const auto& [key, value] : s["op_mean_us"].items()) {
    double predicted = -1;
    for (const auto& op : p.costs.moe_layer.ops)
      if (key == std::string(model::to_string(op.kind)) + "/" + model::to_string(op.dir))
        predicted = op.duration_us();
    if (predicted < 0) std::printf("%-26s %14.1f %14s\n", key.c_str(), value.get<double>(), "-");
    else std::printf("%-26s %14.1f %14.1f\n", key.c_str(), value.get<double>(), predicted);
  }
  std::printf("\n%-26s %14s %14s\n", "step", "measured", "predicted");
  std::printf("%-26s %14.1f %14.1f\n", "step_time_us", s["step_time_us"].get<double>(),
              p.step_time_us);
  std::printf("%-26s %14.1f %14.1f\n", "baseline_step_time_us",
              s["baseline_step_time_us"].get<double>(), p.baseline_step_time_us);
  std::printf("%-26s %14.3f %14.3f\n", "overlap_gain", s["overlap_gain"].get<double>(),
              p.overlap_gain);
  std::printf("%-26s %14.1f %14.1f\n", "exposed_comm_us", s["exposed_comm_us"].get<double>(),
              p.exposed_comm_us);
  std::printf("%-26s %14.1f %14.1f\n", "baseline_exposed_comm_us",
              s["baseline_exposed_comm_us"].get<double>(), p.baseline_exposed_comm_us);
  double peak = 0;
  for (const auto& b : s["peak_memory_bytes"]) peak = std::max(peak, b.get<double>());
  std::printf("%-26s %14s %14s   (measured: bytes the executor allocated per rank, all "
              "micro-batch slots; predicted: a training job's total)\n",
              "memory per rank", fmt_bytes(peak).c_str(), fmt_bytes(p.memory.total_bytes).c_str());
}

int run_command(RunArgs& a) {
  if (!a.plan.empty()) a.cfg.config_file = a.plan;
  model::check_output_paths({a.json_path, a.trace_path, a.html_path},
                            {a.cfg.config_file, a.cfg.profile_file});
  EPO_REQUIRE_INPUT(a.layers == 0 || a.moe_layers == 0,
                    "--layers and --moe-layers exclude each other (give one)");
  model::Config cfg = a.moe_layers > 0 ? exec::with_moe_layers(build_config(a.cfg), a.moe_layers)
                                       : exec::with_layers(build_config(a.cfg), a.layers);
  exec::RunOptions opt;
  opt.layers = a.layers;
  opt.iters = a.iters;
  opt.warmup = a.warmup;
  opt.check = a.check;
  opt.raw_alltoall = !a.no_raw_alltoall;
  opt.command_line = command_line();
  opt.git_revision = EPO_GIT_REVISION;
  opt.mpi = a.mpi;
  opt.gpus_per_process = a.gpus_per_process;
  exec::check_runnable(cfg, opt);
  if (a.dry_run) return print_dry_run(cfg, opt, a.json_path);
  const model::Prediction prediction = model::predict(cfg);
  model::check_prediction(prediction);
  // MPI processes other than world rank 0 print nothing but their errors.
  const bool quiet = !exec::reports_run(exec::launch_env());
  if (!quiet)
    std::printf("# epo run: %s on %s, %s, EP %d (%s), overlap %s, delay_wgrad %s, %d layers, "
                "%d micro-batches of %lld tokens\n",
                cfg.model_name.c_str(), cfg.virtual_ranks > 0 ? "one GPU (virtual ranks)" : "GPUs",
                model::to_string(cfg.opt.dispatcher), cfg.par.ep,
                cfg.virtual_ranks > 0 ? "virtual ranks" : "one GPU each",
                cfg.opt.overlap_moe_expert_parallel_comm ? "on" : "off",
                cfg.opt.delay_wgrad_compute ? "on" : "off", cfg.model.num_layers,
                cfg.par.num_microbatches(), cfg.tokens_per_microbatch());
  std::fflush(stdout);
  exec::RunResult r;
  try {
    r = exec::run_plan(cfg, opt);
  } catch (const exec::ReportedElsewhere& e) {
    return e.exit_code();
  }
  if (!r.report) return 0;
  r.measurement["prediction"] = prediction_json(cfg, prediction);
  // The predicted timeline beside the measured one (the reports draw both on one axis).
  r.measurement["prediction"]["timeline"] = report::timeline_json(model::simulate_config(cfg));
  for (const auto& n : r.notes) std::printf("# note: %s\n", n.c_str());
  print_side_by_side(r.measurement, prediction);
  if (r.raw_alltoall_us > 0) {
    const double bytes = r.raw_alltoall_bytes_per_rank;
    const auto& means = r.measurement["summary"]["op_mean_us"];
    const double dispatch_us = means.value("dispatch/forward", 0.0);
    std::printf("\nraw ncclAlltoAll of %s per rank: %.1f us (algbw %.1f GB/s); dispatch/forward "
                "mean %.1f us (%.1f GB/s, %.0f %% of raw)\n",
                fmt_bytes(bytes).c_str(), r.raw_alltoall_us, bytes / r.raw_alltoall_us / 1e3,
                dispatch_us, dispatch_us > 0 ? bytes / dispatch_us / 1e3 : 0.0,
                dispatch_us > 0 ? 100.0 * r.raw_alltoall_us / dispatch_us : 0.0);
  }
  if (r.comm_busy_us > 0)
    std::printf("communication hidden under computation: %.0f %% (%.1f of %.1f us per rank and "
                "step exposed)\n",
                100.0 * (1.0 - r.exposed_comm_us / r.comm_busy_us), r.exposed_comm_us,
                r.comm_busy_us);
  if (!a.json_path.empty()) model::write_json_file(a.json_path, r.measurement);
  if (!a.trace_path.empty()) model::write_text_file(a.trace_path, r.trace_json);
  write_html_report(a.html_path, r.measurement);
  if (!r.check.ran) return 0;
  std::printf("\ncheck: %s — outputs max rel err %.3g (tolerance %.3g), gradients %.3g (tolerance "
              "%.3g), overlapped vs baseline %s\n",
              r.check.passed ? "PASSED" : "FAILED", r.check.max_output_error,
              r.check.output_tolerance, r.check.max_grad_error, r.check.grad_tolerance,
              r.check.schedules_bit_identical ? "bit-identical" : "DIFFER");
  for (const auto& f : r.check.failures) std::printf("  %s\n", f.c_str());
  return r.check.passed ? 0 : 1;
}

}  // namespace

void add_run(CLI::App& app, Runner& run) {
  auto args = std::make_shared<RunArgs>();
  auto* sub = app.add_subcommand("run", "run a plan on GPUs with the predicted schedule and "
                                        "measure every op");
  add_config_flags(*sub, args->cfg);
  sub->add_option("--plan", args->plan, "plan or configuration JSON (as --config)");
  sub->add_option("--layers", args->layers, "decoder layers to run (default: all)");
  sub->add_option("--moe-layers", args->moe_layers,
                  "run this many MoE layers and no dense layer (instead of --layers)");
  sub->add_flag("--dry-run", args->dry_run,
                "print what would run and each rank's device memory by buffer class, allocate "
                "nothing (no GPU needed); --json writes the memory plan");
  sub->add_option("--iters", args->iters, "measured steps per schedule (default 5)");
  sub->add_option("--warmup", args->warmup, "untimed steps first (default 2)");
  sub->add_option("--json", args->json_path, "write the measurement JSON here");
  sub->add_option("--trace", args->trace_path, "write the measured Chrome trace here");
  sub->add_option("--html", args->html_path,
                  "write an HTML page: measured timeline beside predicted, op by op");
  sub->add_flag("--check", args->check, "compare with a single-rank reference and across "
                                        "schedules");
  sub->add_flag("--no-raw-alltoall", args->no_raw_alltoall,
                "skip the raw ncclAlltoAll of the dispatch bytes (several GPUs)");
  sub->add_flag("--mpi", args->mpi,
                "run as one process of an MPI job (built with EPO_WITH_MPI; implied when mpirun "
                "starts several processes)");
  sub->add_option("--gpus-per-process", args->gpus_per_process,
                  "MPI: GPUs each process drives, one thread each (default 1); --gpus stays the "
                  "total");
  sub->callback([&run, args] { run = [args] { return run_command(*args); }; });
}

}  // namespace epo::cli
