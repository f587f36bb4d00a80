// Published runs: reading, mapping to a Config, predicting, comparing.
#include "calibration/published.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>

#include "calibration/published_mlm.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/memory.hpp"
#include "model/prediction.hpp"
#include "model/units.hpp"

namespace epo::calib {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

bool contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

/// A published number: plain, or a string whose leading part is the number ("475[^note]").
double number_of(const nlohmann::json& j) {
  if (j.is_number()) return j.get<double>();
  if (j.is_string()) {
    const std::string s = j.get<std::string>();
    char* end = nullptr;
    const double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str()) return v;
  }
  return kNaN;
}

double num_field(const nlohmann::json& j, const char* key) {
  return j.contains(key) && !j[key].is_null() ? number_of(j[key]) : kNaN;
}

int int_field(const nlohmann::json& j, const char* key, int fallback) {
  const double v = num_field(j, key);
  return std::isfinite(v) ? static_cast<int>(v) : fallback;
}

std::string str_field(const nlohmann::json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
}

/// The model preset a published model label names ("" when EPO has none).
std::string preset_for_model(const std::string& label, std::string* why) {
  const std::string l = lower(label);
  struct Known { const char* needle; const char* preset; };
  // Architectures EPO cannot express: say so instead of approximating them.
  for (const char* hybrid : {"nemotron", "qwen3-next", "deepseek-v4"}) {
    if (contains(l, hybrid)) {
      *why = std::string("architecture not modelled: ") +
             (contains(l, "nemotron") ? "hybrid Mamba + attention + MoE layers"
              : contains(l, "qwen3-next") ? "gated delta-net linear attention layers"
                                          : "DeepSeek-V4 attention (compressed sparse attention)");
      return "";
    }
  }
  static const Known kKnown[] = {
      {"deepseek-v3", "deepseek-v3"}, {"deepseekv3", "deepseek-v3"},
      {"qwen3-30b-a3b", "qwen3-30b-a3b"}, {"qwen3-235b-a22b", "qwen3-235b-a22b"},
      {"kimi-k2", "kimi-k2"}, {"moonlight-16b", "moonlight-16b-a3b"},
      {"mixtral-8x7b", "mixtral-8x7b"}, {"mixtral-8x22b", "mixtral-8x22b"},
      {"qwen2-57b-a14b", "qwen2-57b-a14b"}, {"gpt-oss-120b", "gpt-oss-120b"},
  };
  for (const auto& k : kKnown) {
    if (!contains(l, k.needle)) continue;
    const auto presets = model::list_model_presets();
    if (std::find(presets.begin(), presets.end(), k.preset) != presets.end()) return k.preset;
    *why = std::string("no model preset '") + k.preset + "' for " + label;
    return "";
  }
  *why = "no model preset for " + label;
  return "";
}

void set_recompute(model::Options& o, const nlohmann::json& rc) {
  if (!rc.is_object()) return;
  const std::string g = str_field(rc, "granularity");
  if (g == "selective") o.recompute_granularity = model::RecomputeGranularity::selective;
  if (g == "full") o.recompute_granularity = model::RecomputeGranularity::full;
  if (rc.contains("modules") && rc["modules"].is_array())
    for (const auto& m : rc["modules"])
      if (m.is_string()) o.recompute_modules.push_back(m.get<std::string>());
  o.recompute_method = str_field(rc, "method");
  o.recompute_num_layers = int_field(rc, "num_layers", 0);
}

void set_cuda_graph(model::Options& o, const nlohmann::json& cg) {
  if (!cg.is_object()) return;
  const std::string impl = lower(str_field(cg, "impl"));
  if (impl.rfind("transformer_engine", 0) == 0) o.cuda_graph_impl = model::CudaGraphImpl::transformer_engine;
  else if (impl.rfind("full_iteration", 0) == 0) o.cuda_graph_impl = model::CudaGraphImpl::full_iteration;
  else if (impl.rfind("local", 0) == 0) o.cuda_graph_impl = model::CudaGraphImpl::local;
  if (cg.contains("scope") && cg["scope"].is_array())
    for (const auto& s : cg["scope"])
      if (s.is_string()) o.cuda_graph_modules.push_back(s.get<std::string>());
}

}  // namespace

