// epo predict: what one configuration will do — per-op costs of a layer, step time with and
// without overlap, exposed communication, throughput and memory per GPU.
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "cli/config_flags.hpp"
#include "cli/html_output.hpp"
#include "cli/predict_report.hpp"
#include "cli/report_format.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/json_file.hpp"
#include "model/limits.hpp"
#include "model/prediction.hpp"
#include "model/result_bounds.hpp"
#include "model/simulate.hpp"
#include "model/trace.hpp"
#include "report/progress.hpp"
#include "report/timeline_json.hpp"

namespace epo::cli {

namespace {

struct PredictArgs {
  ConfigFlags cfg;
  std::string json_path;
  std::string trace_path, html_path;
  bool trace_baseline = false, trace_full = false;
  bool fast = false, progress = false;
};

nlohmann::json op_json(const model::OpCost& op) {
  nlohmann::json parts = nlohmann::json::array();
  for (const auto& c : op.parts)
    parts.push_back({{"name", c.full_name()}, {"duration_us", c.duration_us}, {"flops", c.flops},
                     {"hbm_bytes", c.hbm_bytes}, {"nvl_bytes", c.nvl_bytes},
                     {"net_bytes", c.net_bytes}, {"kernels", c.num_kernels}});
  return {{"op", model::to_string(op.kind)}, {"direction", model::to_string(op.dir)},
          {"stream", model::to_string(op.stream)}, {"link", model::to_string(op.link)},
          {"duration_us", op.duration_us()}, {"flops", op.flops}, {"hbm_bytes", op.hbm_bytes},
          {"nvl_bytes", op.nvl_bytes}, {"net_bytes", op.net_bytes}, {"sms", op.sms},
          {"host_blocks", op.host_blocks}, {"kernels", op.num_kernels},
          {"device_us", op.device_ns / 1000.0}, {"host_us", op.host_ns / 1000.0}, {"parts", parts}};
}

void print_memory(const model::MemoryBreakdown& m) {
  std::printf("\nMemory per GPU (pipeline rank %d, the fullest of %zu)\n", m.peak_stage,
              m.stage_total_bytes.size());
  auto row = [](const char* name, double b) { std::printf("  %-28s %12s\n", name, fmt_bytes(b).c_str()); };
  row("weights (bf16)", m.weights_bytes);
  if (m.fp8_weight_bytes > 0) row("fp8 weight copies", m.fp8_weight_bytes);
  row("gradients", m.gradients_bytes);
  row("optimizer states", m.optimizer_bytes);
  char buf[96];
  std::snprintf(buf, sizeof buf, "activations (%.0f in flight)", m.microbatches_in_flight);
  row(buf, m.activations_bytes);
  row("transient at the peak", m.transient_bytes);
  row("dispatcher buffers", m.dispatcher_buffers_bytes);
  if (m.cuda_graph_bytes > 0) row("CUDA-graph surfaces", m.cuda_graph_bytes);
  row("library workspaces", m.workspace_bytes);
  row("allocated (PyTorch peak)", m.allocated_bytes);
  row("framework + fragmentation", m.framework_overhead_bytes);
  row("total", m.total_bytes);
  std::printf("  %-28s %12s  -> %s by %s\n", "capacity", fmt_bytes(m.capacity_bytes).c_str(),
              m.fits ? "fits" : "DOES NOT FIT", fmt_bytes(std::fabs(m.margin_bytes)).c_str());
  if (m.stage_total_bytes.size() > 1) {
    std::printf("  per pipeline rank:");
    for (double b : m.stage_total_bytes) std::printf(" %s", fmt_bytes(b).c_str());
    std::printf("\n");
  }
}

}  // namespace

nlohmann::json prediction_json(const model::Config& cfg, const model::Prediction& p) {
  nlohmann::json ops = nlohmann::json::array();
  for (const auto& op : p.costs.moe_layer.ops) ops.push_back(op_json(op));
  const auto& m = p.memory;
  return {{"schema_version", 1},
          {"kind", "prediction"},
          {"method", p.method},
          {"config", model::to_json(cfg)},
          {"step_time_us", p.step_time_us},
          {"baseline_step_time_us", p.baseline_step_time_us},
          {"overlap_gain", p.overlap_gain},
          {"exposed_comm_us", p.exposed_comm_us},
          {"baseline_exposed_comm_us", p.baseline_exposed_comm_us},
          {"compute_busy_fraction", p.compute_busy_fraction},
          {"comm_busy_fraction", p.comm_busy_fraction},
          {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
          {"model_tflops_per_gpu", p.model_tflops_per_gpu},
          {"mfu", p.mfu},
          {"fsdp_comm_us", p.costs.fsdp_comm_us},
          {"fsdp_exposed_us", p.costs.fsdp_exposed_us},
          {"peak_memory_bytes", m.total_bytes},
          {"memory",
           {{"weights_bytes", m.weights_bytes}, {"gradients_bytes", m.gradients_bytes},
            {"optimizer_bytes", m.optimizer_bytes}, {"activations_bytes", m.activations_bytes},
            {"microbatches_in_flight", m.microbatches_in_flight},
            {"dispatcher_buffers_bytes", m.dispatcher_buffers_bytes},
            {"overlap_extra_bytes", m.overlap_extra_bytes},
            {"delayed_wgrad_bytes", m.delayed_wgrad_bytes},
            {"framework_overhead_bytes", m.framework_overhead_bytes},
            {"fp8_weight_bytes", m.fp8_weight_bytes}, {"transient_bytes", m.transient_bytes},
            {"cuda_graph_bytes", m.cuda_graph_bytes}, {"workspace_bytes", m.workspace_bytes},
            {"allocated_bytes", m.allocated_bytes},
            {"peak_stage", m.peak_stage}, {"stage_total_bytes", m.stage_total_bytes},
            {"total_bytes", m.total_bytes}, {"capacity_bytes", m.capacity_bytes},
            {"fits", m.fits}, {"margin_bytes", m.margin_bytes}}},
          {"moe_layer_ops", ops}};
}

void print_prediction(const model::Config& cfg, const model::Prediction& p) {
  const auto& par = cfg.par;
  const auto& o = cfg.opt;
  std::printf("EPO prediction: %s on %d x %s\n", cfg.model.name.c_str(), cfg.num_gpus,
              cfg.hw.name.c_str());
  if (const std::string note = model::uncalibrated_note(cfg.hw); !note.empty())
    std::printf("  %s\n", note.c_str());
  std::printf("  layout   tp=%d pp=%d vpp=%d cp=%d ep=%d etp=%d dp=%d  mbs=%d gbs=%d seq=%d  "
              "(%d micro-batches)\n",
              par.tp, par.pp, par.vpp, par.cp, par.ep, par.etp, par.dp, par.micro_batch_size,
              par.global_batch_size, par.seq_length, par.num_microbatches());
  std::printf("  options  dispatcher=%s%s%s overlap=%s delay_wgrad=%s comm_sms=%d cdmc=%d "
              "precision=%s routing=%s\n",
              model::to_string(o.dispatcher), o.dispatcher == model::Dispatcher::flex ? "/" : "",
              o.dispatcher == model::Dispatcher::flex ? model::to_string(o.flex_backend) : "",
              o.overlap_moe_expert_parallel_comm ? "on" : "off", o.delay_wgrad_compute ? "on" : "off",
              o.effective_comm_sms(cfg.ep_num_domains() == 1), o.cuda_device_max_connections,
              model::to_string(o.precision), model::to_string(o.routing.kind));
  std::printf("\nOne MoE layer, one micro-batch (busiest rank)\n");
  std::printf("  %-20s %-9s %-8s %12s %12s %12s %12s %5s\n", "op", "dir", "stream", "time",
              "FLOPs", "HBM bytes", "link bytes", "SMs");
  for (const auto& op : p.costs.moe_layer.ops) {
    std::printf("  %-20s %-9s %-8s %12s %12s %12s %12s %5d%s\n", model::to_string(op.kind),
                model::to_string(op.dir), model::to_string(op.stream),
                fmt_time_us(op.duration_us()).c_str(), fmt_si(op.flops, "F").c_str(),
                fmt_bytes(op.hbm_bytes).c_str(), fmt_bytes(op.nvl_bytes + op.net_bytes).c_str(),
                op.sms, op.host_blocks ? "  host waits" : "");
  }
  std::printf("\nStep (%s)\n", p.method.c_str());
  std::printf("  step time                 %12s\n", fmt_time_us(p.step_time_us).c_str());
  std::printf("  without overlap           %12s   (overlap gain %+.1f%%)\n",
              fmt_time_us(p.baseline_step_time_us).c_str(), 100.0 * p.overlap_gain);
  std::printf("  exposed EP communication  %12s   (without overlap %s)\n",
              fmt_time_us(p.exposed_comm_us).c_str(), fmt_time_us(p.baseline_exposed_comm_us).c_str());
  if (p.costs.fsdp_comm_us > 0)
    std::printf("  Megatron-FSDP comm        %12s   (%s of it exposed; %s sharding)\n",
                fmt_time_us(p.costs.fsdp_comm_us).c_str(),
                fmt_time_us(p.costs.fsdp_exposed_us).c_str(), model::to_string(o.fsdp_sharding));
  std::printf("  tokens/s per GPU          %12.0f\n", p.tokens_per_s_per_gpu);
  std::printf("  model TFLOP/s per GPU     %12.1f   (MFU %.1f%% of the dense BF16 peak)\n", p.model_tflops_per_gpu,
              100.0 * p.mfu);
  if (p.costs.flops_per_token_computed < p.costs.flops_per_token_model)
    std::printf("  (model TFLOP/s is Megatron's count, every token through its experts; MFU counts the\n"
                "   FLOPs computed: capacity factor %.3g keeps that share of the routed token copies)\n",
                cfg.opt.capacity_factor);
  print_memory(p.memory);
}

void add_predict(CLI::App& app, Runner& run) {
  auto args = std::make_shared<PredictArgs>();
  auto* sub = app.add_subcommand("predict", "predict step time, exposed communication and memory");
  add_config_flags(*sub, args->cfg);
  sub->add_option("--json", args->json_path, "write the prediction as JSON");
  sub->add_option("--trace", args->trace_path,
                  "write the simulated timeline as Chrome trace-event JSON (Perfetto)");
  sub->add_flag("--trace-baseline", args->trace_baseline,
                "with --trace: add the non-overlapped baseline as further processes");
  sub->add_flag("--trace-full", args->trace_full,
                "with --trace: write the whole step even above the 64 MiB size guard");
  sub->add_flag("--fast", args->fast, "use the steady-state fast path instead of the simulation");
  sub->add_option("--html", args->html_path,
                  "also write an HTML page: timeline, op breakdown, memory (as epo report)");
  sub->add_flag("--progress", args->progress,
                "progress line on stderr even when it is not a terminal");
  sub->callback([args, &run] {
    run = [args] {
      // Outputs are checked before any work, so that nothing is written after an input error.
      model::check_output_paths({args->json_path, args->trace_path, args->html_path},
                                {args->cfg.config_file, args->cfg.profile_file});
      const model::Config cfg = build_config(args->cfg);
      // The full simulation holds every op of the step; above its bound the fast path answers.
      const bool too_big = model::estimated_schedule_ops(cfg) > model::limits::kMaxSimulatedOps;
      EPO_REQUIRE_INPUT(!too_big || args->trace_path.empty(), "--trace: the step has about ",
                        model::estimated_schedule_ops(cfg), " ops, above the simulator's bound of ",
                        model::limits::kMaxSimulatedOps,
                        " (2^22) ops (allowed: --trace for smaller steps; lower gbs)");
      const bool fast = args->fast || too_big;
      // A long simulation shows its elapsed time on a terminal (nothing in piped output).
      auto ticker = std::make_unique<report::ProgressTicker>(
          report::progress_enabled(args->progress), "epo predict: simulating the step");
      const model::Prediction p =
          model::predict(cfg, fast ? model::PredictMode::fast : model::PredictMode::full);
      model::check_prediction(p);
      if (too_big && !args->fast)
        std::printf("note: about %lld ops in this step, above the full simulation's bound of "
                    "%lld (2^22); predicted with the fast path\n",
                    model::estimated_schedule_ops(cfg), model::limits::kMaxSimulatedOps);
      nlohmann::json record = prediction_json(cfg, p);
      // The timeline: one steady-state layer step per stream, and the trace file.
      if (!fast || !args->trace_path.empty()) {
        const model::SimResult sim = model::simulate_config(cfg);
        ticker.reset();
        record["timeline"] = report::timeline_json(sim);
        print_prediction(cfg, p);
        const std::string ascii = model::ascii_layer_step(sim.schedule, sim.run);
        if (!ascii.empty()) std::printf("\nTimeline (simulated)\n%s", ascii.c_str());
        if (!args->trace_path.empty()) {
          const model::TraceWritten w =
              model::write_trace(args->trace_path, sim, args->trace_baseline,
                                 args->trace_full ? 0 : model::kMaxTraceBytes);
          if (w.cut())
            std::fprintf(stderr,
                         "epo predict: warning: the whole step's trace would be about %.0f MB, "
                         "above the %zu MiB guard; wrote the first %d of %d schedule steps per "
                         "rank (%zu of %zu ops). --trace-full writes all; --html draws the "
                         "timeline without a trace file\n",
                         w.estimated_full_bytes / 1e6, model::kMaxTraceBytes >> 20, w.steps,
                         w.total_steps, w.ops, w.total_ops);
          std::printf("\ntrace written to %s (%zu ops; open in ui.perfetto.dev)\n",
                      args->trace_path.c_str(), w.ops);
        }
      } else {
        ticker.reset();
        print_prediction(cfg, p);
      }
      if (!args->json_path.empty()) model::write_json_file(args->json_path, record);
      write_html_report(args->html_path, record);
      return 0;
    };
  });
}

}  // namespace epo::cli
