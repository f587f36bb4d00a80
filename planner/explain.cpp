#include "planner/explain.hpp"

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "planner/validation.hpp"

namespace epo::planner {

using model::Direction;
using model::OpKind;

namespace {

/// MoE-layer op time per step on one rank: per layer and micro-batch, times the MoE layers one
/// pipeline rank holds and the micro-batches it runs.
double per_step_us(const Plan& p, OpKind k, Direction d) {
  const auto& cfg = p.cfg;
  const double layers =
      static_cast<double>(cfg.model.num_moe_layers() + cfg.model.mtp_num_layers) / cfg.par.pp;
  const double m = std::max(1, cfg.par.num_microbatches());
  return p.pred.costs.moe_layer.get(k, d).duration_us() * layers * m;
}

std::string fmt_us(double us) {
  char b[32];
  if (std::fabs(us) >= 1e6) std::snprintf(b, sizeof b, "%.2f s", us / 1e6);
  else if (std::fabs(us) >= 1e3) std::snprintf(b, sizeof b, "%.1f ms", us / 1e3);
  else std::snprintf(b, sizeof b, "%.0f us", us);
  return b;
}

void diff(std::vector<std::string>& out, const char* name, const std::string& a,
          const std::string& b) {
  if (a != b) out.push_back(std::string(name) + " " + a + " -> " + b);
}
std::string disp(const model::Config& c) {
  if (c.opt.dispatcher != model::Dispatcher::flex) return model::to_string(c.opt.dispatcher);
  return std::string("flex/") + model::to_string(c.opt.flex_backend);
}
std::string onoff(bool b) { return b ? "on" : "off"; }

}  // namespace

Comparison compare_plans(const Plan& w, const Plan& r, const std::string& label) {
  Comparison c;
  c.reference_label = label;
  c.reference_key = r.key;
  c.step_delta_us = r.pred.step_time_us - w.pred.step_time_us;
  c.exposed_reference_us = r.pred.exposed_comm_us;
  c.exposed_winner_us = w.pred.exposed_comm_us;
  c.hidden_us = r.pred.exposed_comm_us - w.pred.exposed_comm_us;
  c.tokens_gain = r.pred.tokens_per_s_per_gpu > 0
                      ? w.pred.tokens_per_s_per_gpu / r.pred.tokens_per_s_per_gpu - 1.0
                      : 0.0;
  const struct {
    const char* name;
    OpKind k;
    Direction d;
  } ops[] = {{"dispatch fwd", OpKind::dispatch, Direction::forward},
             {"dispatch bwd", OpKind::dispatch, Direction::backward},
             {"combine fwd", OpKind::combine, Direction::forward},
             {"combine bwd", OpKind::combine, Direction::backward},
             {"pre_dispatch fwd", OpKind::pre_dispatch, Direction::forward},
             {"pre_dispatch bwd", OpKind::pre_dispatch, Direction::backward},
             {"mlp fwd", OpKind::mlp, Direction::forward},
             {"mlp bwd", OpKind::mlp, Direction::backward},
             {"mlp wgrad", OpKind::mlp_wgrad, Direction::wgrad},
             {"pre_dispatch wgrad", OpKind::pre_dispatch_wgrad, Direction::wgrad}};
  for (const auto& o : ops) {
    OpDelta d{o.name, per_step_us(r, o.k, o.d), per_step_us(w, o.k, o.d)};
    if (d.reference_us > 0 || d.winner_us > 0) c.ops.push_back(d);
    if (o.k == OpKind::dispatch || o.k == OpKind::combine) {
      c.comm_reference_us += d.reference_us;
      c.comm_winner_us += d.winner_us;
    }
  }
  const auto& a = r.cfg;
  const auto& b = w.cfg;
  diff(c.differences, "tp", std::to_string(a.par.tp), std::to_string(b.par.tp));
  diff(c.differences, "pp", std::to_string(a.par.pp), std::to_string(b.par.pp));
  diff(c.differences, "vpp", std::to_string(a.par.vpp), std::to_string(b.par.vpp));
  diff(c.differences, "cp", std::to_string(a.par.cp), std::to_string(b.par.cp));
  diff(c.differences, "ep", std::to_string(a.par.ep), std::to_string(b.par.ep));
  diff(c.differences, "etp", std::to_string(a.par.etp), std::to_string(b.par.etp));
  diff(c.differences, "mbs", std::to_string(a.par.micro_batch_size),
       std::to_string(b.par.micro_batch_size));
  diff(c.differences, "dispatcher", disp(a), disp(b));
  diff(c.differences, "overlap", onoff(a.opt.overlap_moe_expert_parallel_comm),
       onoff(b.opt.overlap_moe_expert_parallel_comm));
  diff(c.differences, "delay_wgrad", onoff(a.opt.delay_wgrad_compute),
       onoff(b.opt.delay_wgrad_compute));
  diff(c.differences, "early_release", onoff(a.opt.ep_overlap_early_attn_memory_release),
       onoff(b.opt.ep_overlap_early_attn_memory_release));
  diff(c.differences, "comm_sms", std::to_string(a.opt.comm_sms), std::to_string(b.opt.comm_sms));
  diff(c.differences, "recompute", model::to_string(a.opt.recompute_granularity),
       model::to_string(b.opt.recompute_granularity));
  diff(c.differences, "cuda_graphs", model::to_string(a.opt.cuda_graph_impl),
       model::to_string(b.opt.cuda_graph_impl));
  return c;
}

std::string format_comparison(const Comparison& c) {
  std::ostringstream os;
  os << "  vs " << c.reference_label << " [" << c.reference_key << "]\n";
  os << "    step " << (c.step_delta_us >= 0 ? "faster" : "slower") << " by "
     << fmt_us(std::fabs(c.step_delta_us));
  char g[32];
  std::snprintf(g, sizeof g, "%+.1f%%", 100.0 * c.tokens_gain);
  os << " (tokens/s/GPU " << g << ")\n";
  os << "    exposed EP communication " << fmt_us(c.exposed_reference_us) << " -> "
     << fmt_us(c.exposed_winner_us) << " (" << (c.hidden_us >= 0 ? "hidden " : "more exposed ")
     << fmt_us(std::fabs(c.hidden_us)) << ")\n";
  os << "    EP communication run per step " << fmt_us(c.comm_reference_us) << " -> "
     << fmt_us(c.comm_winner_us) << "; hidden behind compute "
     << fmt_us(std::max(0.0, c.comm_reference_us - c.exposed_reference_us)) << " -> "
     << fmt_us(std::max(0.0, c.comm_winner_us - c.exposed_winner_us)) << "\n";
  if (!c.differences.empty()) {
    os << "    settings:";
    for (const auto& d : c.differences) os << "  " << d << ";";
    os << "\n";
  }
  os << "    per op, per step on one rank (reference -> winner):\n";
  for (const auto& o : c.ops) {
    const double delta = o.reference_us - o.winner_us;
    char line[160];
    std::snprintf(line, sizeof line, "      %-20s %10s -> %10s  %s %s\n", o.name.c_str(),
                  fmt_us(o.reference_us).c_str(), fmt_us(o.winner_us).c_str(),
                  std::fabs(delta) < 0.5 ? "  same" : (delta > 0 ? "cheaper by" : "dearer by"),
                  std::fabs(delta) < 0.5 ? "" : fmt_us(std::fabs(delta)).c_str());
    os << line;
  }
  return os.str();
}

std::string infeasible_advice(const SearchResult& r, const SearchSpec& spec) {
  std::ostringstream os;
  if (r.generated == 0) {
    os << "no parallel layout fits " << spec.base.num_gpus << " GPUs with this model, sequence "
       << "length and global batch size; relax: choose a GPU count the model's layers, heads and "
       << "experts divide, or a global batch size that is a multiple of the data-parallel size";
    return os.str();
  }
  if (r.rejected.empty()) return "";
  const auto& [reason, count] = r.rejected.front();
  os << "no feasible plan: " << count << " of " << r.generated << " candidates were eliminated by "
     << reason;
  if (reason == "memory") {
    os << " (the plan does not fit in "
       << spec.base.hw.hbm_bytes * (1.0 - spec.base.memory_headroom) / (1024.0 * 1024 * 1024)
       << " GiB per GPU";
    if (spec.base.memory_headroom > 0)
      os << ", the " << 100.0 * spec.base.memory_headroom << " % headroom kept free";
    os << "); relax: more GPUs, a shorter sequence, a smaller global batch, "
       << "hardware with more memory, or a smaller --memory-headroom";
  } else if (reason.rfind("model: ", 0) != 0) {
    const Rule& rule = find_rule(reason);
    os << " (" << rule.source << "); relax: " << rule.fix(spec.base, spec.ctx);
  }
  for (size_t i = 1; i < r.rejected.size() && i < 4; ++i)
    os << "\n  then " << r.rejected[i].first << ": " << r.rejected[i].second;
  return os.str();
}

}  // namespace epo::planner
