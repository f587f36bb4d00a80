// epo plan: search the layouts and options for the fastest plan that fits, explain why it wins,
// and emit it as Megatron-Bridge overrides, Megatron-LM arguments, environment or plan JSON.
// With no arguments: Qwen3-30B-A3B on 16 H100.
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/config_flags.hpp"
#include "cli/html_output.hpp"
#include "cli/planner_flags.hpp"
#include "cli/predict_report.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/pipeline_layout.hpp"
#include "model/json_file.hpp"
#include "model/result_bounds.hpp"
#include "planner/emit.hpp"
#include "planner/explain.hpp"
#include "planner/report.hpp"
#include "planner/search.hpp"
#include "report/progress.hpp"

namespace epo::cli {

namespace {

struct PlanArgs {
  ConfigFlags cfg;
  ContextFlags ctx;
  std::string layout, emit, out, html;
  int top = 10, threads = 0;
  /// Percent of the GPU's memory a plan leaves free: the memory model's published peaks run about
  /// 5 % below Megatron's (docs/measurements.md).
  double memory_headroom_pct = 5.0;
  bool exhaustive = false, progress = false;
};

bool given(const ConfigFlags& f, const char* name) {
  return f.app && f.app->get_option(name)->count() > 0;
}

/// Applies "tp=1,pp=2,vpp=2,cp=1,ep=16,etp=1,mbs=1" (any subset) to the layout.
void apply_layout(model::Config& c, const std::string& s) {
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto eq = item.find('=');
    EPO_REQUIRE_INPUT(eq != std::string::npos, "--layout: '", item,
                      "' is not key=value (allowed keys: tp, pp, vpp, cp, ep, etp, mbs)");
    const std::string k = item.substr(0, eq), v = item.substr(eq + 1);
    int x = 0;
    try {
      size_t pos = 0;
      x = std::stoi(v, &pos);
      EPO_REQUIRE_INPUT(pos == v.size(), "--layout: ", k, " = '", v, "' is not an integer");
    } catch (const std::logic_error&) {
      throw EPO_INPUT_ERROR("--layout: ", k, " = '", v, "' is not an integer");
    }
    auto& p = c.par;
    if (k == "tp") p.tp = x;
    else if (k == "pp") p.pp = x;
    else if (k == "vpp") p.vpp = x;
    else if (k == "cp") p.cp = x;
    else if (k == "ep") p.ep = x;
    else if (k == "etp") p.etp = x;
    else if (k == "mbs") p.micro_batch_size = x;
    else
      throw EPO_INPUT_ERROR("--layout: unknown key '", k,
                            "' (allowed keys: tp, pp, vpp, cp, ep, etp, mbs)");
  }
  c.par.sequence_parallel = c.par.tp > 1;
}

/// Every setting a flag names is a fixed value of the search (without --layout: with it the
/// layout is fixed whole and the flags set the base configuration's options).
void fix_given_settings(const PlanArgs& a, planner::SearchSpec& spec) {
  auto& f = spec.fixed;
  const model::Options& o = spec.base.opt;
  auto fix_int = [&](const char* flag, int value, int& slot, const char* name) {
    if (!given(a.cfg, flag)) return;
    slot = value;
    f.said.push_back(std::string(name) + " " + std::to_string(value));
  };
  fix_int("--tp", a.cfg.tp, f.tp, "tp");
  fix_int("--pp", a.cfg.pp, f.pp, "pp");
  fix_int("--vpp", a.cfg.vpp, f.vpp, "vpp");
  fix_int("--cp", a.cfg.cp, f.cp, "cp");
  fix_int("--ep", a.cfg.ep, f.ep, "ep");
  fix_int("--etp", a.cfg.etp, f.etp, "etp");
  fix_int("--mbs", a.cfg.mbs, f.mbs, "mbs");
  fix_int("--comm-sms", a.cfg.comm_sms, f.comm_sms, "comm SMs");
  fix_int("--cdmc", a.cfg.cdmc, f.cdmc, "CUDA_DEVICE_MAX_CONNECTIONS");
  for (const char* p : {"--pipeline-layout", "--first-stage-layers", "--last-stage-layers",
                        "--account-for-embedding", "--account-for-loss"})
    EPO_REQUIRE_INPUT(!given(a.cfg, p), p, " splits a fixed pipeline: give the layout with it ",
                      "(--layout tp=..,pp=..,vpp=..), or leave it to the search");
  if (given(a.cfg, "--dispatcher")) {
    f.dispatcher = static_cast<int>(o.dispatcher);
    f.said.push_back(std::string("dispatcher ") + model::to_string(o.dispatcher));
  }
  if (given(a.cfg, "--flex-backend")) {
    f.backend = static_cast<int>(o.flex_backend);
    if (f.dispatcher < 0) f.dispatcher = static_cast<int>(model::Dispatcher::flex);
    f.said.push_back(std::string("flex backend ") + model::to_string(o.flex_backend));
  }
  auto fix_flag = [&](const char* flag, int& slot, const char* name) {
    if (!given(a.cfg, flag)) return;
    slot = 1;
    f.said.push_back(name);
  };
  fix_flag("--overlap", f.overlap, "EP overlap on");
  fix_flag("--delay-wgrad", f.delay_wgrad, "delayed wgrad");
  fix_flag("--early-attn-release", f.early_release, "early attention release");
  if (f.delay_wgrad > 0 || f.early_release > 0) f.overlap = 1;  // both need the overlap
  for (const char* p : {"--recompute", "--recompute-modules", "--recompute-method",
                        "--recompute-num-layers"})
    if (given(a.cfg, p)) f.recompute = true;
  if (f.recompute) f.said.push_back("recompute as given");
  if (given(a.cfg, "--cuda-graph-impl") || given(a.cfg, "--cuda-graph-modules")) {
    f.cuda_graphs = true;
    f.said.push_back("CUDA graphs as given");
  }
}

/// The configuration the search starts from: model, hardware, GPUs, sequence, batch and the
/// options it does not vary. Without --layout any layout flags are ignored, so the base starts
/// from the trivial layout (which always divides).
model::Config base_config(PlanArgs& a) {
  ConfigFlags f = a.cfg;
  const bool from_file = !f.config_file.empty();
  if (!from_file) {
    f.tp = f.pp = f.vpp = f.cp = f.ep = f.etp = f.mbs = 1;
    f.gbs = 0;  // filled below; 0 lets derive_and_check accept the trivial layout
    // The pipeline split belongs to the layout: applied with --layout, checked against its pp.
    f.pipeline_layout.clear();
    f.first_stage_layers = f.last_stage_layers = 0;
    f.account_for_embedding = f.account_for_loss = false;
  }
  model::Config c = build_config(f);
  if (!from_file || given(a.cfg, "--gbs"))
    c.par.global_batch_size =
        given(a.cfg, "--gbs") ? a.cfg.gbs
                              : static_cast<int>(std::max<long long>(512, 8LL * c.num_gpus));
  if (!a.layout.empty()) {
    apply_layout(c, a.layout);
    if (!from_file) {
      c.par.pipeline_layout = a.cfg.pipeline_layout;
      c.par.first_stage_layers = a.cfg.first_stage_layers;
      c.par.last_stage_layers = a.cfg.last_stage_layers;
      c.par.account_for_embedding_in_pipeline_split = a.cfg.account_for_embedding;
      c.par.account_for_loss_in_pipeline_split = a.cfg.account_for_loss;
    }
    c.derive_and_check();
    model::check_pipeline_layout(c);
  }
  return c;
}

nlohmann::json plan_row(const planner::Plan& p) {
  return {{"key", p.key}, {"step_time_us", p.pred.step_time_us},
          {"exposed_comm_us", p.pred.exposed_comm_us},
          {"tokens_per_s_per_gpu", p.pred.tokens_per_s_per_gpu}, {"mfu", p.pred.mfu},
          {"memory_bytes", p.pred.memory.total_bytes}};
}

/// The winner against the reference plans and the runners-up, op by op (planner/explain.hpp).
nlohmann::json comparisons_json(const planner::SearchResult& r, nlohmann::json& references) {
  const planner::Plan& w = r.top.front();
  std::vector<std::pair<const planner::Plan*, std::string>> refs;
  if (r.has_alltoall_no_overlap && r.best_alltoall_no_overlap.order != w.order)
    refs.push_back({&r.best_alltoall_no_overlap, "best alltoall plan without overlap"});
  if (r.has_same_layout_baseline && r.same_layout_baseline.order != w.order)
    refs.push_back({&r.same_layout_baseline, "same layout, alltoall, no overlap"});
  if (r.has_other_dispatcher) refs.push_back({&r.best_other_dispatcher, "best other dispatcher"});
  for (const auto& [p, label] : refs)
    references.push_back({{"label", label}, {"plan", plan_row(*p)}});
  for (size_t i = 1; i < r.top.size() && i < 3; ++i)
    refs.push_back({&r.top[i], "runner-up #" + std::to_string(i + 1)});
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [p, label] : refs) {
    const planner::Comparison c = planner::compare_plans(w, *p, label);
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& op : c.ops)
      ops.push_back(
          {{"name", op.name}, {"reference_us", op.reference_us}, {"winner_us", op.winner_us}});
    out.push_back({{"label", label}, {"reference_key", c.reference_key},
                   {"step_delta_us", c.step_delta_us}, {"hidden_us", c.hidden_us},
                   {"tokens_gain", c.tokens_gain}, {"differences", c.differences}, {"ops", ops}});
  }
  return out;
}

