#include "model/config_io.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <exception>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "model/error.hpp"
#include "model/json_reader.hpp"
#include "model/limits.hpp"

#ifndef EPO_SOURCE_PRESETS_DIR
#define EPO_SOURCE_PRESETS_DIR "presets"
#endif

namespace epo::model {

namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> list_json(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 5 && n.substr(n.size() - 5) == ".json") names.push_back(n.substr(0, n.size() - 5));
    }
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::string presets_dir() {
  if (const char* env = std::getenv("EPO_PRESETS"); env && *env) return env;
  return EPO_SOURCE_PRESETS_DIR;
}

std::vector<std::string> list_model_presets() { return list_json(presets_dir() + "/models"); }
std::vector<std::string> list_hardware_presets() { return list_json(presets_dir() + "/hardware"); }

// read_json_file, write_text_file and write_json_file: model/json_file.cpp.

// ---------------------------------------------------------------------------------------------
// Presets by name

namespace {
/// Preset names are file names inside presets/: letters, digits, '.', '-', '_', not leading '.'.
void check_preset_name(const char* what, const std::string& name) {
  bool ok = !name.empty() && name.size() <= 128 && name[0] != '.';
  for (const char ch : name)
    ok = ok && ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                ch == '.' || ch == '-' || ch == '_');
  EPO_REQUIRE_INPUT(ok, "unknown ", what, " '", name, "' (allowed: a preset name of letters, ",
                    "digits, '.', '-' and '_')");
}
}  // namespace

ModelSpec load_model_preset(const std::string& name) {
  check_preset_name("model", name);
  const std::string path = presets_dir() + "/models/" + name + ".json";
  std::ifstream probe(path);
  if (!probe)
    throw EPO_INPUT_ERROR("unknown model '", name, "' (known: ", join(list_model_presets()), ")");
  return model_from_json(read_json_file(path), path);
}

HardwareProfile load_hardware_preset(const std::string& name) {
  check_preset_name("hardware", name);
  const std::string path = presets_dir() + "/hardware/" + name + ".json";
  std::ifstream probe(path);
  if (!probe)
    throw EPO_INPUT_ERROR("unknown hardware '", name,
                          "' (known: ", join(list_hardware_presets()), ")");
  return hardware_from_json(read_json_file(path), path);
}

std::string uncalibrated_note(const HardwareProfile& hw) {
  if (hw.calibrated || hw.framework_op_host_us > 0) return "";
  std::vector<std::string> clusters;
  for (const std::string& n : list_hardware_presets())
    if (n != hw.name) {
      try {
        if (load_hardware_preset(n).calibrated) clusters.push_back(n);
      } catch (const std::exception&) {
        // a broken preset is reported where it is used, not in this note
      }
    }
  std::string s = "note: hardware '" + hw.name +
                  "' is not calibrated (datasheet figures, no framework host time per op): it "
                  "predicts the GPUs' own work, faster than Megatron jobs run";
  if (!clusters.empty())
    s += "; calibrated cluster profiles (fitted on published runs, or carrying a fitted cluster's "
         "framework parameters where none was published): " +
         join(clusters);
  return s + "; or fit your own with `epo calibrate`";
}

HardwareProfile load_profile_file(const std::string& path) {
  if (is_dir(path)) throw EPO_INPUT_ERROR(path, ": is a directory, expected a profile JSON file");
  return hardware_from_json(read_json_file(path), path);
}

// ---------------------------------------------------------------------------------------------
// Configurations