RunFigures::RunFigures()
    : tflops_per_gpu(kNaN), tokens_per_s_per_gpu(kNaN), step_time_s(kNaN), peak_memory_gb(kNaN) {}

ComparedRow::ComparedRow() : error_pct(kNaN) {}

std::string ClusterMap::cluster_for(const std::string& system) {
  const std::string s = lower(system);
  if (contains(s, "gb300")) return "gb300-nvl72";
  if (contains(s, "gb200")) return "gb200-nvl72";
  if (contains(s, "b300")) return "dgx-b300";
  if (contains(s, "b200")) return "dgx-b200";
  if (contains(s, "h100")) return "dgx-h100";
  if (contains(s, "h200")) return "dgx-h200";
  return "";
}

std::string ClusterMap::gpu_preset_for(const std::string& cluster) {
  static const std::map<std::string, std::string> kGpu = {
      {"dgx-h100", "h100-sxm"}, {"dgx-h200", "h200-sxm"}, {"dgx-b200", "b200"},
      {"dgx-b300", "b300"},     {"gb200-nvl72", "gb200"},
      {"gb300-nvl72", "gb300"}};
  auto g = kGpu.find(cluster);
  return g != kGpu.end() ? g->second : cluster;
}

model::HardwareProfile ClusterMap::profile(const std::string& cluster) const {
  auto it = profiles.find(cluster);
  if (it != profiles.end()) return it->second;
  const auto known = model::list_hardware_presets();
  auto have = [&](const std::string& n) { return std::find(known.begin(), known.end(), n) != known.end(); };
  if (!datasheet_only && have(cluster)) {
    model::HardwareProfile hw = model::load_hardware_preset(cluster);
    if (hw.calibrated) return hw;
  }
  // No fitted cluster description: the GPU's datasheet preset under the cluster's name.
  const std::string gpu = gpu_preset_for(cluster);
  model::HardwareProfile hw = model::load_hardware_preset(have(gpu) ? gpu : cluster);
  return hw;
}

bool Split::held_out(const PublishedRow& r) const {
  return std::find(held_out_models.begin(), held_out_models.end(), r.model_preset) !=
         held_out_models.end();
}

