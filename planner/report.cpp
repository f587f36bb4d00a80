#include "planner/report.hpp"

#include <cstdio>
#include <sstream>

#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "planner/explain.hpp"

namespace epo::planner {

namespace {

std::string layout(const model::Config& c) {
  char b[96];
  std::snprintf(b, sizeof b, "tp%d pp%d vpp%d cp%d ep%d etp%d mbs%d", c.par.tp, c.par.pp,
                c.par.vpp, c.par.cp, c.par.ep, c.par.etp, c.par.micro_batch_size);
  return b;
}
std::string dispatcher(const model::Config& c) {
  if (c.opt.dispatcher != model::Dispatcher::flex) return model::to_string(c.opt.dispatcher);
  std::string s = std::string("flex/") + model::to_string(c.opt.flex_backend);
  s += "/" + std::to_string(model::flex_comm_sms(c)) + "sm";
  return s;
}
std::string flags(const model::Config& c) {
  std::string s;
  auto add = [&](const char* f) { s += (s.empty() ? "" : ","), s += f; };
  if (c.opt.overlap_moe_expert_parallel_comm) add("overlap");
  if (c.opt.delay_wgrad_compute) add("delay-wgrad");
  if (c.opt.ep_overlap_early_attn_memory_release) add("early-release");
  if (c.opt.recompute_granularity == model::RecomputeGranularity::selective) add("rc-sel");
  if (c.opt.recompute_granularity == model::RecomputeGranularity::full) add("rc-full");
  if (c.opt.recompute_granularity == model::RecomputeGranularity::selective &&
      !c.opt.recompute_modules.empty() && c.opt.recompute_modules.front() == "mla_up_proj")
    s += "(mla)";
  if (c.opt.cuda_graph_impl == model::CudaGraphImpl::full_iteration) add("graphs-full");
  else if (c.opt.cuda_graph_impl != model::CudaGraphImpl::none) add("graphs");
  return s.empty() ? "-" : s;
}

}  // namespace

std::string format_plan_table(const std::vector<Plan>& plans) {
  std::ostringstream os;
  char line[320];
  std::snprintf(line, sizeof line, "  %-3s %-36s %-19s %-36s %9s %9s %8s %9s %5s %s\n", "#",
                "layout", "dispatcher", "flags", "step", "exposed", "mem/GPU", "tokens/s", "MFU",
                "variants");
  os << line;
  std::snprintf(line, sizeof line, "  %-3s %-36s %-19s %-36s %9s %9s %8s %9s %5s\n", "", "", "",
                "", "ms", "ms", "GiB", "per GPU", "%");
  os << line;
  int i = 0;
  for (const auto& p : plans) {
    std::string var = p.variants > 0 ? "+" + std::to_string(p.variants) : "";
    std::snprintf(line, sizeof line, "  %-3d %-36s %-19s %-36s %9.1f %9.1f %8.1f %9.0f %5.1f %s\n",
                  ++i, layout(p.cfg).c_str(), dispatcher(p.cfg).c_str(), flags(p.cfg).c_str(),
                  p.pred.step_time_us / 1e3, p.pred.exposed_comm_us / 1e3,
                  p.pred.memory.total_bytes / (1024.0 * 1024 * 1024), p.pred.tokens_per_s_per_gpu,
                  100.0 * p.pred.mfu, var.c_str());
    os << line;
  }
  return os.str();
}

std::vector<Violation> top_plan_warnings(const SearchSpec& spec, const SearchResult& r) {
  std::vector<Violation> warned;
  if (r.top.empty()) return warned;
  for (Violation& v : validate(r.top.front().cfg, spec.ctx))
    if (v.severity == Severity::warning) warned.push_back(std::move(v));
  return warned;
}

std::string format_search_report(const SearchSpec& spec, const SearchResult& r) {
  std::ostringstream os;
  const auto& b = spec.base;
  os << "epo plan: " << b.model_name << " on " << b.num_gpus << " x " << b.hardware_name
     << ", seq " << b.par.seq_length << ", global batch " << b.par.global_batch_size << " ("
     << to_string(spec.ctx.frontend) << ", Megatron " << to_string(spec.ctx.megatron) << ", TE "
     << to_string(spec.ctx.te) << ")\n";
  if (const std::string note = model::uncalibrated_note(b.hw); !note.empty()) os << note << "\n";
  char line[256];
  if (b.memory_headroom > 0) {
    std::snprintf(line, sizeof line,
                  "plans keep %.0f %% of the %.0f GiB per GPU free (--memory-headroom): a "
                  "plan fits at %.1f GiB\n",
                  100.0 * b.memory_headroom, b.hw.hbm_bytes / (1024.0 * 1024 * 1024),
                  b.hw.hbm_bytes * (1.0 - b.memory_headroom) / (1024.0 * 1024 * 1024));
    os << line;
  }
  if (b.opt.precision == model::Precision::nvfp4)
    os << "NVFP4 as the emitted settings run it (bf16_with_nvfp4_mixed): primary weights in FP4 "
       << (b.opt.fp8_param_gather ? "(fp4_param_gather)" : "not gathered (no distributed optimizer)")
       << ", the output layer in BF16\n";
  if (b.opt.precision == model::Precision::fp8)
    os << "FP8 as the emitted settings run it: primary weights in FP8 "
       << (b.opt.fp8_param_gather ? "(fp8_param_gather)" : "not gathered (no distributed optimizer)")
       << (b.opt.fused_grouped_mlp
               ? ", TE's fused grouped MLP (NVTE_CUTEDSL_FUSED_GROUPED_MLP=1, op fuser)"
               : "")
       << "\n";
  if (!spec.fixed.said.empty()) {
    os << "fixed by the flags given (the search varies the rest):";
    for (size_t i = 0; i < spec.fixed.said.size(); ++i)
      os << (i ? ", " : " ") << spec.fixed.said[i];
    os << "\n";
  }
  long long rejected = 0;
  for (const auto& kv : r.rejected) rejected += kv.second;
  std::snprintf(line, sizeof line,
                "searched %lld candidates in %.2f s: %lld rejected by rules or memory, %lld "
                "predicted (%lld feasible), %lld skipped by bounds (could not make the top %d, "
                "the Pareto front or a reference)\n",
                r.generated, r.seconds, rejected, r.evaluated, r.feasible, r.skipped, spec.top_n);
  os << line;
  if (r.top.empty()) return os.str();
  os << "\nTop " << r.top.size() << " by tokens/s per GPU (variants: same prediction with other "
        "comm SMs or CUDA graphs)\n" << format_plan_table(r.top);
  // A long front is thinned evenly for reading; the plan JSON and --top list the exact plans.
  constexpr size_t kMaxRows = 12;
  std::vector<Plan> front;
  if (r.pareto.size() <= kMaxRows) {
    front = r.pareto;
  } else {
    for (size_t k = 0; k < kMaxRows; ++k)
      front.push_back(r.pareto[k * (r.pareto.size() - 1) / (kMaxRows - 1)]);
  }
  os << "\nPareto front (step time vs memory per GPU";
  if (front.size() < r.pareto.size())
    os << "; " << front.size() << " of its " << r.pareto.size() << " plans";
  os << ")\n" << format_plan_table(front);
  os << "\nRejected (first failing check)\n";
  for (const auto& [reason, n] : r.rejected) {
    std::snprintf(line, sizeof line, "  %-44s %10lld\n", reason.c_str(), n);
    os << line;
  }
  const Plan& w = r.top.front();
  // What `epo validate` warns about the winner (it passes every error rule, or it would not be a
  // plan): settings that run but may lose speed, said beside the plan the user would take.
  const std::vector<Violation> warned = top_plan_warnings(spec, r);
  if (!warned.empty()) {
    os << "\nWarnings on plan #1 (`epo validate` on its settings; the prediction above "
          "includes what the model knows of each)\n";
    for (const Violation& v : warned)
      os << "  " << v.id << ": " << v.message << " (" << v.source << ")\n";
  }
  os << "\nWhy the winner wins [" << w.key << "]\n";
  if (r.has_alltoall_no_overlap && r.best_alltoall_no_overlap.order != w.order)
    os << format_comparison(
        compare_plans(w, r.best_alltoall_no_overlap, "best alltoall plan without overlap"));
  else if (!r.has_alltoall_no_overlap)
    os << "  (no feasible alltoall plan without overlap to compare with)\n";
  else
    os << "  the winner is itself the best alltoall plan without overlap\n";
  if (r.has_same_layout_baseline && r.same_layout_baseline.order != w.order &&
      (!r.has_alltoall_no_overlap || r.same_layout_baseline.order != r.best_alltoall_no_overlap.order))
    os << format_comparison(compare_plans(
        w, r.same_layout_baseline, "the same layout with alltoall and without overlap"));
  if (r.has_other_dispatcher) {
    const bool winner_flex = w.cfg.opt.dispatcher == model::Dispatcher::flex;
    os << format_comparison(compare_plans(
        w, r.best_other_dispatcher,
        winner_flex ? "best plan with the alltoall dispatcher" : "best plan with the flex dispatcher"));
  } else {
    os << "  (no feasible plan with the other dispatcher to compare with)\n";
  }
  return os.str();
}

}  // namespace epo::planner