Config config_from_json(const nlohmann::json& j_in, const std::string& where) {
  // A plan file (or a prediction, `epo predict --json`) carries the configuration under "config".
  if (j_in.is_object() && j_in.contains("config") && j_in.contains("kind") &&
      (j_in["kind"] == "plan" || j_in["kind"] == "prediction")) {
    return config_from_json(j_in["config"], where);
  }
  JsonReader r(j_in, where);
  r.require_int("schema_version", 1, Config::kSchemaVersion);
  Config c;
  const auto& mj = r.member("model");
  if (mj.is_string()) {
    c.model_name = mj.get<std::string>();
    c.model = load_model_preset(c.model_name);
  } else {
    c.model = model_from_json(mj, where + " (model)");
    c.model_name = c.model.name;
  }
  const auto& hj = r.member("hardware");
  if (hj.is_string()) {
    c.hardware_name = hj.get<std::string>();
    c.hw = load_hardware_preset(c.hardware_name);
  } else {
    c.hw = hardware_from_json(hj, where + " (hardware)");
    c.hardware_name = c.hw.name;
  }
  c.num_gpus = r.require_int("gpus", limits::kGpus.min, limits::kGpus.max);
  c.virtual_ranks =
      r.get_int("virtual_ranks", 0, limits::kVirtualRanks.min, limits::kVirtualRanks.max);
  c.decoder_only = r.get_bool("decoder_only", false);
  if (r.has("parallel")) {
    auto p = r.object("parallel");
    c.par.tp = p.get_int("tp", 1, limits::kTp.min, limits::kTp.max);
    c.par.pp = p.get_int("pp", 1, limits::kPp.min, limits::kPp.max);
    c.par.vpp = p.get_int("vpp", 1, limits::kVpp.min, limits::kVpp.max);
    c.par.cp = p.get_int("cp", 1, limits::kCp.min, limits::kCp.max);
    c.par.ep = p.get_int("ep", 1, limits::kEp.min, limits::kEp.max);
    c.par.etp = p.get_int("etp", 1, limits::kEtp.min, limits::kEtp.max);
    c.par.sequence_parallel = p.get_bool("sequence_parallel", false);
    c.par.micro_batch_size =
        p.get_int("micro_batch_size", 1, limits::kMicroBatch.min, limits::kMicroBatch.max);
    c.par.global_batch_size =
        p.get_int("global_batch_size", 0, limits::kGlobalBatch.min, limits::kGlobalBatch.max);
    c.par.seq_length =
        p.get_int("seq_length", 4096, limits::kSeqLength.min, limits::kSeqLength.max);
    c.par.pipeline_layout = p.get_string("pipeline_layout", "");
    c.par.first_stage_layers = p.get_int("num_layers_in_first_pipeline_stage", 0, 0, 1 << 16);
    c.par.last_stage_layers = p.get_int("num_layers_in_last_pipeline_stage", 0, 0, 1 << 16);
    c.par.account_for_embedding_in_pipeline_split =
        p.get_bool("account_for_embedding_in_pipeline_split", false);
    c.par.account_for_loss_in_pipeline_split =
        p.get_bool("account_for_loss_in_pipeline_split", false);
    // derived; accepted so that written files read back
    p.get_int("dp", 0, limits::kDp.min, limits::kDp.max);
    p.finish();
  }
  if (r.has("options")) {
    auto o = r.object("options");
    Options& op = c.opt;
    auto w = [&](const char* k) { return where + ": options." + k; };
    op.dispatcher = parse_dispatcher(o.get_string("dispatcher", "alltoall"), w("dispatcher"));
    op.flex_backend = parse_flex_backend(o.get_string("flex_backend", "deepep"), w("flex_backend"));
    op.overlap_moe_expert_parallel_comm = o.get_bool("overlap_moe_expert_parallel_comm", false);
    op.delay_wgrad_compute = o.get_bool("delay_wgrad_compute", false);
    op.ep_overlap_early_attn_memory_release =
        o.get_bool("ep_overlap_early_attn_memory_release", false);
    op.comm_sms = o.get_int("comm_sms", 0, limits::kCommSms.min, limits::kCommSms.max);
    op.moe_permute_fusion = o.get_bool("moe_permute_fusion", true);
    op.moe_shared_expert_overlap = o.get_bool("moe_shared_expert_overlap", false);
    op.moe_grouped_gemm = o.get_bool("moe_grouped_gemm", true);
    op.recompute_granularity =
        parse_recompute(o.get_string("recompute_granularity", "none"), w("recompute_granularity"));
    op.recompute_method = o.get_string("recompute_method", "");
    op.recompute_num_layers = o.get_int("recompute_num_layers", 0, limits::kRecomputeLayers.min,
                                        limits::kRecomputeLayers.max);
    op.recompute_modules = o.get_string_list("recompute_modules");
    op.offload_modules = o.get_string_list("offload_modules");
    op.cuda_graph_impl =
        parse_cuda_graph_impl(o.get_string("cuda_graph_impl", "none"), w("cuda_graph_impl"));
    op.cuda_graph_modules = o.get_string_list("cuda_graph_modules");
    op.cuda_device_max_connections = o.get_int(
        "cuda_device_max_connections", 32, limits::kMaxConnections.min, limits::kMaxConnections.max);
    op.manual_gc_interval = o.get_int("manual_gc_interval", 0, limits::kManualGcInterval.min,
                                      limits::kManualGcInterval.max);
    op.precision = parse_precision(o.get_string("precision", "bf16"), w("precision"));
    op.fp8_recipe = parse_fp8_recipe(o.get_string("fp8_recipe", "auto"), w("fp8_recipe"));
    op.fp8_param_gather = o.get_bool("fp8_param_gather", false);
    op.bf16_layers_start = o.get_int("bf16_layers_start", 0, limits::kBf16Layers.min,
                                     limits::kBf16Layers.max);
    op.bf16_layers_end =
        o.get_int("bf16_layers_end", 0, limits::kBf16Layers.min, limits::kBf16Layers.max);
    op.bf16_linears = o.get_string_list("bf16_linears");
    check_linear_modules(op.bf16_linears, w("bf16_linears"));
    op.fp8_linears = o.get_string_list("fp8_linears");
    check_linear_modules(op.fp8_linears, w("fp8_linears"));
    op.params_dtype = parse_params_dtype(o.get_string("params_dtype", "bf16"), w("params_dtype"));
    op.attention_dropout = o.get_double("attention_dropout", 0.0, 0.0, 1.0);
    op.hidden_dropout = o.get_double("hidden_dropout", 0.0, 0.0, 1.0);
    op.overlap_dispatch_backward_with_experts_wgrad =
        o.get_bool("overlap_dispatch_backward_with_experts_wgrad", false);
    op.deepep_num_sms =
        o.get_int("deepep_num_sms", 0, limits::kCommSms.min, limits::kCommSms.max);
    op.hybridep_num_sms =
        o.get_int("hybridep_num_sms", 0, limits::kCommSms.min, limits::kCommSms.max);
    op.expert_gemm = parse_expert_gemm(o.get_string("expert_gemm", "auto"), w("expert_gemm"));
    if (o.has("routing")) {
      auto rr = o.object("routing");
      op.routing.kind = parse_routing(rr.get_string("kind", "uniform"), w("routing.kind"));
      op.routing.skew = rr.get_double("skew", 0.0, limits::kSkew.min, limits::kSkew.max);
      op.routing.seed =
          static_cast<unsigned>(rr.get_int("seed", 1, limits::kSeed.min, limits::kSeed.max));
      rr.finish();
    }
    op.rank_capacity_factor =
        o.get_double("rank_capacity_factor", 0.0, limits::kRankCapacityFactor.min,
                     limits::kRankCapacityFactor.max);
    op.paged_stash = o.get_bool("paged_stash", false);
    op.capacity_factor = o.get_double("capacity_factor", 0.0, limits::kCapacityFactor.min,
                                       limits::kCapacityFactor.max);
    op.high_priority_a2a_comm_stream = o.get_bool("high_priority_a2a_comm_stream", false);
    op.fused_grouped_mlp = o.get_bool("fused_grouped_mlp", false);
    op.cross_entropy_fusion = o.get_bool("cross_entropy_fusion", true);
    op.cross_entropy_te = parse_cross_entropy_te(o.get_string("cross_entropy_fusion_impl", "te"),
                                                 w("cross_entropy_fusion_impl"));
    op.bias_activation_fusion = o.get_bool("bias_activation_fusion", true);
    op.fused_weighted_squared_relu = o.get_bool("fused_weighted_squared_relu", true);
    op.attention_backend = parse_attention_backend(o.get_string("attention_backend", "auto"),
                                                   w("attention_backend"));
    op.distributed_optimizer = o.get_bool("distributed_optimizer", true);
    op.megatron_fsdp = o.get_bool("megatron_fsdp", false);
    op.fsdp_sharding = parse_fsdp_sharding(o.get_string("fsdp_sharding", "optim_grads_params"),
                                           w("fsdp_sharding"));
    op.fsdp_outer_optim = o.get_bool("fsdp_outer_optim", false);
    op.distributed_optimizer_instances =
        o.get_int("distributed_optimizer_instances", 1, limits::kDistOptInstances.min,
                  limits::kDistOptInstances.max);
    op.overlap_grad_reduce = o.get_bool("overlap_grad_reduce", true);
    op.overlap_param_gather = o.get_bool("overlap_param_gather", true);
    op.gradient_accumulation_fusion = o.get_bool("gradient_accumulation_fusion", true);
    if (o.has("bias_dropout_fusion"))
      op.bias_dropout_fusion = o.get_bool("bias_dropout_fusion", true) ? 1 : 0;
    op.grad_reduce_in_fp32 = o.get_bool("grad_reduce_in_fp32", true);
    op.adam_moments_bf16 = o.get_bool("adam_moments_bf16", false);
    o.finish();
  }
  r.finish();
  return c;
}