PublishedRow map_published_row(const nlohmann::json& j, const ClusterMap& clusters) {
  if (j.contains("args") && j["args"].is_object()) return map_mlm_ci_row(j, clusters);
  PublishedRow r;
  r.id = str_field(j, "id");
  r.model = str_field(j, "model");
  r.system = str_field(j, "system");
  r.precision = str_field(j, "precision");
  r.status = str_field(j, "status");
  r.source_type = str_field(j, "source_type");
  r.release = str_field(j, "release");
  r.published.tflops_per_gpu = num_field(j, "tflops_per_gpu");
  r.published.tokens_per_s_per_gpu = num_field(j, "tokens_per_s_per_gpu");
  r.published.step_time_s = num_field(j, "step_time_s");
  r.published.peak_memory_gb = num_field(j, "memory_gb");
  const nlohmann::json os = j.contains("other_settings") && j["other_settings"].is_object()
                                ? j["other_settings"]
                                : nlohmann::json::object();
  if (contains(str_field(os, "memory_note"), "GiB"))
    r.published.peak_memory_gb *= 1.073741824;
  if (r.status == "failed-OOM") r.published.fits = 0;
  else if (std::isfinite(r.published.peak_memory_gb) || std::isfinite(r.published.tflops_per_gpu))
    r.published.fits = 1;

  auto reject = [&](std::string why) {
    r.unsupported = std::move(why);
    return r;
  };
  std::string why;
  r.model_preset = preset_for_model(r.model, &why);
  r.cluster = ClusterMap::cluster_for(r.system);
  if (r.model_preset.empty()) return reject(why);
  if (r.cluster.empty()) return reject("system not published or not known: '" + r.system + "'");
  for (const char* key : {"gpus", "seq", "gbs", "tp", "pp", "ep"})
    if (!std::isfinite(num_field(j, key)))
      return reject(std::string("configuration not published (") + key + " missing)");
  if (int_field(j, "fsdp", 0) > 0) return reject("Megatron-FSDP runs are not modelled");
  const std::string prec = lower(r.precision);
  if (contains(prec, "fp4")) return reject("NVFP4 precision is not modelled");
  if (str_field(j, "phase") != "" && str_field(j, "phase") != "pretrain")
    return reject("phase '" + str_field(j, "phase") + "' (only pretraining is modelled)");

  model::Config c;
  try {
    c.model_name = r.model_preset;
    c.model = model::load_model_preset(r.model_preset);
    c.hardware_name = r.cluster;
    c.hw = clusters.profile(r.cluster);
  } catch (const Error& e) {
    return reject(e.what());
  }
  c.num_gpus = int_field(j, "gpus", 0);
  auto& p = c.par;
  p.tp = int_field(j, "tp", 1);
  p.pp = int_field(j, "pp", 1);
  p.vpp = std::max(1, int_field(j, "vp", 1));
  p.cp = std::max(1, int_field(j, "cp", 1));
  p.ep = int_field(j, "ep", 1);
  p.etp = std::max(1, int_field(j, "etp", 1));
  p.seq_length = int_field(j, "seq", 4096);
  p.global_batch_size = int_field(j, "gbs", 0);
  p.micro_batch_size = int_field(j, "mbs", 0);
  if (p.micro_batch_size <= 0) {
    p.micro_batch_size = 1;
    r.assumptions.push_back("micro-batch size 1 (not published)");
  }
  p.sequence_parallel = p.tp > 1;  // Megatron-Bridge's MoE recipes turn it on with TP
  auto& o = c.opt;
  o.precision = prec.empty() || contains(prec, "bf16") ? model::Precision::bf16
                                                       : model::Precision::fp8;
  if (prec.empty()) r.assumptions.push_back("precision BF16 (not published)");
  const std::string disp = str_field(j, "dispatcher");
  if (disp == "flex") {
    o.dispatcher = model::Dispatcher::flex;
    o.flex_backend = str_field(j, "flex_backend") == "hybridep" ? model::FlexBackend::hybridep
                                                                : model::FlexBackend::deepep;
  } else if (disp == "allgather") {
    o.dispatcher = model::Dispatcher::allgather;
  } else {
    o.dispatcher = model::Dispatcher::alltoall;
    if (disp.empty()) r.assumptions.push_back("dispatcher alltoall (not resolved)");
  }
  o.overlap_moe_expert_parallel_comm =
      j.contains("overlap_moe_expert_parallel_comm") && j["overlap_moe_expert_parallel_comm"].is_boolean() &&
      j["overlap_moe_expert_parallel_comm"].get<bool>();
  o.delay_wgrad_compute = j.contains("delay_wgrad_compute") && j["delay_wgrad_compute"].is_boolean() &&
                          j["delay_wgrad_compute"].get<bool>();
  if (j.contains("recompute")) set_recompute(o, j["recompute"]);
  if (j.contains("cuda_graph")) set_cuda_graph(o, j["cuda_graph"]);
  const double cdmc = num_field(os, "CUDA_DEVICE_MAX_CONNECTIONS");
  if (std::isfinite(cdmc) && cdmc >= 1) o.cuda_device_max_connections = static_cast<int>(cdmc);
  const double cap = num_field(os, "moe_expert_capacity_factor");
  if (std::isfinite(cap) && cap > 0) o.capacity_factor = cap;
  const double mtp = num_field(os, "mtp_num_layers");
  if (std::isfinite(mtp) && mtp >= 0) c.model.mtp_num_layers = static_cast<int>(mtp);
  const double hsms = num_field(os, "moe_hybridep_num_sms");
  if (o.dispatcher == model::Dispatcher::flex && o.flex_backend == model::FlexBackend::hybridep &&
      std::isfinite(hsms) && hsms > 0)
    o.comm_sms = static_cast<int>(hsms);
  if (os.contains("moe_router_force_load_balancing") && os["moe_router_force_load_balancing"].is_boolean() &&
      os["moe_router_force_load_balancing"].get<bool>())
    o.routing.kind = model::RoutingKind::balanced;
  if (contains(lower(r.id), "forced-balance")) o.routing.kind = model::RoutingKind::balanced;
  if (os.contains("moe_shared_expert_overlap") && os["moe_shared_expert_overlap"].is_boolean())
    o.moe_shared_expert_overlap = os["moe_shared_expert_overlap"].get<bool>();
  // What the Megatron-Bridge recipes set for memory: bf16 gradient buffers in the performance
  // recipes; bf16 Adam moments in DeepSeek-V3's and Moonlight's.
  if (r.source_type.rfind("megatron-bridge", 0) == 0) {
    o.grad_reduce_in_fp32 = false;
    if (r.model_preset == "deepseek-v3" || r.model_preset == "moonlight-16b-a3b")
      o.adam_moments_bf16 = true;
  }
  // The recipe's pipeline layout ("Et*4|(t*4|)*14tmL (note)": the string before the note).
  std::string layout = str_field(os, "pipeline_layout");
  layout = layout.substr(0, layout.find(' '));
  if (!layout.empty() && layout != "null") {
    model::Config with_layout = c;
    with_layout.par.pipeline_layout = layout;
    try {
      with_layout.derive_and_check();
      (void)model::estimate_memory(with_layout, -1);  // places the layers: checks the layout
      c = with_layout;
    } catch (const Error&) {
      r.assumptions.push_back("pipeline layout '" + layout + "' not accepted; even split");
    }
  }
  try {
    c.derive_and_check();
  } catch (const Error& e) {
    return reject(std::string("layout not accepted: ") + e.what());
  }
  r.config = c;
  return r;
}

