#include "model/config_io.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "model/error.hpp"
#include "model/json_reader.hpp"

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

nlohmann::json read_json_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw EPO_INPUT_ERROR(path, ": cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  try {
    return nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw EPO_INPUT_ERROR(path, ": not valid JSON (", e.what(), ")");
  }
}

void write_text_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw EPO_INPUT_ERROR(path, ": cannot write file");
    out << text;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw EPO_RUNTIME_ERROR(path, ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw EPO_RUNTIME_ERROR(path, ": cannot move the finished file into place");
  }
}

void write_json_file(const std::string& path, const nlohmann::json& j) {
  write_text_file(path, j.dump(2) + "\n");
}

// ---------------------------------------------------------------------------------------------
// Model presets

ModelSpec model_from_json(const nlohmann::json& j, const std::string& where) {
  JsonReader r(j, where);
  r.require_int("schema_version", 1, 1);
  ModelSpec m;
  m.name = r.require_string("name");
  r.get_string("description", "");
  m.num_layers = r.require_int("num_layers", 1, 1000);
  m.hidden_size = r.require_int("hidden_size", 8, 1 << 20);
  m.num_attention_heads = r.require_int("num_attention_heads", 1, 4096);
  m.num_query_groups = r.get_int("num_query_groups", m.num_attention_heads, 1, 4096);
  m.head_dim = r.get_int("head_dim", m.hidden_size / m.num_attention_heads, 1, 4096);
  const std::string att = r.get_string("attention", "gqa");
  if (att == "mla") {
    m.attention = AttentionKind::mla;
    auto mr = r.object("mla");
    m.mla.q_lora_rank = mr.get_int("q_lora_rank", 0, 0, 1 << 20);
    m.mla.kv_lora_rank = mr.require_int("kv_lora_rank", 1, 1 << 20);
    m.mla.qk_nope_head_dim = mr.require_int("qk_nope_head_dim", 1, 4096);
    m.mla.qk_rope_head_dim = mr.require_int("qk_rope_head_dim", 0, 4096);
    m.mla.v_head_dim = mr.require_int("v_head_dim", 1, 4096);
    for (const auto& [k, v] : mr.sources()) m.sources["mla." + k] = v;
    mr.finish();
  } else if (att != "gqa") {
    throw EPO_INPUT_ERROR(where, ": key 'attention' has value \"", att, "\" (allowed: gqa, mla)");
  }
  m.vocab_size = r.require_int("vocab_size", 1, 1 << 24);
  m.ffn_hidden_size = r.get_int("ffn_hidden_size", 0, 0, 1 << 22);
  m.num_experts = r.get_int("num_experts", 0, 0, 1 << 16);
  m.router_topk = r.get_int("router_topk", 0, 0, 1024);
  m.moe_ffn_hidden_size = r.get_int("moe_ffn_hidden_size", 0, 0, 1 << 22);
  m.shared_expert_ffn_hidden_size = r.get_int("shared_expert_ffn_hidden_size", 0, 0, 1 << 22);
  m.router_num_groups = r.get_int("router_num_groups", 0, 0, 1 << 16);
  m.router_group_topk = r.get_int("router_group_topk", 0, 0, 1 << 16);
  m.first_k_dense_layers = r.get_int("first_k_dense_layers", 0, 0, m.num_layers);
  m.mtp_num_layers = r.get_int("mtp_num_layers", 0, 0, 8);
  const std::string sf = r.get_string("score_function", "softmax");
  if (sf == "sigmoid") m.score_function = ScoreFunction::sigmoid;
  else if (sf != "softmax")
    throw EPO_INPUT_ERROR(where, ": key 'score_function' has value \"", sf,
                          "\" (allowed: softmax, sigmoid)");
  m.gated_linear_unit = r.get_bool("gated_linear_unit", true);
  for (const auto& [k, v] : r.sources()) m.sources[k] = v;
  r.finish();

  if (m.num_experts > 0) {
    EPO_REQUIRE_INPUT(m.router_topk >= 1 && m.router_topk <= m.num_experts, where,
                      ": router_topk = ", m.router_topk, " (allowed: 1..num_experts)");
    EPO_REQUIRE_INPUT(m.moe_ffn_hidden_size > 0, where, ": moe_ffn_hidden_size must be > 0");
  }
  if (m.router_num_groups > 0) {
    EPO_REQUIRE_INPUT(m.num_experts % m.router_num_groups == 0, where, ": router_num_groups = ",
                      m.router_num_groups, " does not divide num_experts = ", m.num_experts);
    EPO_REQUIRE_INPUT(m.router_group_topk >= 1 && m.router_group_topk <= m.router_num_groups,
                      where, ": router_group_topk = ", m.router_group_topk,
                      " (allowed: 1..router_num_groups)");
  }
  EPO_REQUIRE_INPUT(m.num_attention_heads % m.num_query_groups == 0, where,
                    ": num_query_groups must divide num_attention_heads");
  EPO_REQUIRE_INPUT(m.first_k_dense_layers == 0 || m.ffn_hidden_size > 0, where,
                    ": dense layers need ffn_hidden_size > 0");
  return m;
}