nlohmann::json search_json(const planner::SearchSpec& spec, const planner::SearchResult& r) {
  nlohmann::json rejected = nlohmann::json::object();
  for (const auto& [k, v] : r.rejected) rejected[k] = v;
  nlohmann::json top = nlohmann::json::array(), pareto = nlohmann::json::array();
  for (const auto& p : r.top) top.push_back(plan_row(p));
  for (const auto& p : r.pareto) pareto.push_back(plan_row(p));
  nlohmann::json references = nlohmann::json::array();
  const nlohmann::json comparisons = comparisons_json(r, references);
  nlohmann::json warnings = nlohmann::json::array();
  for (const auto& v : planner::top_plan_warnings(spec, r))
    warnings.push_back({{"id", v.id}, {"message", v.message}, {"source", v.source}});
  return {{"rank", 1},
          {"key", r.top.front().key},
          {"ranked_by", "tokens_per_s_per_gpu, ties by generation order"},
          {"fixed_layout", spec.fixed_layout},
          {"memory_headroom", spec.base.memory_headroom},
          {"generated", r.generated},
          {"evaluated", r.evaluated},
          {"feasible", r.feasible},
          {"seconds", r.seconds},
          {"rejected", rejected},
          {"top", top},
          {"pareto", pareto},
          {"references", references},
          {"comparisons", comparisons},
          {"warnings", warnings},
          {"capacity_bytes", r.top.front().pred.memory.capacity_bytes},
          {"context",
           {{"megatron", planner::to_string(spec.ctx.megatron)},
            {"te", planner::to_string(spec.ctx.te)},
            {"torch", planner::to_string(spec.ctx.torch)},
            {"frontend", planner::to_string(spec.ctx.frontend)}}}};
}