std::vector<PublishedRow> load_published_runs(const std::string& path, const ClusterMap& clusters) {
  std::ifstream in(path);
  EPO_REQUIRE_INPUT(in.good(), path, ": cannot open the published-runs file");
  std::vector<PublishedRow> rows;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw EPO_INPUT_ERROR(path, ":", n, ": not a JSON object (", e.what(), ")");
    }
    EPO_REQUIRE_INPUT(j.is_object(), path, ":", n, ": not a JSON object");
    PublishedRow r = map_published_row(j, clusters);
    if (r.id.empty()) r.id = path + ":" + std::to_string(n);
    rows.push_back(std::move(r));
  }
  return rows;
}

ErrorStats error_stats(const std::vector<double>& signed_pct) {
  ErrorStats s;
  std::vector<double> a;
  double sum = 0;
  for (double x : signed_pct) {
    if (!std::isfinite(x)) continue;
    a.push_back(std::fabs(x));
    sum += x;
  }
  s.n = static_cast<int>(a.size());
  if (a.empty()) return s;
  std::sort(a.begin(), a.end());
  auto quantile = [&](double q) {
    const double pos = q * (a.size() - 1);
    const size_t lo = static_cast<size_t>(pos);
    const size_t hi = std::min(a.size() - 1, lo + 1);
    return a[lo] + (a[hi] - a[lo]) * (pos - lo);
  };
  s.median_abs_pct = quantile(0.5);
  s.p90_abs_pct = quantile(0.9);
  s.mean_signed_pct = sum / a.size();
  return s;
}

namespace {

/// The settings an A/B pair may differ in, each as a printable value of the row's config.
std::vector<std::pair<std::string, std::string>> settings_of(const model::Config& c) {
  const auto& o = c.opt;
  const auto& p = c.par;
  std::string rc = model::to_string(o.recompute_granularity);
  for (const auto& m : o.recompute_modules) rc += "," + m;
  std::string graphs = model::to_string(o.cuda_graph_impl);
  for (const auto& m : o.cuda_graph_modules) graphs += "," + m;
  std::string disp = model::to_string(o.dispatcher);
  if (o.dispatcher == model::Dispatcher::flex) disp += std::string("/") + model::to_string(o.flex_backend);
  return {{"overlap", std::to_string(o.overlap_moe_expert_parallel_comm) + std::to_string(o.delay_wgrad_compute)},
          {"dispatcher", disp},
          {"recompute", rc},
          {"cuda graphs", graphs},
          {"routing", model::to_string(o.routing.kind)},
          {"micro-batch", std::to_string(p.micro_batch_size)},
          {"global batch", std::to_string(p.global_batch_size)},
          {"layout", std::to_string(p.tp) + "/" + std::to_string(p.pp) + "/" + std::to_string(p.vpp) +
                         "/" + std::to_string(p.cp) + "/" + std::to_string(p.ep)}};
}

}  // namespace