nlohmann::json to_json(const ModelSpec& m) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["name"] = m.name;
  auto put = [&](const char* k, int v) {
    auto it = m.sources.find(k);
    if (it != m.sources.end()) j[k] = {{"value", v}, {"source", it->second}};
    else j[k] = v;
  };
  put("num_layers", m.num_layers);
  put("hidden_size", m.hidden_size);
  put("num_attention_heads", m.num_attention_heads);
  put("num_query_groups", m.num_query_groups);
  put("head_dim", m.head_dim);
  j["attention"] = m.attention == AttentionKind::mla ? "mla" : "gqa";
  if (m.attention == AttentionKind::mla) {
    j["mla"] = {{"q_lora_rank", m.mla.q_lora_rank},
                {"kv_lora_rank", m.mla.kv_lora_rank},
                {"qk_nope_head_dim", m.mla.qk_nope_head_dim},
                {"qk_rope_head_dim", m.mla.qk_rope_head_dim},
                {"v_head_dim", m.mla.v_head_dim}};
  }
  put("vocab_size", m.vocab_size);
  put("ffn_hidden_size", m.ffn_hidden_size);
  put("num_experts", m.num_experts);
  put("router_topk", m.router_topk);
  put("moe_ffn_hidden_size", m.moe_ffn_hidden_size);
  put("shared_expert_ffn_hidden_size", m.shared_expert_ffn_hidden_size);
  put("router_num_groups", m.router_num_groups);
  put("router_group_topk", m.router_group_topk);
  put("first_k_dense_layers", m.first_k_dense_layers);
  put("mtp_num_layers", m.mtp_num_layers);
  j["score_function"] = m.score_function == ScoreFunction::sigmoid ? "sigmoid" : "softmax";
  j["gated_linear_unit"] = m.gated_linear_unit;
  return j;
}

// ---------------------------------------------------------------------------------------------
// Hardware profiles

HardwareProfile hardware_from_json(const nlohmann::json& j, const std::string& where) {
  JsonReader r(j, where);
  r.require_int("schema_version", 1, 1);
  HardwareProfile h;
  h.name = r.require_string("name");
  r.get_string("description", "");
  h.gpu_name = r.get_string("gpu_name", "");
  h.compute_capability_major = r.get_int("compute_capability_major", 9, 7, 20);
  h.num_sms = r.require_int("num_sms", 1, 1024);
  h.bf16_tflops = r.require_double("bf16_tflops", 1, 1e5);
  h.fp8_tflops = r.require_double("fp8_tflops", 1, 1e5);
  h.hbm_bytes = r.require_double("hbm_bytes", 1e9, 1e13);
  h.hbm_gbps = r.require_double("hbm_gbps", 10, 1e5);
  h.nvlink_gbps = r.require_double("nvlink_gbps", 1, 1e5);
  h.nvlink_domain_size = r.require_int("nvlink_domain_size", 1, 1 << 16);
  h.net_gbps = r.require_double("net_gbps", 0.1, 1e5);
  h.nvlink_latency_us = r.require_double("nvlink_latency_us", 0, 1e4);
  h.net_latency_us = r.require_double("net_latency_us", 0, 1e4);
  auto frac = [&](const char* k, double& v) { v = r.get_double(k, v, 1e-3, 1.0); };
  frac("gemm_efficiency", h.gemm_efficiency);
  h.gemm_half_dim = r.get_double("gemm_half_dim", h.gemm_half_dim, 0, 1e5);
  frac("hbm_efficiency", h.hbm_efficiency);
  h.kernel_launch_us = r.get_double("kernel_launch_us", h.kernel_launch_us, 0, 1e3);
  h.host_sync_us = r.get_double("host_sync_us", h.host_sync_us, 0, 1e4);
  h.comm_gbps_per_sm = r.get_double("comm_gbps_per_sm", h.comm_gbps_per_sm, 0.1, 1e4);
  frac("nvlink_efficiency", h.nvlink_efficiency);
  frac("net_efficiency", h.net_efficiency);
  frac("nccl_efficiency", h.nccl_efficiency);
  h.nccl_latency_us = r.get_double("nccl_latency_us", h.nccl_latency_us, 0, 1e4);
  h.nccl_sms = r.get_int("nccl_sms", h.nccl_sms, 1, 1024);
  h.local_copy_gbps_per_sm =
      r.get_double("local_copy_gbps_per_sm", h.local_copy_gbps_per_sm, 0.1, 1e4);
  h.contention_coeff = r.get_double("contention_coeff", h.contention_coeff, 0, 1);
  h.contention_exp = r.get_double("contention_exp", h.contention_exp, 0, 2);
  h.nvl_contention_coeff = r.get_double("nvl_contention_coeff", h.nvl_contention_coeff, 0, 1);
  h.nvl_contention_exp = r.get_double("nvl_contention_exp", h.nvl_contention_exp, 0, 2);
  h.calibrated = r.get_bool("calibrated", false);
  h.provenance = r.get_string_map("provenance");
  for (const auto& [k, v] : r.sources()) h.sources[k] = v;
  r.finish();
  return h;
}