nlohmann::json to_json(const Config& c) {
  nlohmann::json j;
  j["schema_version"] = Config::kSchemaVersion;
  j["model"] = to_json(c.model);
  j["hardware"] = to_json(c.hw);
  j["gpus"] = c.num_gpus;
  if (c.virtual_ranks > 0) j["virtual_ranks"] = c.virtual_ranks;
  if (c.decoder_only) j["decoder_only"] = true;
  const Parallel& p = c.par;
  j["parallel"] = {{"tp", p.tp},
                   {"pp", p.pp},
                   {"vpp", p.vpp},
                   {"cp", p.cp},
                   {"ep", p.ep},
                   {"etp", p.etp},
                   {"dp", p.dp},
                   {"sequence_parallel", p.sequence_parallel},
                   {"micro_batch_size", p.micro_batch_size},
                   {"global_batch_size", p.global_batch_size},
                   {"seq_length", p.seq_length},
                   {"pipeline_layout", p.pipeline_layout},
                   {"num_layers_in_first_pipeline_stage", p.first_stage_layers},
                   {"num_layers_in_last_pipeline_stage", p.last_stage_layers},
                   {"account_for_embedding_in_pipeline_split",
                    p.account_for_embedding_in_pipeline_split},
                   {"account_for_loss_in_pipeline_split", p.account_for_loss_in_pipeline_split}};
  const Options& o = c.opt;
  j["options"] = {
      {"dispatcher", to_string(o.dispatcher)},
      {"overlap_moe_expert_parallel_comm", o.overlap_moe_expert_parallel_comm},
      {"delay_wgrad_compute", o.delay_wgrad_compute},
      {"ep_overlap_early_attn_memory_release", o.ep_overlap_early_attn_memory_release},
      {"comm_sms", o.comm_sms},
      {"moe_permute_fusion", o.moe_permute_fusion},
      {"moe_shared_expert_overlap", o.moe_shared_expert_overlap},
      {"moe_grouped_gemm", o.moe_grouped_gemm},
      {"recompute_granularity", to_string(o.recompute_granularity)},
      {"recompute_method", o.recompute_method},
      {"recompute_num_layers", o.recompute_num_layers},
      {"recompute_modules", o.recompute_modules},
      {"offload_modules", o.offload_modules},
      {"cuda_graph_impl", to_string(o.cuda_graph_impl)},
      {"cuda_graph_modules", o.cuda_graph_modules},
      {"cuda_device_max_connections", o.cuda_device_max_connections},
      {"manual_gc_interval", o.manual_gc_interval},
      {"precision", to_string(o.precision)},
      {"fp8_recipe", to_string(o.fp8_recipe)},
      {"fp8_param_gather", o.fp8_param_gather},
      {"params_dtype", to_string(o.params_dtype)},
      {"attention_dropout", o.attention_dropout},
      {"hidden_dropout", o.hidden_dropout},
      {"overlap_dispatch_backward_with_experts_wgrad",
       o.overlap_dispatch_backward_with_experts_wgrad},
      {"deepep_num_sms", o.deepep_num_sms},
      {"hybridep_num_sms", o.hybridep_num_sms},
      {"expert_gemm", to_string(o.expert_gemm)},
      {"routing",
       {{"kind", to_string(o.routing.kind)}, {"skew", o.routing.skew}, {"seed", o.routing.seed}}},
      {"capacity_factor", o.capacity_factor},
      {"rank_capacity_factor", o.rank_capacity_factor},
      {"paged_stash", o.paged_stash},
      {"high_priority_a2a_comm_stream", o.high_priority_a2a_comm_stream},
      {"fused_grouped_mlp", o.fused_grouped_mlp},
      {"cross_entropy_fusion", o.cross_entropy_fusion},
      {"cross_entropy_fusion_impl", o.cross_entropy_te ? "te" : "native"},
      {"bias_activation_fusion", o.bias_activation_fusion},
      {"fused_weighted_squared_relu", o.fused_weighted_squared_relu},
      {"attention_backend", to_string(o.attention_backend)},
      {"distributed_optimizer", o.distributed_optimizer},
      {"megatron_fsdp", o.megatron_fsdp},
      {"fsdp_sharding", to_string(o.fsdp_sharding)},
      {"fsdp_outer_optim", o.fsdp_outer_optim},
      {"distributed_optimizer_instances", o.distributed_optimizer_instances},
      {"overlap_grad_reduce", o.overlap_grad_reduce},
      {"overlap_param_gather", o.overlap_param_gather},
      {"gradient_accumulation_fusion", o.gradient_accumulation_fusion},
      {"grad_reduce_in_fp32", o.grad_reduce_in_fp32},
      {"adam_moments_bf16", o.adam_moments_bf16}};
  // The backend only where it means something (flex) or was changed: a file that names it sets it.
  if (o.dispatcher == Dispatcher::flex || o.flex_backend != FlexBackend::deepep)
    j["options"]["flex_backend"] = to_string(o.flex_backend);
  // Mixed-precision layers and modules only where set (files written before them read the same).
  if (o.bf16_layers_start > 0) j["options"]["bf16_layers_start"] = o.bf16_layers_start;
  if (o.bf16_layers_end > 0) j["options"]["bf16_layers_end"] = o.bf16_layers_end;
  if (!o.bf16_linears.empty()) j["options"]["bf16_linears"] = o.bf16_linears;
  if (!o.fp8_linears.empty()) j["options"]["fp8_linears"] = o.fp8_linears;
  if (o.bias_dropout_fusion >= 0) j["options"]["bias_dropout_fusion"] = o.bias_dropout_fusion > 0;
  return j;
}

Config load_config_file(const std::string& path) {
  return config_from_json(read_json_file(path), path);
}

}  // namespace epo::model