std::vector<AbPair> find_ab_pairs(const PublishedReport& rep) {
  std::vector<AbPair> pairs;
  for (size_t i = 0; i < rep.rows.size(); ++i) {
    const ComparedRow& a = rep.rows[i];
    if (!a.row->config || a.row->status != "current" || a.metric != "tflops_per_gpu") continue;
    for (size_t k = i + 1; k < rep.rows.size(); ++k) {
      const ComparedRow& b = rep.rows[k];
      if (!b.row->config || b.row->status != "current" || b.metric != "tflops_per_gpu") continue;
      const PublishedRow &ra = *a.row, &rb = *b.row;
      const model::Config &ca = *ra.config, &cb = *rb.config;
      if (ra.model_preset != rb.model_preset || ra.cluster != rb.cluster ||
          ra.release != rb.release || ra.source_type != rb.source_type ||
          ca.num_gpus != cb.num_gpus || ca.par.seq_length != cb.par.seq_length ||
          ca.opt.precision != cb.opt.precision || lower(ra.precision) != lower(rb.precision))
        continue;
      const auto sa = settings_of(ca), sb = settings_of(cb);
      int differ = 0;
      std::string what;
      for (size_t s = 0; s < sa.size(); ++s)
        if (sa[s].second != sb[s].second) {
          ++differ;
          what = sa[s].first;
        }
      if (differ != 1) continue;
      AbPair p;
      p.a = static_cast<int>(i);
      p.b = static_cast<int>(k);
      p.setting = what;
      p.published_change_pct = (rb.published.tflops_per_gpu / ra.published.tflops_per_gpu - 1) * 100;
      p.predicted_change_pct = (b.predicted.tflops_per_gpu / a.predicted.tflops_per_gpu - 1) * 100;
      pairs.push_back(p);
    }
  }
  return pairs;
}

std::vector<AbPair> load_ab_pairs(const std::string& path, const PublishedReport& rep,
                                  int* unmatched) {
  std::ifstream in(path);
  EPO_REQUIRE_INPUT(in.good(), path, ": cannot open the pairs file");
  std::map<std::string, int> by_id;
  for (size_t i = 0; i < rep.rows.size(); ++i) by_id[rep.rows[i].row->id] = static_cast<int>(i);
  std::vector<AbPair> pairs;
  std::string line;
  int n = 0;
  *unmatched = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw EPO_INPUT_ERROR(path, ":", n, ": not a JSON object (", e.what(), ")");
    }
    const auto a = by_id.find(str_field(j, "a_id")), b = by_id.find(str_field(j, "b_id"));
    const double ta = num_field(j, "a_iteration_time_s_median"),
                 tb = num_field(j, "b_iteration_time_s_median");
    if (a == by_id.end() || b == by_id.end() || !rep.rows[a->second].row->config ||
        !rep.rows[b->second].row->config || !(ta > 0) || !(tb > 0)) {
      ++*unmatched;
      continue;
    }
    AbPair p;
    p.a = a->second;
    p.b = b->second;
    p.setting = str_field(j, "pair_type");
    // Step time of b against a, as a throughput change (a shorter step is a gain).
    p.published_change_pct = (ta / tb - 1) * 100;
    p.predicted_change_pct =
        (rep.rows[p.a].predicted.step_time_s / rep.rows[p.b].predicted.step_time_s - 1) * 100;
    pairs.push_back(p);
  }
  return pairs;
}