int run_plan(PlanArgs& a) {
  EPO_REQUIRE_INPUT(a.emit.empty() || a.emit == "bridge" || a.emit == "mlm" || a.emit == "env" ||
                        a.emit == "json",
                    "--emit: '", a.emit, "' is not allowed (allowed: bridge|mlm|env|json)");
  EPO_REQUIRE_INPUT(a.out.empty() || !a.emit.empty(), "--out needs --emit bridge|mlm|env|json");
  EPO_REQUIRE_INPUT(a.top >= 1 && a.top <= 1000, "--top = ", a.top, " is out of range (1..1000)");
  EPO_REQUIRE_INPUT(a.threads >= 0 && a.threads <= 256, "--threads = ", a.threads,
                    " is out of range (0..256)");
  model::check_output_paths({a.out, a.html}, {a.cfg.config_file, a.cfg.profile_file});
  EPO_REQUIRE_INPUT(std::isfinite(a.memory_headroom_pct) && a.memory_headroom_pct >= 0 &&
                        a.memory_headroom_pct <= 50,
                    "--memory-headroom = ", a.memory_headroom_pct, " is out of range (0..50 %)");
  planner::SearchSpec spec;
  spec.base = base_config(a);
  spec.base.memory_headroom = a.memory_headroom_pct / 100.0;
  spec.ctx = build_context(a.ctx, a.cfg);
  spec.ctx.flex_backend_given = false;  // the search chooses the backend
  planner::apply_emitted_defaults(spec.base, spec.ctx);
  // Megatron-LM arguments are checked by Megatron-LM's rules unless --frontend says otherwise.
  if (a.emit == "mlm" && !flag_given(a.cfg, "--frontend")) spec.ctx.frontend = planner::Frontend::mlm;
  spec.fixed_layout = !a.layout.empty();
  if (!spec.fixed_layout) fix_given_settings(a, spec);
  spec.top_n = a.top;
  spec.threads = a.threads;
  spec.exhaustive = a.exhaustive;
  spec.progress = report::progress_callback(a.progress, "epo plan: candidates");
  const planner::SearchResult r = planner::search(spec);
  const bool emit_to_stdout = !a.emit.empty() && a.out.empty();
  if (r.top.empty()) {
    if (!emit_to_stdout) std::printf("%s", planner::format_search_report(spec, r).c_str());
    throw Error(ErrorKind::rejected, planner::infeasible_advice(r, spec), __FILE__, __LINE__);
  }
  if (!emit_to_stdout) std::printf("%s", planner::format_search_report(spec, r).c_str());
  const planner::Plan& w = r.top.front();
  model::check_prediction(w.pred);
  if (!a.html.empty())
    write_html_report(a.html, planner::emit_plan_json(w.cfg, prediction_json(w.cfg, w.pred),
                                                      search_json(spec, r)));
  if (a.emit.empty()) return 0;

  const auto errors = planner::validate_errors(w.cfg, spec.ctx);
  if (!errors.empty())
    throw EPO_RUNTIME_ERROR("internal: the chosen plan violates ", errors.front().id);
  std::string text;
  if (a.emit == "bridge") text = planner::emit_bridge(w.cfg, spec.ctx);
  else if (a.emit == "mlm")
    text = emit_mlm_with_model(w.cfg, spec.ctx);
  else if (a.emit == "env") text = planner::emit_env(w.cfg, spec.ctx);
  else
    text = planner::emit_plan_json(w.cfg, prediction_json(w.cfg, w.pred), search_json(spec, r))
               .dump(2) + "\n";
  if (a.out.empty()) {
    std::printf("%s", text.c_str());
  } else {
    model::write_text_file(a.out, text);
    std::printf("\nwrote the plan (%s) to %s\n", a.emit.c_str(), a.out.c_str());
  }
  return 0;
}

}  // namespace

