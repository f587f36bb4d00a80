// predict(): step time, exposed communication, throughput and memory for one configuration.
// PredictMode::full simulates the whole schedule of every pipeline rank (model/simulate.hpp) for
// the configuration and for its non-overlapped baseline; PredictMode::fast evaluates both with the
// steady-state fast path (model/fast_path.hpp), which agrees with the simulation within ~1%.
// predict_fast_ranking() is fast mode without the baseline, for the planner's ranking.
#include "model/prediction.hpp"

#include <algorithm>

#include "model/fast_path.hpp"
#include "model/simulate.hpp"

namespace epo::model {

namespace {

/// predict() with the baseline evaluated only when `with_baseline` (fast mode only).
Prediction predict_impl(const Config& cfg, PredictMode mode, bool with_baseline) {
  Prediction pr;
  pr.costs = compute_step_costs(cfg);
  const StepCosts& sc = pr.costs;
  const Parallel& p = cfg.par;
  const bool overlap = cfg.opt.overlap_moe_expert_parallel_comm;
  // The baseline is the same configuration with the overlap options off (its own op costs:
  // without delay_wgrad_compute the weight gradients are part of the backward nodes).
  const bool need_base = mode == PredictMode::full || with_baseline;
  const Config base_cfg = need_base ? baseline_config(cfg) : cfg;
  const StepCosts base_costs = overlap && need_base ? compute_step_costs(base_cfg) : sc;

  double step = 0, base = 0, exposed = 0, base_exposed = 0, in_flight = 0;
  if (mode == PredictMode::full) {
    pr.method = "simulation";
    SimOptions o;
    o.keep_timings = false;
    const SimResult r = simulate_step(cfg, sc, base_costs, o);
    step = static_cast<double>(r.run.step_ns);
    base = static_cast<double>(r.baseline.step_ns);
    exposed = static_cast<double>(r.run.exposed_ep_comm_ns);
    base_exposed = static_cast<double>(r.baseline.exposed_ep_comm_ns);
    pr.compute_busy_fraction = r.run.compute_busy_fraction;
    pr.comm_busy_fraction = r.run.comm_busy_fraction;
    in_flight = r.microbatches_in_flight;
  } else {
    pr.method = "fast-path";
    const FastResult f = fast_step(cfg, sc, overlap);
    const FastResult b =
        overlap && with_baseline ? fast_step(base_cfg, base_costs, false) : f;
    step = static_cast<double>(f.step_ns);
    base = static_cast<double>(b.step_ns);
    exposed = static_cast<double>(f.exposed_ep_comm_ns);
    base_exposed = static_cast<double>(b.exposed_ep_comm_ns);
    pr.compute_busy_fraction = f.compute_busy_fraction;
    pr.comm_busy_fraction = f.comm_busy_fraction;
    in_flight = f.microbatches_in_flight;
  }

  // The optimizer step follows the last backward and the gradient reduction in both schedules,
  // and the framework's own per-step host work is serial with the step.
  const double serial_ns =
      (sc.optimizer_step_us + exposed_param_gather_us(cfg, sc) + sc.framework_step_us +
       sc.fsdp_exposed_us) * 1000.0;
  step += serial_ns;
  base += serial_ns;
  pr.step_time_us = step / 1000.0;
  pr.baseline_step_time_us = base / 1000.0;
  pr.overlap_gain = step > 0 ? base / step - 1.0 : 0.0;
  pr.exposed_comm_us = exposed / 1000.0;
  pr.baseline_exposed_comm_us = base_exposed / 1000.0;
  pr.compute_busy_fraction = std::min(1.0, pr.compute_busy_fraction);
  pr.comm_busy_fraction = std::min(1.0, pr.comm_busy_fraction);
  const double tokens_per_step = double(p.global_batch_size) * p.seq_length;
  pr.tokens_per_s_per_gpu =
      pr.step_time_us > 0 ? tokens_per_step / (pr.step_time_us * 1e-6) / cfg.num_gpus : 0.0;
  pr.model_tflops_per_gpu = sc.flops_per_token_model * pr.tokens_per_s_per_gpu / 1e12;
  // MFU against the dense BF16 peak whatever the precision (Megatron-Bridge's convention), so
  // FP8 and BF16 runs compare on one scale; of the FLOPs computed (Megatron's count takes every
  // token through its experts, a capacity factor below 1 drops some: MFU stays <= 1).
  pr.mfu = sc.flops_per_token_computed * pr.tokens_per_s_per_gpu / 1e12 / cfg.hw.bf16_tflops;
  // Activations alive at the peak come from the schedule (first stage).
  pr.memory = estimate_memory(cfg, in_flight);
  if (!need_base) {
    pr.baseline_step_time_us = 0;
    pr.overlap_gain = 0;
    pr.baseline_exposed_comm_us = 0;
  }
  return pr;
}

}  // namespace

Prediction predict(const Config& cfg, PredictMode mode) { return predict_impl(cfg, mode, true); }

Prediction predict_fast_ranking(const Config& cfg) {
  return predict_impl(cfg, PredictMode::fast, false);
}

}  // namespace epo::model