PublishedReport compare_published(const std::vector<PublishedRow>& rows, const Split& split,
                                  bool fast) {
  PublishedReport rep;
  std::map<std::string, std::vector<double>> groups;
  for (const auto& r : rows) {
    ComparedRow c;
    c.row = &r;
    if (!r.config) {
      ++rep.unsupported;
      rep.rows.push_back(c);
      continue;
    }
    const model::Config& cfg = *r.config;
    const model::Prediction pr =
        model::predict(cfg, fast ? model::PredictMode::fast : model::PredictMode::full);
    c.predicted.tflops_per_gpu = pr.model_tflops_per_gpu;
    c.predicted.tokens_per_s_per_gpu = pr.tokens_per_s_per_gpu;
    c.predicted.step_time_s = pr.step_time_us * 1e-6;
    // Published peaks are PyTorch's max_memory_allocated: compare what the model says is
    // allocated; whether it fits is decided on the total with the allocator's reserve.
    c.predicted.peak_memory_gb = pr.memory.allocated_bytes / 1e9;
    c.predicted.fits = pr.memory.fits ? 1 : 0;
    const RunFigures& pub = r.published;
    if (std::isfinite(pub.tflops_per_gpu) && pub.tflops_per_gpu > 0) {
      c.metric = "tflops_per_gpu";
      c.error_pct = (c.predicted.tflops_per_gpu / pub.tflops_per_gpu - 1) * 100;
    } else if (std::isfinite(pub.tokens_per_s_per_gpu) && pub.tokens_per_s_per_gpu > 0) {
      c.metric = "tokens_per_s_per_gpu";
      c.error_pct = (c.predicted.tokens_per_s_per_gpu / pub.tokens_per_s_per_gpu - 1) * 100;
    } else if (std::isfinite(pub.step_time_s) && pub.step_time_s > 0) {
      c.metric = "step_time_s";
      c.error_pct = (c.predicted.step_time_s / pub.step_time_s - 1) * 100;
    }
    if (pub.fits >= 0) {
      ++rep.memory_checked;
      if (pub.fits == c.predicted.fits) ++rep.memory_right;
    }
    // Only rows a fit can use (current, a published TFLOP/s/GPU, a model not held out) count as
    // "fit"; Megatron-LM CI rows (step time only) are reported as their own group.
    if (split.active()) {
      const bool fittable = r.status == "current" && c.metric == "tflops_per_gpu";
      c.split = r.source_type == "megatron-lm-ci"        ? "ci"
                : split.held_out(r) || !fittable ? "held-out"
                                                         : "fit";
    }
    if (std::isfinite(c.error_pct) && r.status != "failed-OOM") {
      const bool current = r.status != "superseded";
      const std::string status = current ? "" : "superseded:";
      groups[status + "all"].push_back(c.error_pct);
      if (current) {
        groups["cluster:" + r.cluster].push_back(c.error_pct);
        groups["model:" + r.model_preset].push_back(c.error_pct);
        if (!c.split.empty()) {
          groups[c.split].push_back(c.error_pct);
          groups[c.split + ":cluster:" + r.cluster].push_back(c.error_pct);
        }
      }
    }
    rep.rows.push_back(c);
  }
  for (const auto& [k, v] : groups) rep.by_group[k] = error_stats(v);
  rep.pairs = find_ab_pairs(rep);
  return rep;
}