void add_plan(CLI::App& app, Runner& run) {
  auto args = std::make_shared<PlanArgs>();
  auto* sub = app.add_subcommand(
      "plan", "search layouts, dispatcher and overlap options for the fastest plan that fits");
  add_config_flags(*sub, args->cfg);
  add_context_flags(*sub, args->ctx);
  sub->add_option("--layout", args->layout,
                  "fix the layout (tp=1,pp=1,vpp=1,cp=1,ep=16,etp=1,mbs=1) and choose only the "
                  "dispatcher, backend, overlap flags and comm SMs");
  sub->add_option("--top", args->top, "plans to list (default 10)");
  sub->add_option("--memory-headroom", args->memory_headroom_pct,
                  "percent of GPU memory a plan leaves free (default 5; 0 = fill to capacity)");
  sub->add_option("--threads", args->threads, "worker threads (0 = one per hardware thread)");
  sub->add_flag("--exhaustive", args->exhaustive,
                "evaluate every candidate before filtering (slow; the reference for the fast search)");
  sub->add_option("--emit", args->emit, "write the chosen plan: bridge|mlm|env|json");
  sub->add_option("--out", args->out, "file for --emit (written whole or not at all)");
  sub->add_option("--html", args->html, "also write the plan as an HTML page (epo report)");
  sub->add_flag("--progress", args->progress,
                "progress line on stderr even when it is not a terminal");
  sub->callback([&run, args] { run = [args] { return run_plan(*args); }; });
}

}  // namespace epo::cli
