// Published runs: reading a published-runs file and mapping each row to a Config.
#include "calibration/published.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "calibration/published_detail.hpp"
#include "calibration/published_mlm.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/memory.hpp"

namespace epo::calib {

namespace {

using namespace detail;

/// The model preset a published model label names ("" when EPO has none).
std::string preset_for_model(const std::string& label, std::string* why) {
  // "Qwen3 235B A22B", "qwen3_235b_a22b" and "Qwen3-235B-A22B" name the same model.
  std::string l = lower(label);
  std::replace_if(l.begin(), l.end(), [](char c) { return c == ' ' || c == '_'; }, '-');
  struct Known { const char* needle; const char* preset; };
  // Architectures EPO cannot express: say so instead of approximating them.
  for (const char* other : {"qwen3-next", "deepseek-v4"}) {
    if (contains(l, other)) {
      *why = std::string("architecture not modelled: ") +
             (contains(l, "qwen3-next") ? "gated delta-net linear attention layers"
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
      {"gpt-oss-20b", "gpt-oss-20b"},
      {"nemotron-3-nano", "nemotron-3-nano"}, {"nemotron-3-super", "nemotron-3-super"},
      {"nemotron-3-ultra", "nemotron-3-ultra"}, {"nemotron3nano", "nemotron-3-nano"},
      {"nemotron-3.5-lightning", "nemotron-3-5-lightning"},
      {"nemotron-3-5-lightning", "nemotron-3-5-lightning"},
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
  if (rc.contains("modules") && rc["modules"].is_array()) {
    for (const auto& m : rc["modules"])
      if (m.is_string()) o.recompute_modules.push_back(m.get<std::string>());
    // Megatron reads an explicit empty list as nothing to recompute (None is core_attn).
    if (rc["modules"].empty() && o.recompute_granularity == model::RecomputeGranularity::selective)
      o.recompute_granularity = model::RecomputeGranularity::none;
  }
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
  if (contains(s, "a100")) return "dgx-a100";
  return "";
}

std::string ClusterMap::gpu_preset_for(const std::string& cluster) {
  static const std::map<std::string, std::string> kGpu = {
      {"dgx-h100", "h100-sxm"}, {"dgx-h200", "h200-sxm"}, {"dgx-b200", "b200"},
      {"dgx-b300", "b300"},     {"gb200-nvl72", "gb200"},
      {"gb300-nvl72", "gb300"},  {"dgx-a100", "a100"}};
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

/// Where a row leaves EP overlap unset (null), what its Megatron-Bridge recipe still turned on:
/// the flat performance recipes of Bridge v0.6 enable HybridEP's full-iteration CUDA graphs through
/// one helper (perf_recipes/qwen/common.py, _enable_hybridep_full_iteration_mxfp8) that also sets
/// CommOverlapConfig(overlap_moe_expert_parallel_comm=True, delay_wgrad_compute=True); its other
/// settings (paged stash with full-iteration graphs) mark the rows it built.
static void infer_bridge_overlap(const nlohmann::json& j, const nlohmann::json& os,
                                 model::Options& o, std::vector<std::string>& assumptions) {
  const bool unset = !j.contains("overlap_moe_expert_parallel_comm") ||
                     j["overlap_moe_expert_parallel_comm"].is_null();
  if (!unset || !os.is_object() || !os.contains("recipe_assignments")) return;
  const nlohmann::json& ra = os["recipe_assignments"];
  if (ra.contains("comm_overlap.overlap_moe_expert_parallel_comm")) {
    o.overlap_moe_expert_parallel_comm =
        is_true(ra, "comm_overlap.overlap_moe_expert_parallel_comm");
    o.delay_wgrad_compute = is_true(ra, "comm_overlap.delay_wgrad_compute");
    return;
  }
  const bool full_iteration = ra.contains("model.cuda_graph_impl") &&
                              ra["model.cuda_graph_impl"] == "full_iteration";
  if (full_iteration && is_true(ra, "model.moe_paged_stash")) {
    o.overlap_moe_expert_parallel_comm = true;
    o.delay_wgrad_compute = true;
    assumptions.push_back(
        "EP overlap and delayed wgrad on (not in the row; set by the Bridge perf helper that "
        "enables paged stash with full-iteration graphs)");
  }
}

PublishedRow map_published_row(const nlohmann::json& j, const ClusterMap& clusters) {
  if (j.contains("args") && j["args"].is_object()) return map_mlm_ci_row(j, clusters);
  PublishedRow r;
  r.id = str_field(j, "id");
  r.model = str_field(j, "model");
  r.system = str_field(j, "system");
  r.precision = str_field(j, "precision");
  r.status = str_field(j, "status");
  r.recipe_unknown = str_field(j, "notes").find("Recipe not pinned") != std::string::npos;
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
  const nlohmann::json* recipe = nullptr;  // the recipe's assignments, where recorded
  if (j.contains("other_settings") && j["other_settings"].is_object() &&
      j["other_settings"].contains("recipe_assignments") &&
      j["other_settings"]["recipe_assignments"].is_object())
    recipe = &j["other_settings"]["recipe_assignments"];
  const bool fsdp =
      int_field(j, "fsdp", 0) > 0 || (recipe && is_true(*recipe, "ddp.use_megatron_fsdp"));
  const std::string prec = lower(r.precision);
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
                 : contains(prec, "fp4")                ? model::Precision::nvfp4
                                                        : model::Precision::fp8;
  if (prec.empty()) r.assumptions.push_back("precision BF16 (not published)");
  // The dispatcher the pinned recipe assigns is the one that ran: a flex backend set beside
  // moe_token_dispatcher_type = "alltoall" (Bridge 0.3.1's H100 and B300 Qwen3-235B recipes) is
  // not used by Megatron, whatever the row's label says.
  const std::string disp = str_field(j, "dispatcher");
  std::string kind = disp, backend = str_field(j, "flex_backend");
  if (os.is_object() && os.contains("recipe_assignments") && os["recipe_assignments"].is_object()) {
    const nlohmann::json& ra = os["recipe_assignments"];
    const std::string assigned = str_field(ra, "model.moe_token_dispatcher_type");
    if (!assigned.empty() && assigned != (disp.empty() ? std::string("alltoall") : disp)) {
      r.assumptions.push_back("dispatcher " + assigned + " as the pinned recipe assigns it (row: " +
                              (disp.empty() ? std::string("not stated") : disp) + ")");
      kind = assigned;
      backend = str_field(ra, "model.moe_flex_dispatcher_backend");
    }
  }
  if (kind == "flex") {
    o.dispatcher = model::Dispatcher::flex;
    o.flex_backend = backend == "hybridep" ? model::FlexBackend::hybridep : model::FlexBackend::deepep;
  } else if (kind == "allgather") {
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
  infer_bridge_overlap(j, os, o, r.assumptions);
  // HybridEP's rank capacity and paged stash, where the pinned recipe set them.
  if (os.is_object() && os.contains("recipe_assignments") && os["recipe_assignments"].is_object()) {
    const nlohmann::json& ra = os["recipe_assignments"];
    const char* kCap = "model.moe_expert_rank_capacity_factor";
    if (ra.contains(kCap) && ra[kCap].is_number()) o.rank_capacity_factor = ra[kCap].get<double>();
    const char* kStash = "model.moe_paged_stash";
    o.paged_stash = ra.contains(kStash) && ra[kStash].is_boolean() && ra[kStash].get<bool>();
  }
  // Megatron-FSDP: the strategy Bridge's performance scripts set with it (optim_grads_params)
  // unless the recipe names one; distributed-optimizer instances (HSDP) where it sets them.
  if (fsdp) {
    try {
      r.assumptions.push_back(detail::set_megatron_fsdp(j, recipe, c.num_gpus, o));
    } catch (const Error& e) {
      return reject(e.what());
    }
  }
  if (j.contains("recompute")) set_recompute(o, j["recompute"]);
  if (j.contains("cuda_graph")) set_cuda_graph(o, j["cuda_graph"]);
  detail::set_offload_modules(os, recipe, o);
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
  // A dropless run without forced balance routes with its trained router (the ModelZoo rows
  // fine-tune the released checkpoint on real data).
  if (str_field(os, "routing") == "dropless" && o.routing.kind != model::RoutingKind::balanced) {
    o.routing.kind = model::RoutingKind::trained;
    r.assumptions.push_back("routing: a trained router without forced balance (--routing trained)");
  }
  // TE's CuTe DSL fused grouped MLP: the recipe's flag or its environment variable.
  const bool flag = os.contains("cutedsl_fused_grouped_mlp") &&
                    os["cutedsl_fused_grouped_mlp"].is_boolean() &&
                    os["cutedsl_fused_grouped_mlp"].get<bool>();
  const bool env = os.contains("env_vars") && os["env_vars"].is_object() &&
                   os["env_vars"].contains("NVTE_CUTEDSL_FUSED_GROUPED_MLP") &&
                   os["env_vars"]["NVTE_CUTEDSL_FUSED_GROUPED_MLP"] == 1;
  o.fused_grouped_mlp = flag || env;
  // FP8 attention (the 26.06 recipes' mixed_precision.fp8_dot_product_attention): not modelled.
  if (is_true(os, "fp8_dot_product_attention") ||
      (os.is_object() && os.contains("recipe_assignments") &&
       is_true(os["recipe_assignments"], "mixed_precision.fp8_dot_product_attention")))
    r.assumptions.push_back("fp8_dot_product_attention: not modelled, attention costed in BF16");
  if (os.contains("moe_shared_expert_overlap") && os["moe_shared_expert_overlap"].is_boolean())
    o.moe_shared_expert_overlap = os["moe_shared_expert_overlap"].get<bool>();
  // What the Megatron-Bridge recipes set for memory: bf16 gradient buffers in the performance
  // recipes; bf16 Adam moments in DeepSeek-V3's and Moonlight's.
  if (r.source_type.rfind("megatron-bridge", 0) == 0) {
    o.grad_reduce_in_fp32 = false;
    if (r.model_preset == "deepseek-v3" || r.model_preset == "moonlight-16b-a3b")
      o.adam_moments_bf16 = true;
    // Moonlight's recipe (recipes/moonlight/h100/moonlight_16b.py) collects garbage every 5 steps.
    if (r.model_preset == "moonlight-16b-a3b") o.manual_gc_interval = 5;
  }
  // FP8 recipe by label (FP8-CS and the 26.x H100 "FP8" rows: per-tensor current scaling).
  // Bridge's tensorwise and MXFP8 presets and the ModelZoo's MXFP8 script keep the primary weights
  // in FP8 (fp8_param_gather); the ModelZoo's also bf16 Adam moments (precision-aware optimizer).
  if (o.precision == model::Precision::fp8) {
    o.fp8_recipe = contains(prec, "mx")      ? model::Fp8Recipe::mxfp8
                   : contains(prec, "block") ? model::Fp8Recipe::blockwise
                                             : model::Fp8Recipe::tensorwise;
    const bool bridge = r.source_type.rfind("megatron-bridge", 0) == 0;
    const bool zoo_mx =
        r.source_type == "megatron-moe-modelzoo" && o.fp8_recipe == model::Fp8Recipe::mxfp8;
    o.fp8_param_gather = (bridge && o.fp8_recipe != model::Fp8Recipe::blockwise) || zoo_mx;
    if (zoo_mx) o.adam_moments_bf16 = true;
  }
  // NVFP4: Bridge's bf16_with_nvfp4_mixed gathers FP4 primary weights. Nemotron-3-Super's perf
  // recipes (perf_recipes/nemotronh) instead keep its last 14 layers in BF16 without FP4 gather,
  // and their quantization recipe (te_quant.cfg) the attention, latent and MTP linears in BF16
  // and Mamba's out_proj in MXFP8.
  if (o.precision == model::Precision::nvfp4) {
    o.fp8_param_gather = true;
    if (r.model_preset == "nemotron-3-super") {
      o.fp8_param_gather = false;
      o.bf16_layers_end = 14;
      o.bf16_linears = {"attn", "latent", "mtp"};
      o.fp8_linears = {"mamba_out"};
    }
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
  std::vector<PublishedRow> rows;
  detail::for_each_json_line(path, [&](const nlohmann::json& j, int line) {
    PublishedRow r = map_published_row(j, clusters);
    if (r.id.empty()) r.id = path + ":" + std::to_string(line);
    rows.push_back(std::move(r));
  });
  return rows;
}

}  // namespace epo::calib
