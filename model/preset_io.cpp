// Strict JSON of model presets and hardware profiles.
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/json_reader.hpp"
#include "model/measured_gemm.hpp"
#include "model/limits.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

namespace epo::model {

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
  m.make_vocab_size_divisible_by = r.get_int("make_vocab_size_divisible_by", 128, 1, 1 << 20);
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
  m.tied_embeddings = r.get_bool("tied_embeddings", false);
  m.window_size = r.get_int("window_size", 0, 0, 1 << 24);
  m.window_attn_skip_freq = r.get_int("window_attn_skip_freq", 0, 0, 1000);
  m.linear_bias = r.get_bool("linear_bias", false);
  const std::string act = r.get_string("activation", "swiglu");
  if (act != "swiglu" && act != "quick_geglu")
    throw EPO_INPUT_ERROR(where, ": key 'activation' has value \"", act,
                          "\" (allowed: swiglu, quick_geglu)");
  m.quick_geglu = act == "quick_geglu";
  m.activation_clamp = r.get_double("activation_clamp", 0.0, 0.0, 1e6);
  const std::string pos = r.get_string("position_embedding", "rope");
  if (pos != "rope" && pos != "yarn")
    throw EPO_INPUT_ERROR(where, ": key 'position_embedding' has value \"", pos,
                          "\" (allowed: rope, yarn)");
  m.yarn_rope = pos == "yarn";
  // The hybrid sizes' ranges are checked once, by apply_hybrid_pattern, for every reader (this
  // file's and Megatron-LM arguments').
  constexpr int kAny = std::numeric_limits<int>::max();
  m.moe_latent_size = r.get_int("moe_latent_size", 0, 0, kMaxMoeLatentSize);
  if (r.has("hybrid")) {
    auto hr = r.object("hybrid");
    HybridSpec& y = m.hybrid;
    y.pattern = hr.require_string("pattern");
    y.mamba_num_heads = hr.require_int("mamba_num_heads", -kAny, kAny);
    y.mamba_head_dim = hr.get_int("mamba_head_dim", 64, -kAny, kAny);
    y.mamba_state_dim = hr.get_int("mamba_state_dim", 128, -kAny, kAny);
    y.mamba_num_groups = hr.get_int("mamba_num_groups", 8, -kAny, kAny);
    y.mamba_conv_kernel = hr.get_int("mamba_conv_kernel", 4, -kAny, kAny);
    for (const auto& [k, v] : hr.sources()) m.sources["hybrid." + k] = v;
    hr.finish();
  }
  for (const auto& [k, v] : r.sources()) m.sources[k] = v;
  r.finish();
  if (m.hybrid.enabled()) apply_hybrid_pattern(m, where);

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

void apply_hybrid_pattern(ModelSpec& m, const std::string& where) {
  const std::string& p = m.hybrid.pattern;
  for (char c : p)
    EPO_REQUIRE_INPUT(c == 'M' || c == '*' || c == 'E' || c == '-', where,
                      ": hybrid pattern has '", c, "' (allowed: M Mamba, * attention, E MoE, - MLP)");
  EPO_REQUIRE_INPUT(static_cast<int>(p.size()) == m.num_layers, where, ": hybrid pattern has ",
                    p.size(), " layers, num_layers = ", m.num_layers);
  EPO_REQUIRE_INPUT(m.hybrid.count('E') > 0 && m.num_experts > 0, where,
                    ": a hybrid pattern without MoE layers ('E') is not modelled (EPO plans MoE jobs)");
  EPO_REQUIRE_INPUT(m.first_k_dense_layers == 0, where,
                    ": a hybrid model places its dense layers by its pattern ('-'), "
                    "first_k_dense_layers must be 0");
  EPO_REQUIRE_INPUT(m.hybrid.count('-') == 0 || m.ffn_hidden_size > 0, where,
                    ": the pattern's MLP layers ('-') need ffn_hidden_size > 0");
  const HybridSpec& y = m.hybrid;
  auto in = [&](const char* what, int v, int hi) {
    EPO_REQUIRE_INPUT(v >= 1 && v <= hi, where, ": ", what, " = ", v, " (allowed: 1..", hi, ")");
  };
  in("mamba_num_heads", y.mamba_num_heads, 1 << 16);
  in("mamba_head_dim", y.mamba_head_dim, 4096);
  in("mamba_state_dim", y.mamba_state_dim, 4096);
  in("mamba_num_groups", y.mamba_num_groups, 4096);
  in("mamba_conv_kernel", y.mamba_conv_kernel, 64);
  m.num_layers = m.hybrid.count('E');
}

int apply_megatron_hybrid(ModelSpec& m, const std::string& pattern, int heads, int head_dim,
                          int state, int groups, const std::string& where) {
  std::string main_part = pattern.substr(0, pattern.find('/'));
  main_part.erase(std::remove(main_part.begin(), main_part.end(), '|'), main_part.end());
  const int depths = static_cast<int>(std::count(pattern.begin(), pattern.end(), '/'));
  if (depths > 0 && m.mtp_num_layers == 0) m.mtp_num_layers = depths;
  HybridSpec& y = m.hybrid;
  y.pattern = main_part;
  if (head_dim != 0) y.mamba_head_dim = head_dim;
  if (state != 0) y.mamba_state_dim = state;
  if (groups != 0) y.mamba_num_groups = groups;
  y.mamba_num_heads = heads != 0 ? heads : 2 * m.hidden_size / std::max(1, y.mamba_head_dim);
  const int layers = static_cast<int>(main_part.size());
  m.num_layers = layers;
  apply_hybrid_pattern(m, where);
  return layers;
}

namespace {
/// Writes j[key] = value, as {"value", "source"} when the value has a recorded source.
template <typename T>
void put_sourced(nlohmann::json& j, const std::map<std::string, std::string>& sources,
                 const char* key, T value) {
  auto it = sources.find(key);
  if (it != sources.end()) j[key] = {{"value", value}, {"source", it->second}};
  else j[key] = value;
}
}  // namespace

nlohmann::json to_json(const ModelSpec& m) {
  nlohmann::json j;
  j["schema_version"] = 1;
  j["name"] = m.name;
  auto put = [&](const char* k, int v) { put_sourced(j, m.sources, k, v); };
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
  put("make_vocab_size_divisible_by", m.make_vocab_size_divisible_by);
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
  if (m.tied_embeddings) j["tied_embeddings"] = true;
  if (m.moe_latent_size > 0) put("moe_latent_size", m.moe_latent_size);
  if (m.window_size > 0) {
    put("window_size", m.window_size);
    put("window_attn_skip_freq", m.window_attn_skip_freq);
  }
  if (m.linear_bias) j["linear_bias"] = true;
  if (m.quick_geglu) j["activation"] = "quick_geglu";
  if (m.activation_clamp > 0) j["activation_clamp"] = m.activation_clamp;
  if (m.yarn_rope) j["position_embedding"] = "yarn";
  if (m.hybrid.enabled()) {
    const HybridSpec& y = m.hybrid;
    j["num_layers"] = m.published_layers();
    j["hybrid"] = {{"pattern", y.pattern},
                   {"mamba_num_heads", y.mamba_num_heads},
                   {"mamba_head_dim", y.mamba_head_dim},
                   {"mamba_state_dim", y.mamba_state_dim},
                   {"mamba_num_groups", y.mamba_num_groups},
                   {"mamba_conv_kernel", y.mamba_conv_kernel}};
  }
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
  // The ranges are model/limits.hpp's (limits::profile), shared with calibrate fit.
  using namespace limits::profile;
  auto range = [](const char* k) -> const RealRange& {
    const RealRange* x = profile_range(k);
    if (!x) throw EPO_RUNTIME_ERROR("no range stated for profile field '", k, "'");
    return *x;
  };
  auto req = [&](const char* k, double& v) { v = r.require_double(k, range(k).min, range(k).max); };
  auto opt = [&](const char* k, double& v) { v = r.get_double(k, v, range(k).min, range(k).max); };
  auto opt_int = [&](const IntRange& x, int& v) { v = r.get_int(x.key, v, x.min, x.max); };
  opt_int(kComputeCapability, h.compute_capability_major);
  h.num_sms = r.require_int(kNumSms.key, kNumSms.min, kNumSms.max);
  req("bf16_tflops", h.bf16_tflops);
  req("fp8_tflops", h.fp8_tflops);
  opt("fp4_tflops", h.fp4_tflops);
  req("hbm_bytes", h.hbm_bytes);
  req("hbm_gbps", h.hbm_gbps);
  req("nvlink_gbps", h.nvlink_gbps);
  h.nvlink_domain_size = r.require_int(kNvlinkDomain.key, kNvlinkDomain.min, kNvlinkDomain.max);
  req("net_gbps", h.net_gbps);
  req("nvlink_latency_us", h.nvlink_latency_us);
  req("net_latency_us", h.net_latency_us);
  opt("gemm_efficiency", h.gemm_efficiency);
  opt("gemm_half_dim", h.gemm_half_dim);
  opt("hbm_efficiency", h.hbm_efficiency);
  opt("framework_hbm_efficiency", h.framework_hbm_efficiency);
  opt("kernel_launch_us", h.kernel_launch_us);
  opt("gemm_call_us", h.gemm_call_us);
  opt("grouped_gemm_efficiency", h.grouped_gemm_efficiency);
  opt("grouped_call_us", h.grouped_call_us);
  opt("host_sync_us", h.host_sync_us);
  opt("comm_gbps_per_sm", h.comm_gbps_per_sm);
  opt("nvlink_efficiency", h.nvlink_efficiency);
  opt("net_efficiency", h.net_efficiency);
  opt("nccl_efficiency", h.nccl_efficiency);
  opt("nccl_latency_us", h.nccl_latency_us);
  opt_int(kNcclSms, h.nccl_sms);
  opt("local_copy_gbps_per_sm", h.local_copy_gbps_per_sm);
  opt("local_copy_max_gbps", h.local_copy_max_gbps);
  opt("contention_coeff", h.contention_coeff);
  opt("contention_exp", h.contention_exp);
  opt("nvl_contention_coeff", h.nvl_contention_coeff);
  opt("nvl_contention_exp", h.nvl_contention_exp);
  opt("vr_tail_coeff", h.vr_tail_coeff);
  opt("fp8_gemm_efficiency", h.fp8_gemm_efficiency);
  opt("fp4_gemm_efficiency", h.fp4_gemm_efficiency);
  opt("framework_op_host_us", h.framework_op_host_us);
  opt("framework_step_host_us", h.framework_step_host_us);
  opt("gemm_k_half", h.gemm_k_half);
  opt("gemm_tile_half", h.gemm_tile_half);
  opt("fp8_gemm_k_half", h.fp8_gemm_k_half);
  opt("fp8_gemm_tile_half", h.fp8_gemm_tile_half);
  opt("attn_fwd_efficiency", h.attn_fwd_efficiency);
  opt("attn_bwd_efficiency", h.attn_bwd_efficiency);
  opt("attn_half_seq", h.attn_half_seq);
  opt("ssd_efficiency", h.ssd_efficiency);
  opt("comm_row_us", h.comm_row_us);
  if (r.has("expert_gemm_times"))
    h.expert_gemm_times = measured_expert_gemms_from_json(r.member("expert_gemm_times"), where);
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
  auto put = [&](const char* k, double v) { put_sourced(j, h.sources, k, v); };
  auto put_int = [&](const char* k, int v) { put_sourced(j, h.sources, k, v); };
  put_int("num_sms", h.num_sms);
  put("bf16_tflops", h.bf16_tflops);
  put("fp8_tflops", h.fp8_tflops);
  put("fp4_tflops", h.fp4_tflops);
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
  put("framework_hbm_efficiency", h.framework_hbm_efficiency);
  put("kernel_launch_us", h.kernel_launch_us);
  put("gemm_call_us", h.gemm_call_us);
  put("grouped_gemm_efficiency", h.grouped_gemm_efficiency);
  put("grouped_call_us", h.grouped_call_us);
  put("host_sync_us", h.host_sync_us);
  put("comm_gbps_per_sm", h.comm_gbps_per_sm);
  put("nvlink_efficiency", h.nvlink_efficiency);
  put("net_efficiency", h.net_efficiency);
  put("nccl_efficiency", h.nccl_efficiency);
  put("nccl_latency_us", h.nccl_latency_us);
  j["nccl_sms"] = h.nccl_sms;
  put("local_copy_gbps_per_sm", h.local_copy_gbps_per_sm);
  put("local_copy_max_gbps", h.local_copy_max_gbps);
  put("contention_coeff", h.contention_coeff);
  put("contention_exp", h.contention_exp);
  put("nvl_contention_coeff", h.nvl_contention_coeff);
  put("nvl_contention_exp", h.nvl_contention_exp);
  put("vr_tail_coeff", h.vr_tail_coeff);
  put("fp8_gemm_efficiency", h.fp8_gemm_efficiency);
  put("fp4_gemm_efficiency", h.fp4_gemm_efficiency);
  put("framework_op_host_us", h.framework_op_host_us);
  put("framework_step_host_us", h.framework_step_host_us);
  put("gemm_k_half", h.gemm_k_half);
  put("gemm_tile_half", h.gemm_tile_half);
  put("fp8_gemm_k_half", h.fp8_gemm_k_half);
  put("fp8_gemm_tile_half", h.fp8_gemm_tile_half);
  put("attn_fwd_efficiency", h.attn_fwd_efficiency);
  put("attn_bwd_efficiency", h.attn_bwd_efficiency);
  put("attn_half_seq", h.attn_half_seq);
  put("ssd_efficiency", h.ssd_efficiency);
  put("comm_row_us", h.comm_row_us);
  if (!h.expert_gemm_times.empty()) j["expert_gemm_times"] = to_json(h.expert_gemm_times);
  j["calibrated"] = h.calibrated;
  if (!h.provenance.empty()) j["provenance"] = h.provenance;
  return j;
}

}  // namespace epo::model
