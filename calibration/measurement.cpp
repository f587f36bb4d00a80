#include "calibration/measurement.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <tuple>

#include "model/config_io.hpp"
#include "model/cost.hpp"
#include "model/error.hpp"
#include "model/json_reader.hpp"
#include "model/limits.hpp"
#include "model/memory.hpp"
#include "model/prediction.hpp"
#include "model/simulate.hpp"

namespace epo::calib {

using model::JsonReader;

namespace {

constexpr model::OpKind kOpKinds[] = {
    model::OpKind::pre_dispatch, model::OpKind::dispatch,      model::OpKind::mlp,
    model::OpKind::combine,      model::OpKind::mlp_wgrad,     model::OpKind::pre_dispatch_wgrad,
    model::OpKind::mtp_post,     model::OpKind::embedding,     model::OpKind::lm_head_loss,
    model::OpKind::pp_send_recv, model::OpKind::dp_grad_reduce};

bool known_op(const std::string& name) {
  for (auto k : kOpKinds)
    if (name == model::to_string(k)) return true;
  return false;
}

/// A number within `range` (model/limits.hpp: measured times and bytes are finite and not
/// negative).
double number(const nlohmann::json& v, const std::string& where, const std::string& key,
              const model::RealRange& range) {
  if (!v.is_number()) {
    std::string shown = v.dump();
    if (shown.size() > 80) shown = shown.substr(0, 77) + "...";  // one short line
    throw EPO_INPUT_ERROR(where, ": key '", key, "' has value ", shown, ", expected a number");
  }
  const double x = v.get<double>();
  EPO_REQUIRE_INPUT(std::isfinite(x) && x >= range.min && x <= range.max, where, ": key '", key,
                    "' = ", x, " is out of range (allowed: ", range.min, "..", range.max, ")");
  return x;
}

constexpr const model::RealRange& kTime = model::limits::kMeasuredTimeUs;
constexpr const model::RealRange& kBytes = model::limits::kMeasuredBytes;

struct OpAccumulator {
  double sum = 0;
  int n = 0;
};

/// One record of the baseline schedule.
struct OpRecord {
  int rank, step, mb, layer;
  std::string op, dir;
  double start_us, end_us;
};

/// Sums of compute ops' mean duration over ranks and of their critical-path share (see
/// MeasuredRun::compute_phase_us), walking rank 0's records in time order.
void compute_phases(const std::vector<OpRecord>& recs, double& mean_us, double& phase_us) {
  using Key = std::tuple<int, int, int, std::string, std::string>;
  struct Op {
    double latest_end = 0, summed_us = 0;
    int ranks = 0;
  };
  auto key = [](const OpRecord& r) { return Key{r.step, r.mb, r.layer, r.op, r.dir}; };
  std::map<Key, Op> by_op;
  for (const auto& r : recs) {
    Op& e = by_op[key(r)];
    e.latest_end = std::max(e.latest_end, r.end_us);
    e.summed_us += r.end_us - r.start_us;
    ++e.ranks;
  }
  std::vector<const OpRecord*> first;
  for (const auto& r : recs)
    if (r.rank == 0) first.push_back(&r);
  std::sort(first.begin(), first.end(),
            [](const OpRecord* a, const OpRecord* b) { return a->start_us < b->start_us; });
  std::map<int, double> prev_end;  // per step
  mean_us = phase_us = 0;
  for (const OpRecord* r : first) {
    const Op& e = by_op[key(*r)];
    const auto it = prev_end.find(r->step);
    if (it != prev_end.end() && (r->op == "pre_dispatch" || r->op == "mlp")) {
      phase_us += e.latest_end - it->second;
      mean_us += e.summed_us / e.ranks;
    }
    prev_end[r->step] = e.latest_end;
  }
}

}  // namespace

MeasuredRun measurement_from_json(const nlohmann::json& j, const std::string& where) {
  JsonReader r(j, where);
  r.require_int("schema_version", 1, MeasuredRun::kSchemaVersion);
  const std::string kind = r.require_string("kind");
  if (kind != "measurement")
    throw EPO_INPUT_ERROR(where, ": kind = '", kind,
                          "': expected 'measurement' (from epo run --json)");
  MeasuredRun m;
  m.file = where;
  if (r.has("context")) m.context = r.member("context");
  if (r.has("prediction")) r.member("prediction");  // what epo run predicted; recomputed here
  m.config = model::config_from_json(r.member("config"), where + " (config)");
  // Measurements older than the expert_gemm option ran one GEMM per expert.
  const auto& cfg_js = r.member("config");
  if (cfg_js.contains("options") && !cfg_js["options"].contains("expert_gemm"))
    m.config.opt.expert_gemm = model::ExpertGemm::per_expert;
  m.config.derive_and_check();
  // Measurements older than auto's four streams (no run.expert_gemm_path) ran one GEMM per
  // expert where auto now takes the four streams.
  const bool has_path =
      r.has("run") && r.member("run").is_object() && r.member("run").contains("expert_gemm_path");
  if (!has_path && m.config.opt.expert_gemm == model::ExpertGemm::automatic &&
      model::expert_gemm_path(m.config) == model::ExpertGemm::streams)
    m.config.opt.expert_gemm = model::ExpertGemm::per_expert;
  if (r.has("run")) {
    m.run = r.member("run");
    if (!m.run.is_object()) throw EPO_INPUT_ERROR(where, ": run: expected an object");
    if (m.run.contains("layers")) {
      const double layers =
          number(m.run["layers"], where, "run.layers",
                 {"layers", "", 0, static_cast<double>(m.config.model.num_layers)});
      EPO_REQUIRE_INPUT(layers >= 0 && layers <= m.config.model.num_layers, where,
                        ": run.layers = ", layers, " is out of range (0 .. ",
                        m.config.model.num_layers, ")");
      m.layers = static_cast<int>(layers);
    }
  }

  // Ops: per-op means from the baseline schedule (ops alone) when it was run.
  std::map<std::string, OpAccumulator> base_acc, all_acc;
  std::vector<OpRecord> baseline;
  if (r.has("ops")) {
    const auto& ops = r.member("ops");
    if (!ops.is_array()) throw EPO_INPUT_ERROR(where, ": ops: expected an array");
    for (size_t i = 0; i < ops.size(); ++i) {
      JsonReader o(ops[i], where, "ops[" + std::to_string(i) + "]");
      const int rank = static_cast<int>(o.require_int("rank", 0));
      const int step = static_cast<int>(o.require_int("step", 0));
      const std::string schedule = o.require_string("schedule");
      const std::string op = o.require_string("op");
      const std::string dir = o.require_string("direction");
      const int mb = static_cast<int>(o.require_int("mb", -1));
      const int layer = static_cast<int>(o.require_int("layer", -1));
      o.require_string("stream");
      const double start = o.require_double("start_us", kTime.min, kTime.max);
      const double end = o.require_double("end_us", start, kTime.max);
      o.finish();
      if (schedule != "baseline" && schedule != "overlapped")
        throw EPO_INPUT_ERROR(where, ": ", o.key_path("schedule"), " = '", schedule,
                              "': expected baseline or overlapped");
      if (!known_op(op))
        throw EPO_INPUT_ERROR(where, ": ", o.key_path("op"), " = '", op,
                              "': not an op of the schedule");
      const std::string key = op + "/" + dir;
      if (schedule == "baseline") baseline.push_back({rank, step, mb, layer, op, dir, start, end});
      auto& a = schedule == "baseline" ? base_acc[key] : all_acc[key];
      a.sum += end - start;
      a.n += 1;
    }
  }

  JsonReader s = r.object("summary");
  // The summary belongs to the executor and gains figures over time: read what the report uses.
  m.step_time_us = s.require_double("step_time_us", kTime.min, kTime.max);
  m.baseline_step_time_us = s.get_double("baseline_step_time_us", 0, kTime.min, kTime.max);
  // The gain (baseline - overlapped) / baseline: below 1, negative when overlap lost time.
  m.overlap_gain = s.get_double("overlap_gain", 0, -1e3, 1);
  m.exposed_comm_us = s.get_double("exposed_comm_us", 0, kTime.min, kTime.max);
  m.baseline_exposed_comm_us = s.get_double("baseline_exposed_comm_us", 0, kTime.min, kTime.max);
  const nlohmann::json& summary = j.at("summary");
  if (summary.contains("peak_memory_bytes")) {
    const auto& pm = summary["peak_memory_bytes"];
    if (pm.is_array()) {
      for (const auto& v : pm)
        m.peak_memory_bytes =
            std::max(m.peak_memory_bytes, number(v, where, "summary.peak_memory_bytes[]", kBytes));
    } else {
      m.peak_memory_bytes = number(pm, where, "summary.peak_memory_bytes", kBytes);
    }
  }
  m.ops_from_baseline = !base_acc.empty();
  if (m.ops_from_baseline) {
    for (const auto& [k, a] : base_acc) m.op_mean_us[k] = a.sum / a.n;
  } else if (summary.contains("op_mean_us") && summary["op_mean_us"].is_object()) {
    for (const auto& it : summary["op_mean_us"].items())
      m.op_mean_us[it.key()] = number(it.value(), where, "summary.op_mean_us." + it.key(), kTime);
  } else {
    for (const auto& [k, a] : all_acc) m.op_mean_us[k] = a.sum / a.n;
  }
  compute_phases(baseline, m.compute_mean_us, m.compute_phase_us);
  if (m.baseline_step_time_us <= 0 && !m.config.opt.overlap_moe_expert_parallel_comm)
    m.baseline_step_time_us = m.step_time_us;
  r.finish();
  return m;
}

MeasuredRun load_measurement_file(const std::string& path) {
  return measurement_from_json(model::read_json_file(path), path);
}

model::Config measured_config(const MeasuredRun& m, const model::HardwareProfile& hw) {
  model::Config c = m.config;
  c.hw = hw;
  c.hardware_name = hw.name;
  if (m.layers > 0) {
    c.model.num_layers = m.layers;
    c.model.first_k_dense_layers = std::min(c.model.first_k_dense_layers, m.layers);
  }
  // The executor runs decoder layers only (no MTP).
  c.model.mtp_num_layers = 0;
  // The executor's LM head and embedding are seeded stand-ins, not the model's.
  c.model.vocab_size = 1;
  c.derive_and_check();
  return c;
}

model::Config measured_ops_config(const MeasuredRun& m, const model::HardwareProfile& hw) {
  const model::Config c = measured_config(m, hw);
  return m.ops_from_baseline ? model::baseline_config(c) : c;
}

RunPrediction predict_measured(const MeasuredRun& m, const model::HardwareProfile& hw) {
  const model::Config c = measured_config(m, hw);
  // What model::predict() does, with each cost table computed once: the configured schedule's
  // and, with the overlap on, its baseline's (whose ops the baseline records hold: overlap
  // options off, so a backward op holds its weight gradient even where the configured schedule
  // delays it).
  const bool overlap = c.opt.overlap_moe_expert_parallel_comm;
  model::StepCosts run_costs = model::compute_step_costs(c);
  model::StepCosts base_costs =
      overlap ? model::compute_step_costs(model::baseline_config(c)) : run_costs;
  RunPrediction out;
  const model::StepCosts& ops_costs = m.ops_from_baseline ? base_costs : run_costs;
  const auto& layer = c.model.num_experts > 0 ? ops_costs.moe_layer : ops_costs.dense_layer;
  for (const auto& op : layer.ops)
    if (op.duration_ns > 0)
      out.op_mean_us[std::string(model::to_string(op.kind)) + "/" + model::to_string(op.dir)] =
          op.duration_us();
  // The steps are simulated without what the prediction still holds of the stand-in stages (a
  // vocabulary of 1 still launches their kernels): those ops cost nothing (taking their
  // durations off the simulated step would also take off what the host's head start hid of
  // them). A decoder-only prediction has none of the model's: on virtual ranks it counts the
  // executor's own stand-ins, which the measurement holds too.
  if (!c.decoder_only) {
    for (model::StepCosts* sc : {&run_costs, &base_costs})
      for (model::OpCost* op :
           {&sc->embedding_fwd, &sc->embedding_bwd, &sc->lm_head_fwd, &sc->lm_head_bwd}) {
        op->duration_ns = op->host_ns = op->device_ns = 0;
        op->parts.clear();
      }
  }
  model::SimOptions o;
  o.keep_timings = false;
  const model::SimResult r = model::simulate_step(c, run_costs, base_costs, o);
  out.step_time_us = us_from_ns(r.run.step_ns);
  out.baseline_step_time_us = us_from_ns(r.baseline.step_ns);
  out.overlap_gain =
      out.step_time_us > 0 ? out.baseline_step_time_us / out.step_time_us - 1.0 : 0.0;
  out.exposed_comm_us = us_from_ns(r.run.exposed_ep_comm_ns);
  out.baseline_exposed_comm_us = us_from_ns(r.baseline.exposed_ep_comm_ns);
  const model::MemoryBreakdown memory = model::estimate_memory(c, r.microbatches_in_flight);
  // Like with like: the executor reports the arena it allocated (weights, gradients, activation
  // slots, transport buffers). It keeps no optimizer states, and the CUDA context, NCCL and
  // cuBLAS workspaces lie outside the arena, so those terms of the Megatron model are left out.
  out.peak_memory_bytes =
      std::max(0.0, memory.total_bytes - memory.optimizer_bytes - memory.framework_overhead_bytes);
  return out;
}

std::string run_label(const MeasuredRun& m) {
  const auto& c = m.config;
  std::ostringstream os;
  os << c.model_name << " r" << (c.virtual_ranks > 0 ? c.virtual_ranks : c.num_gpus)
     << (c.virtual_ranks > 0 ? "v " : " ") << model::to_string(c.opt.dispatcher);
  if (c.opt.dispatcher == model::Dispatcher::flex)
    os << "/" << model::to_string(c.opt.flex_backend);
  os << (c.opt.overlap_moe_expert_parallel_comm ? " ovl" : " base");
  if (c.opt.delay_wgrad_compute) os << "+dw";
  os << " seq" << c.par.seq_length << " " << model::to_string(c.opt.routing.kind);
  if (m.layers > 0) os << " L" << m.layers;
  return os.str();
}

namespace {

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<MeasuredRun> merge_repeats(const std::vector<MeasuredRun>& runs) {
  std::vector<std::string> keys;
  std::map<std::string, std::vector<const MeasuredRun*>> groups;
  for (const auto& r : runs) {
    nlohmann::json run = r.run;
    const std::string key = model::to_json(r.config).dump() + run.dump();
    if (!groups.count(key)) keys.push_back(key);
    groups[key].push_back(&r);
  }
  std::vector<MeasuredRun> out;
  for (const auto& key : keys) {
    const auto& g = groups[key];
    MeasuredRun m = *g.front();
    if (g.size() > 1) {
      auto med = [&](auto field) {
        std::vector<double> v;
        for (const MeasuredRun* r : g) v.push_back(field(*r));
        return median_of(v);
      };
      m.step_time_us = med([](const MeasuredRun& r) { return r.step_time_us; });
      m.baseline_step_time_us = med([](const MeasuredRun& r) { return r.baseline_step_time_us; });
      m.overlap_gain = med([](const MeasuredRun& r) { return r.overlap_gain; });
      m.compute_mean_us = med([](const MeasuredRun& r) { return r.compute_mean_us; });
      m.compute_phase_us = med([](const MeasuredRun& r) { return r.compute_phase_us; });
      m.exposed_comm_us = med([](const MeasuredRun& r) { return r.exposed_comm_us; });
      m.baseline_exposed_comm_us =
          med([](const MeasuredRun& r) { return r.baseline_exposed_comm_us; });
      for (auto& [op, us] : m.op_mean_us)
        us = med([&op = op](const MeasuredRun& r) {
          const auto it = r.op_mean_us.find(op);
          return it == r.op_mean_us.end() ? 0.0 : it->second;
        });
      double lo = g.front()->step_time_us, hi = lo;
      for (const MeasuredRun* r : g) {
        m.peak_memory_bytes = std::max(m.peak_memory_bytes, r->peak_memory_bytes);
        lo = std::min(lo, r->step_time_us);
        hi = std::max(hi, r->step_time_us);
      }
      m.repeats = static_cast<int>(g.size());
      m.step_spread = lo > 0 ? hi / lo - 1.0 : 0.0;
      m.file += " (+" + std::to_string(g.size() - 1) + " repeats)";
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace epo::calib