nlohmann::json to_json(const HardwareProfile& h) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["name"] = h.name;
  j["gpu_name"] = h.gpu_name;
  j["compute_capability_major"] = h.compute_capability_major;
  auto put = [&](const char* k, double v) {
    auto it = h.sources.find(k);
    if (it != h.sources.end()) j[k] = {{"value", v}, {"source", it->second}};
    else j[k] = v;
  };
  auto put_int = [&](const char* k, int v) {
    auto it = h.sources.find(k);
    if (it != h.sources.end()) j[k] = {{"value", v}, {"source", it->second}};
    else j[k] = v;
  };
  put_int("num_sms", h.num_sms);
  put("bf16_tflops", h.bf16_tflops);
  put("fp8_tflops", h.fp8_tflops);
  put("hbm_bytes", h.hbm_bytes);
  put("hbm_gbps", h.hbm_gbps);
  put("nvlink_gbps", h.nvlink_gbps);
  put_int("nvlink_domain_size", h.nvlink_domain_size);
  put("net_gbps", h.net_gbps);
  put("nvlink_latency_us", h.nvlink_latency_us);
  put("net_latency_us", h.net_latency_us);
  put("gemm_efficiency", h.gemm_efficiency);
  put("gemm_half_dim", h.gemm_half_dim);
  put("hbm_efficiency", h.hbm_efficiency);
  put("kernel_launch_us", h.kernel_launch_us);
  put("host_sync_us", h.host_sync_us);
  put("comm_gbps_per_sm", h.comm_gbps_per_sm);
  put("nvlink_efficiency", h.nvlink_efficiency);
  put("net_efficiency", h.net_efficiency);
  put("nccl_efficiency", h.nccl_efficiency);
  put("nccl_latency_us", h.nccl_latency_us);
  j["nccl_sms"] = h.nccl_sms;
  put("local_copy_gbps_per_sm", h.local_copy_gbps_per_sm);
  put("contention_coeff", h.contention_coeff);
  put("contention_exp", h.contention_exp);
  put("nvl_contention_coeff", h.nvl_contention_coeff);
  put("nvl_contention_exp", h.nvl_contention_exp);
  j["calibrated"] = h.calibrated;
  if (!h.provenance.empty()) j["provenance"] = h.provenance;
  return j;
}

// ---------------------------------------------------------------------------------------------
// Presets by name

ModelSpec load_model_preset(const std::string& name) {
  const std::string path = presets_dir() + "/models/" + name + ".json";
  std::ifstream probe(path);
  if (!probe)
    throw EPO_INPUT_ERROR("unknown model '", name, "' (known: ", join(list_model_presets()), ")");
  return model_from_json(read_json_file(path), path);
}

HardwareProfile load_hardware_preset(const std::string& name) {
  const std::string path = presets_dir() + "/hardware/" + name + ".json";
  std::ifstream probe(path);
  if (!probe)
    throw EPO_INPUT_ERROR("unknown hardware '", name,
                          "' (known: ", join(list_hardware_presets()), ")");
  return hardware_from_json(read_json_file(path), path);
}

HardwareProfile load_profile_file(const std::string& path) {
  if (is_dir(path)) throw EPO_INPUT_ERROR(path, ": is a directory, expected a profile JSON file");
  return hardware_from_json(read_json_file(path), path);
}