namespace {

std::string fmt(double v, const char* f = "%.1f") {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

nlohmann::json num_or_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json figures_json(const RunFigures& f) {
  return {{"tflops_per_gpu", num_or_null(f.tflops_per_gpu)},
          {"tokens_per_s_per_gpu", num_or_null(f.tokens_per_s_per_gpu)},
          {"step_time_s", num_or_null(f.step_time_s)},
          {"peak_memory_gb", num_or_null(f.peak_memory_gb)},
          {"fits", f.fits < 0 ? nlohmann::json() : nlohmann::json(f.fits == 1)}};
}

}  // namespace

std::string published_report_text(const PublishedReport& rep) {
  std::ostringstream os;
  char line[512];
  std::snprintf(line, sizeof line, "%-66s %-12s %5s %8s %8s %7s %7s %7s %4s %s\n", "# id", "cluster",
                "gpus", "pub_tf", "pred_tf", "err_%", "pub_GB", "pred_GB", "fit", "split");
  os << line;
  for (const auto& c : rep.rows) {
    const PublishedRow& r = *c.row;
    if (!r.config) continue;
    const std::string pub = c.metric == "tflops_per_gpu" ? fmt(r.published.tflops_per_gpu)
                            : c.metric.empty()          ? "-"
                                                        : fmt(NAN);
    std::snprintf(line, sizeof line, "%-66.66s %-12s %5d %8s %8s %7s %7s %7s %4s %s%s\n",
                  r.id.c_str(), r.cluster.c_str(), r.config->num_gpus, pub.c_str(),
                  fmt(c.predicted.tflops_per_gpu).c_str(), fmt(c.error_pct, "%+.1f").c_str(),
                  fmt(r.published.peak_memory_gb).c_str(), fmt(c.predicted.peak_memory_gb).c_str(),
                  c.predicted.fits ? "yes" : "NO", c.split.c_str(),
                  r.status == "current" || r.status.empty() ? "" : (" [" + r.status + "]").c_str());
    os << line;
  }
  os << "\n# rows not modelled\n";
  for (const auto& c : rep.rows)
    if (!c.row->config) os << "  " << c.row->id << ": " << c.row->unsupported << "\n";
  os << "\n# error of TFLOP/s/GPU (else tokens/s/GPU, else step time), current rows\n";
  std::snprintf(line, sizeof line, "%-34s %4s %10s %8s %10s\n", "# group", "n", "median|%|",
                "p90|%|", "mean_%");
  os << line;
  for (const auto& [k, s] : rep.by_group) {
    std::snprintf(line, sizeof line, "%-34s %4d %10.1f %8.1f %+10.1f\n", k.c_str(), s.n,
                  s.median_abs_pct, s.p90_abs_pct, s.mean_signed_pct);
    os << line;
  }
  if (!rep.pairs.empty()) {
    os << "\n# A/B pairs (one setting differs; change of throughput, b against a)\n";
    int right = 0, within5 = 0;
    for (const auto& p : rep.pairs) {
      const bool close = std::fabs(p.predicted_change_pct - p.published_change_pct) <= 5.0;
      right += p.sign_right();
      within5 += p.sign_right() && close;
      std::snprintf(line, sizeof line, "  %-13s %+7.1f%% pub %+7.1f%% pred %-5s  %s -> %s\n",
                    p.setting.c_str(), p.published_change_pct, p.predicted_change_pct,
                    p.sign_right() ? (close ? "ok" : "sign") : "WRONG", rep.rows[p.a].row->id.c_str(),
                    rep.rows[p.b].row->id.c_str());
      os << line;
    }
    std::snprintf(line, sizeof line, "# %d pairs: sign right %d, sign right and within 5 points %d\n",
                  static_cast<int>(rep.pairs.size()), right, within5);
    os << line;
  }
  std::snprintf(line, sizeof line, "\n# memory: %d of %d rows that publish fit/OOM agree; %d rows not modelled\n",
                rep.memory_right, rep.memory_checked, rep.unsupported);
  os << line;
  return os.str();
}

nlohmann::json to_json(const PublishedReport& rep) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& c : rep.rows) {
    const PublishedRow& r = *c.row;
    nlohmann::json o = {{"id", r.id},
                        {"model", r.model},
                        {"system", r.system},
                        {"status", r.status},
                        {"model_preset", r.model_preset.empty() ? nlohmann::json() : nlohmann::json(r.model_preset)},
                        {"cluster", r.cluster.empty() ? nlohmann::json() : nlohmann::json(r.cluster)},
                        {"published", figures_json(r.published)},
                        {"predicted", r.config ? figures_json(c.predicted) : nlohmann::json()},
                        {"error_pct", num_or_null(c.error_pct)},
                        {"error_metric", c.metric.empty() ? nlohmann::json() : nlohmann::json(c.metric)},
                        {"split", c.split.empty() ? nlohmann::json() : nlohmann::json(c.split)},
                        {"assumptions", r.assumptions},
                        {"unsupported", r.config ? nlohmann::json() : nlohmann::json(r.unsupported)}};
    rows.push_back(o);
  }
  nlohmann::json groups = nlohmann::json::object();
  for (const auto& [k, s] : rep.by_group)
    groups[k] = {{"n", s.n}, {"median_abs_pct", s.median_abs_pct}, {"p90_abs_pct", s.p90_abs_pct},
                 {"mean_signed_pct", s.mean_signed_pct}};
  nlohmann::json pairs = nlohmann::json::array();
  for (const auto& p : rep.pairs)
    pairs.push_back({{"a", rep.rows[p.a].row->id},
                     {"b", rep.rows[p.b].row->id},
                     {"setting", p.setting},
                     {"published_change_pct", p.published_change_pct},
                     {"predicted_change_pct", p.predicted_change_pct},
                     {"sign_right", p.sign_right()}});
  return {{"schema_version", 1},
          {"rows", rows},
          {"ab_pairs", pairs},
          {"summary",
           {{"error_pct", groups},
            {"unsupported_rows", rep.unsupported},
            {"memory_rows_checked", rep.memory_checked},
            {"memory_rows_agree", rep.memory_right}}}};
}

}  // namespace epo::calib
