// Op parameters from the cost model, and whole-step simulation of a configuration and its
// non-overlapped baseline.
#include <algorithm>
#include <cmath>

#include "model/limits.hpp"
#include "model/simulate.hpp"

namespace epo::model {

namespace {

const OpCost& layer_cost(const LayerCosts& lc, OpKind kind, Direction dir) {
  const OpCost& c = lc.get(kind, dir);
  if (c.duration_ns > 0 || dir != Direction::wgrad) return c;
  return lc.get(kind, Direction::backward);  // wgrad nodes may be filed as backward
}

OpParams params_of(const OpCost& c) {
  OpParams p;
  p.duration_ns = std::max<TimeNs>(0, c.duration_ns);
  p.host_ns = std::max<TimeNs>(0, c.host_ns);
  p.device_ns = c.device_ns > 0 ? c.device_ns : p.duration_ns;
  p.sms = c.sms;
  p.num_kernels = std::max(1, c.num_kernels);
  p.link = c.link;
  return p;
}

}  // namespace

OpParams resolve_op(const StepCosts& costs, const ScheduleOp& op, bool fold_wgrad) {
  switch (op.kind) {
    case OpKind::embedding:
      return params_of(op.dir == Direction::forward ? costs.embedding_fwd : costs.embedding_bwd);
    case OpKind::lm_head_loss:
      return params_of(op.dir == Direction::forward ? costs.lm_head_fwd : costs.lm_head_bwd);
    case OpKind::pp_send_recv:
      if (op.pp_role == PpRole::recv) return OpParams{};
      return params_of(costs.pp_send_recv);
    case OpKind::dp_grad_reduce: {
      OpParams p = params_of(costs.dp_grad_reduce);
      p.duration_ns = static_cast<TimeNs>(std::llround(static_cast<double>(p.duration_ns) *
                                                       static_cast<double>(op.grad_fraction)));
      return p;
    }
    default: break;
  }
  const LayerCosts& lc = op.is_mtp ? costs.mtp_layer : (op.is_moe ? costs.moe_layer
                                                                  : costs.dense_layer);
  OpParams p = params_of(layer_cost(lc, op.kind, op.dir));
  if (fold_wgrad && op.dir == Direction::backward) {
    if (op.kind == OpKind::mlp) {
      const OpCost& w = layer_cost(lc, OpKind::mlp_wgrad, Direction::wgrad);
      p.duration_ns += w.duration_ns;
      p.host_ns += w.host_ns;
      p.device_ns += w.device_ns > 0 ? w.device_ns : w.duration_ns;
      p.num_kernels += w.num_kernels;
    } else if (op.kind == OpKind::pre_dispatch) {
      const OpCost& w = layer_cost(lc, OpKind::pre_dispatch_wgrad, Direction::wgrad);
      p.duration_ns += w.duration_ns;
      p.host_ns += w.host_ns;
      p.device_ns += w.device_ns > 0 ? w.device_ns : w.duration_ns;
      p.num_kernels += w.num_kernels;
    }
  }
  return p;
}


double microbatches_in_flight(const Schedule& first_stage) {
  int layers = 0;
  for (int l : first_stage.layers_per_chunk) layers += l;
  for (const auto& op : first_stage.ops) {
    if (op.is_mtp) {
      ++layers;  // the MTP layer holds activations like a decoder layer
      break;
    }
  }
  const double per_chunk =
      static_cast<double>(std::max(1, layers)) / std::max(1, first_stage.vpp);
  return activation_peak_layers(first_stage) / per_chunk;
}

Config baseline_config(const Config& cfg) {
  Config b = cfg;
  b.opt.overlap_moe_expert_parallel_comm = false;
  b.opt.delay_wgrad_compute = false;
  b.opt.ep_overlap_early_attn_memory_release = false;
  return b;
}

SimResult simulate_step(const Config& cfg, const StepCosts& costs,
                        const StepCosts& baseline_costs, const SimOptions& options) {
  SimResult r;
  const bool overlap = cfg.opt.overlap_moe_expert_parallel_comm;
  check_simulation_size(cfg, costs);  // memory and nanosecond times bounded (model/limits.hpp)
  if (overlap) check_step_work(cfg, baseline_costs);
  r.schedule = build_pipeline(cfg, overlap);
  r.run = simulate(r.schedule, cfg, costs, options);
  if (overlap) {
    const Config base = baseline_config(cfg);
    r.baseline_schedule = build_pipeline(base, false);
    r.baseline = simulate(r.baseline_schedule, base, baseline_costs, options);
  } else {
    r.baseline_schedule = r.schedule;
    r.baseline = r.run;
  }
  r.overlap_gain = r.run.step_ns > 0 ? static_cast<double>(r.baseline.step_ns) /
                                               static_cast<double>(r.run.step_ns) - 1.0
                                     : 0.0;
  r.microbatches_in_flight = microbatches_in_flight(r.schedule.ranks.front());
  return r;
}

SimResult simulate_step(const Config& cfg, const StepCosts& costs, const SimOptions& options) {
  return simulate_step(cfg, costs, costs, options);
}

SimResult simulate_config(const Config& cfg, const SimOptions& options) {
  const StepCosts costs = compute_step_costs(cfg);
  if (!cfg.opt.overlap_moe_expert_parallel_comm) return simulate_step(cfg, costs, costs, options);
  return simulate_step(cfg, costs, compute_step_costs(baseline_config(cfg)), options);
}


}  // namespace epo::model