// ---------------------------------------------------------------------------------------------
// Configurations

Config config_from_json(const nlohmann::json& j_in, const std::string& where) {
  // A plan file carries the configuration under "config".
  if (j_in.is_object() && j_in.contains("config") && j_in.contains("kind") &&
      j_in["kind"] == "plan") {
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
  c.num_gpus = r.require_int("gpus", 1, 1 << 20);
  c.virtual_ranks = r.get_int("virtual_ranks", 0, 0, 1024);
  if (r.has("parallel")) {
    auto p = r.object("parallel");
    c.par.tp = p.get_int("tp", 1, 1, 1024);
    c.par.pp = p.get_int("pp", 1, 1, 1024);
    c.par.vpp = p.get_int("vpp", 1, 1, 1024);
    c.par.cp = p.get_int("cp", 1, 1, 1024);
    c.par.ep = p.get_int("ep", 1, 1, 1 << 16);
    c.par.etp = p.get_int("etp", 1, 1, 1024);
    c.par.sequence_parallel = p.get_bool("sequence_parallel", false);
    c.par.micro_batch_size = p.get_int("micro_batch_size", 1, 1, 1 << 16);
    c.par.global_batch_size = p.get_int("global_batch_size", 0, 0, 1 << 30);
    c.par.seq_length = p.get_int("seq_length", 4096, 1, 1 << 24);
    p.get_int("dp", 0, 0, 1 << 20);  // derived; accepted so that written files read back
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
    op.comm_sms = o.get_int("comm_sms", 0, 0, 1024);
    op.moe_permute_fusion = o.get_bool("moe_permute_fusion", true);
    op.moe_shared_expert_overlap = o.get_bool("moe_shared_expert_overlap", false);
    op.moe_grouped_gemm = o.get_bool("moe_grouped_gemm", true);
    op.recompute_granularity =
        parse_recompute(o.get_string("recompute_granularity", "none"), w("recompute_granularity"));
    op.recompute_method = o.get_string("recompute_method", "");
    op.recompute_num_layers = o.get_int("recompute_num_layers", 0, 0, 1000);
    op.recompute_modules = o.get_string_list("recompute_modules");
    op.cuda_graph_impl =
        parse_cuda_graph_impl(o.get_string("cuda_graph_impl", "none"), w("cuda_graph_impl"));
    op.cuda_graph_modules = o.get_string_list("cuda_graph_modules");
    op.cuda_device_max_connections = o.get_int("cuda_device_max_connections", 32, 1, 32);
    op.precision = parse_precision(o.get_string("precision", "bf16"), w("precision"));
    if (o.has("routing")) {
      auto rr = o.object("routing");
      op.routing.kind = parse_routing(rr.get_string("kind", "uniform"), w("routing.kind"));
      op.routing.skew = rr.get_double("skew", 0.0, 0.0, 4.0);
      op.routing.seed = static_cast<unsigned>(rr.get_int("seed", 1, 0));
      rr.finish();
    }
    op.capacity_factor = o.get_double("capacity_factor", 0.0, 0.0, 1e3);
    op.high_priority_a2a_comm_stream = o.get_bool("high_priority_a2a_comm_stream", false);
    op.distributed_optimizer = o.get_bool("distributed_optimizer", true);
    op.overlap_grad_reduce = o.get_bool("overlap_grad_reduce", true);
    op.gradient_accumulation_fusion = o.get_bool("gradient_accumulation_fusion", true);
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
                   {"seq_length", p.seq_length}};
  const Options& o = c.opt;
  j["options"] = {
      {"dispatcher", to_string(o.dispatcher)},
      {"flex_backend", to_string(o.flex_backend)},
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
      {"cuda_graph_impl", to_string(o.cuda_graph_impl)},
      {"cuda_graph_modules", o.cuda_graph_modules},
      {"cuda_device_max_connections", o.cuda_device_max_connections},
      {"precision", to_string(o.precision)},
      {"routing",
       {{"kind", to_string(o.routing.kind)}, {"skew", o.routing.skew}, {"seed", o.routing.seed}}},
      {"capacity_factor", o.capacity_factor},
      {"high_priority_a2a_comm_stream", o.high_priority_a2a_comm_stream},
      {"distributed_optimizer", o.distributed_optimizer},
      {"overlap_grad_reduce", o.overlap_grad_reduce},
      {"gradient_accumulation_fusion", o.gradient_accumulation_fusion}};
  return j;
}

Config load_config_file(const std::string& path) {
  return config_from_json(read_json_file(path), path);
}

}  // namespace epo::model
