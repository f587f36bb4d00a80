// Megatron-LM CI runs: the argument list of a functional test case as a Config.
#include "calibration/published_mlm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <regex>
#include <vector>

#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/memory.hpp"
#include "model/pipeline_layout.hpp"

namespace epo::calib {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A run whose iteration times scatter more than this (the middle half of the steps it reports
/// spans this share of their median) has no steady step time: a shared or throttled machine.
constexpr double kNoisyTimingSpread = 0.2;

/// Interquartile range of the iteration times a CI row reports, relative to their median; 0 when
/// it reports fewer than four.
double iteration_time_spread(const nlohmann::json& j) {
  const auto it = j.find("iteration_time_values_used");
  if (it == j.end() || !it->is_object()) return 0;
  std::vector<double> t;
  for (const auto& [step, v] : it->items())
    if (v.is_number() && std::isfinite(v.get<double>())) t.push_back(v.get<double>());
  if (t.size() < 4) return 0;
  std::sort(t.begin(), t.end());
  const auto at = [&](double q) { return t[static_cast<std::size_t>(q * (t.size() - 1))]; };
  const double median = at(0.5);
  return median > 0 ? (at(0.75) - at(0.25)) / median : 0;
}

struct Args {
  const nlohmann::json& a;
  bool has(const char* k) const { return a.contains(k); }
  bool flag(const char* k) const {
    if (!a.contains(k)) return false;
    const auto& v = a[k];
    return v.is_boolean() ? v.get<bool>() : true;
  }
  double num(const char* k, double fallback) const {
    if (!a.contains(k)) return fallback;
    const auto& v = a[k];
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) {
      const std::string s = v.get<std::string>();
      char* end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (end != s.c_str() && *end == '\0') return d;
    }
    return kNaN;
  }
  int integer(const char* k, int fallback) const {
    const double d = num(k, fallback);
    return std::isfinite(d) ? static_cast<int>(d) : fallback;
  }
  std::string str(const char* k) const {
    if (!a.contains(k)) return "";
    const auto& v = a[k];
    if (v.is_string()) return v.get<std::string>();
    if (v.is_array()) {
      std::string s;
      for (const auto& e : v) s += (s.empty() ? "" : " ") + (e.is_string() ? e.get<std::string>() : e.dump());
      return s;
    }
    return v.dump();
  }
};

/// An argument as Megatron reads it: the test recipes shell-escape layouts and patterns
/// ("Et*3\\|\\(tt\\|\\)*6tL").
std::string unescaped(const std::string& s) {
  std::string out;
  for (char ch : s)
    if (ch != '\\' && ch != '"' && ch != '\'') out += ch;
  return out;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> w;
  std::string cur;
  for (char c : s) {
    if (c == ' ' || c == ',' || c == '[' || c == ']' || c == '"' || c == '\'') {
      if (!cur.empty()) w.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) w.push_back(cur);
  return w;
}

}  // namespace

PublishedRow map_mlm_ci_row(const nlohmann::json& j, const ClusterMap& clusters) {
  PublishedRow r;
  r.id = j.value("id", "");
  r.source_type = "megatron-lm-ci";
  r.status = "current";
  const std::string platform = j.value("platform", "");
  r.system = platform;
  r.cluster = ClusterMap::cluster_for(platform);  // dgx_h100, dgxh100_dgxc, dgx_gb200, dgx_a100
  const Args a{j["args"]};
  r.model = "megatron-ci:" + r.id.substr(0, r.id.find("::"));
  r.model_preset = "ci:" + r.id.substr(0, r.id.find("::"));
  if (j.contains("iteration_time_s_median") && j["iteration_time_s_median"].is_number())
    r.published.step_time_s = j["iteration_time_s_median"].get<double>();
  if (j.contains("mem_max_allocated_bytes") && j["mem_max_allocated_bytes"].is_number())
    r.published.peak_memory_gb = j["mem_max_allocated_bytes"].get<double>() / 1e9;
  r.memory_of_last_rank = true;  // training_log's TensorBoard writer lives on the last rank
  if (std::isfinite(r.published.step_time_s)) r.published.fits = 1;
  // Predicted and listed, but neither fitted on nor counted in the step-time errors.
  if (iteration_time_spread(j) > kNoisyTimingSpread) r.status = "noisy-timing";
  auto reject = [&](std::string why) {
    r.unsupported = std::move(why);
    return r;
  };
  if (r.cluster.empty()) return reject("platform '" + platform + "' not known");
  if (!j.contains("gpus") || !j["gpus"].is_number_integer())
    return reject("number of GPUs not published");
  if (a.has("--perform-rl-step") || a.has("--grpo-group-size"))
    return reject("reinforcement-learning steps are not modelled");
  if (a.flag("--flextron")) return reject("Flextron's elastic nested models are not modelled");
  if (a.str("--optimizer") == "muon" || a.str("--optimizer") == "dist_muon")
    return reject("the Muon optimizer is not modelled");

  model::Config c;
  model::ModelSpec& m = c.model;
  m.name = r.model_preset;
  m.num_layers = a.integer("--num-layers", 0);
  m.hidden_size = a.integer("--hidden-size", 0);
  m.num_attention_heads = a.integer("--num-attention-heads", 0);
  if (m.num_layers <= 0 || m.hidden_size <= 0 || m.num_attention_heads <= 0)
    return reject("architecture arguments missing or not numbers");
  m.num_query_groups = a.flag("--group-query-attention")
                           ? a.integer("--num-query-groups", m.num_attention_heads)
                           : m.num_attention_heads;
  m.head_dim = a.integer("--kv-channels", m.hidden_size / m.num_attention_heads);
  m.tied_embeddings = !a.flag("--untie-embeddings-and-output-weights");
  if (a.flag("--multi-latent-attention")) {
    m.attention = model::AttentionKind::mla;
    m.mla.q_lora_rank = a.integer("--q-lora-rank", 0);
    m.mla.kv_lora_rank = a.integer("--kv-lora-rank", 512);
    m.mla.qk_nope_head_dim = a.integer("--qk-head-dim", 128);
    m.mla.qk_rope_head_dim = a.integer("--qk-pos-emb-head-dim", 64);
    m.mla.v_head_dim = a.integer("--v-head-dim", 128);
  }
  // Megatron-LM's default width: 4h, or with SwiGLU two thirds of it rounded down to 64.
  const int ffn_default = a.flag("--swiglu") ? (4 * m.hidden_size * 2 / 3) / 64 * 64
                                             : 4 * m.hidden_size;
  m.ffn_hidden_size = a.integer("--ffn-hidden-size", ffn_default);
  m.num_experts = a.integer("--num-experts", 0);
  m.router_topk = a.integer("--moe-router-topk", 2);
  m.moe_ffn_hidden_size = a.integer("--moe-ffn-hidden-size", m.ffn_hidden_size);
  m.shared_expert_ffn_hidden_size = a.integer("--moe-shared-expert-intermediate-size", 0);
  m.router_num_groups = a.integer("--moe-router-num-groups", 0);
  m.router_group_topk = a.integer("--moe-router-group-topk", 0);
  m.mtp_num_layers = a.integer("--mtp-num-layers", 0);
  m.moe_latent_size = a.integer("--moe-latent-size", 0);
  m.gated_linear_unit = a.flag("--swiglu");
  m.score_function = a.str("--moe-router-score-function") == "sigmoid"
                         ? model::ScoreFunction::sigmoid
                         : model::ScoreFunction::softmax;
  const std::string freq = a.str("--moe-layer-freq");
  if (!freq.empty() && freq != "1") {
    // Only a leading run of dense layers is expressible: ([0]*K+[1]*N) with K + N layers.
    static const std::regex kLead(R"(\(?\s*\[0\]\s*\*\s*(\d+)\s*\+\s*\[1\]\s*\*\s*(\d+)\s*\)?)");
    std::smatch mt;
    if (!std::regex_match(freq, mt, kLead) ||
        std::stoi(mt[1]) + std::stoi(mt[2]) != m.num_layers)
      return reject("MoE layer pattern '" + freq + "' is not a leading run of dense layers");
    m.first_k_dense_layers = std::stoi(mt[1]);
  }
  // A hybrid Mamba model: its layer pattern.
  const std::string pattern =
      unescaped(a.str("--hybrid-layer-pattern") + a.str("--hybrid-override-pattern"));
  if (!pattern.empty()) {
    try {
      model::apply_megatron_hybrid(m, pattern, a.integer("--mamba-num-heads", 0),
                                   a.integer("--mamba-head-dim", 0),
                                   a.integer("--mamba-state-dim", 0),
                                   a.integer("--mamba-num-groups", 0), r.id + " (hybrid pattern)");
    } catch (const Error& e) {
      return reject(std::string("hybrid pattern not accepted: ") + e.what());
    }
  } else if (a.flag("--is-hybrid-model")) {
    return reject("hybrid model without a layer pattern in its arguments");
  }
  // Vocabulary: GPT-2 BPE files (50257) or a named tokenizer, padded as Megatron pads it.
  int vocab = 0;
  const std::string tok = a.str("--tokenizer-type");
  if (a.has("--vocab-file") && (tok.empty() || tok == "GPT2BPETokenizer")) vocab = 50257;
  else if (tok == "Llama2Tokenizer") vocab = 32000;
  else if (tok == "TikTokenizer") vocab = 131072;
  if (vocab == 0) {
    vocab = 32000;
    r.assumptions.push_back("vocabulary 32000 (tokenizer '" + tok + "' not resolved)");
  }
  const int tp = a.integer("--tensor-model-parallel-size", 1);
  const int divisible = a.integer("--make-vocab-size-divisible-by", 128) * tp;
  m.vocab_size = (vocab + divisible - 1) / divisible * divisible;

  c.model_name = r.model_preset;
  try {
    c.hardware_name = r.cluster;
    c.hw = clusters.profile(r.cluster);
  } catch (const Error& e) {
    return reject(e.what());
  }
  c.num_gpus = j["gpus"].get<int>();
  auto& p = c.par;
  p.tp = tp;
  p.pp = a.integer("--pipeline-model-parallel-size", 1);
  p.vpp = a.integer("--num-virtual-stages-per-pipeline-rank", 1);
  if (a.has("--num-layers-per-virtual-pipeline-stage") && p.pp > 1)
    p.vpp = m.num_layers / p.pp / std::max(1, a.integer("--num-layers-per-virtual-pipeline-stage", 1));
  if (a.has("--pipeline-model-parallel-layout")) {
    // Megatron takes the virtual stages from the layout (stages / pp).
    const std::string layout = unescaped(a.str("--pipeline-model-parallel-layout"));
    p.pipeline_layout = layout;
    try {
      const auto stages = model::parse_pipeline_layout(layout);
      if (p.pp > 0 && static_cast<int>(stages.size()) % p.pp == 0)
        p.vpp = static_cast<int>(stages.size()) / p.pp;
    } catch (const Error& e) {
      return reject(std::string("pipeline layout not accepted: ") + e.what());
    }
  }
  p.account_for_embedding_in_pipeline_split = a.flag("--account-for-embedding-in-pipeline-split");
  p.account_for_loss_in_pipeline_split = a.flag("--account-for-loss-in-pipeline-split");
  p.cp = a.integer("--context-parallel-size", 1);
  p.ep = a.integer("--expert-model-parallel-size", 1);
  p.etp = a.integer("--expert-tensor-parallel-size", tp);
  p.sequence_parallel = a.flag("--sequence-parallel");
  p.micro_batch_size = a.integer("--micro-batch-size", 1);
  p.global_batch_size = a.integer("--global-batch-size", 0);
  p.seq_length = a.integer("--seq-length", 4096);
  auto& o = c.opt;
  const std::string disp = a.str("--moe-token-dispatcher-type");
  if (disp == "flex" || a.flag("--moe-enable-deepep")) {
    o.dispatcher = model::Dispatcher::flex;
    o.flex_backend = a.str("--moe-flex-dispatcher-backend") == "hybridep"
                         ? model::FlexBackend::hybridep
                         : model::FlexBackend::deepep;
  } else if (disp == "alltoall") {
    o.dispatcher = model::Dispatcher::alltoall;
  } else {
    o.dispatcher = model::Dispatcher::allgather;  // Megatron's default dispatcher
  }
  o.overlap_moe_expert_parallel_comm = a.flag("--overlap-moe-expert-parallel-comm");
  o.delay_wgrad_compute = a.flag("--delay-wgrad-compute");
  o.moe_shared_expert_overlap = a.flag("--moe-shared-expert-overlap");
  o.moe_grouped_gemm = a.flag("--moe-grouped-gemm");
  o.moe_permute_fusion = a.flag("--moe-permute-fusion");
  o.distributed_optimizer = a.flag("--use-distributed-optimizer");
  o.distributed_optimizer_instances = a.integer("--num-distributed-optimizer-instances", 1);
  // Megatron-FSDP, with Megatron-LM's default strategy (optim_grads_params) unless named.
  o.megatron_fsdp = a.flag("--use-megatron-fsdp") || a.flag("--use-custom-fsdp");
  o.fsdp_outer_optim = a.str("--outer-dp-sharding-strategy") == "optim";
  if (o.megatron_fsdp && a.has("--data-parallel-sharding-strategy")) {
    try {
      o.fsdp_sharding =
          model::parse_fsdp_sharding(a.str("--data-parallel-sharding-strategy"), r.id);
    } catch (const Error& e) {
      return reject(e.what());
    }
  }
  o.overlap_grad_reduce = a.flag("--overlap-grad-reduce");
  o.overlap_param_gather = a.flag("--overlap-param-gather");
  // bf16 reduces gradients in fp32 unless --grad-reduce-in-bf16 (Megatron-LM's validate_args).
  o.grad_reduce_in_fp32 = !a.flag("--grad-reduce-in-bf16");
  o.gradient_accumulation_fusion = !a.flag("--no-gradient-accumulation-fusion");
  o.precision = a.has("--fp8-format")   ? model::Precision::fp8
                : a.has("--fp4-format") ? model::Precision::nvfp4
                                        : model::Precision::bf16;
  o.fp8_param_gather = a.flag("--fp8-param-gather") || a.flag("--fp4-param-gather");
  if (a.flag("--first-last-layers-bf16")) {  // Megatron's defaults: one layer at each end
    o.bf16_layers_start = a.integer("--num-layers-at-start-in-bf16", 1);
    o.bf16_layers_end = a.integer("--num-layers-at-end-in-bf16", 1);
  }
  // --fp8-recipe's default is delayed scaling.
  const std::string recipe = a.str("--fp8-recipe");
  o.fp8_recipe = recipe.empty()
                     ? model::Fp8Recipe::delayed
                     : model::parse_megatron_fp8_recipe(recipe, r.id + " (--fp8-recipe)");
  o.cross_entropy_fusion = a.flag("--cross-entropy-loss-fusion");
  o.cross_entropy_te = a.str("--cross-entropy-fusion-impl") == "te";  // Megatron-LM: native
  o.bias_activation_fusion =
      !a.flag(c.model.gated_linear_unit ? "--no-bias-swiglu-fusion" : "--no-bias-gelu-fusion");
  o.fused_weighted_squared_relu = a.flag("--use-fused-weighted-squared-relu");
  const std::string backend = a.str("--attention-backend");
  if (!backend.empty())
    o.attention_backend = model::parse_attention_backend(backend, r.id + " (--attention-backend)");
  const std::string g = a.str("--recompute-granularity");
  if (g == "selective") o.recompute_granularity = model::RecomputeGranularity::selective;
  if (g == "full") o.recompute_granularity = model::RecomputeGranularity::full;
  o.recompute_modules = words(a.str("--recompute-modules"));
  o.recompute_method = a.str("--recompute-method");
  o.recompute_num_layers = a.integer("--recompute-num-layers", 0);
  const std::string impl = a.str("--cuda-graph-impl");
  if (impl == "transformer_engine") o.cuda_graph_impl = model::CudaGraphImpl::transformer_engine;
  else if (impl == "local" || a.flag("--enable-cuda-graph")) o.cuda_graph_impl = model::CudaGraphImpl::local;
  const std::string scope = a.str("--cuda-graph-scope");
  if (scope == "full_iteration") o.cuda_graph_impl = model::CudaGraphImpl::full_iteration;
  else o.cuda_graph_modules = words(scope);
  const double cap = a.num("--moe-expert-capacity-factor", 0);
  if (std::isfinite(cap) && cap > 0) o.capacity_factor = cap;
  // Megatron-LM's dropout defaults (0.1 each) where the test leaves them.
  const double attn_drop = a.num("--attention-dropout", 0.1);
  const double hidden_drop = a.num("--hidden-dropout", 0.1);
  if (std::isfinite(attn_drop) && attn_drop >= 0 && attn_drop <= 1) o.attention_dropout = attn_drop;
  if (std::isfinite(hidden_drop) && hidden_drop >= 0 && hidden_drop <= 1)
    o.hidden_dropout = hidden_drop;
  if (a.flag("--moe-router-force-load-balancing")) o.routing.kind = model::RoutingKind::balanced;
  if (a.flag("--manual-gc")) o.manual_gc_interval = a.integer("--manual-gc-interval", 0);
  if (j.contains("env") && j["env"].is_object() && j["env"].contains("CUDA_DEVICE_MAX_CONNECTIONS")) {
    const auto& v = j["env"]["CUDA_DEVICE_MAX_CONNECTIONS"];
    const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
    const int n = std::atoi(s.c_str());
    if (n >= 1) o.cuda_device_max_connections = n;
  }
  try {
    c.derive_and_check();
    if (!p.pipeline_layout.empty()) (void)model::estimate_memory(c, -1);  // places the layers
  } catch (const Error& e) {
    return reject(std::string("layout not accepted: ") + e.what());
  }
  r.config = c;
  return r;
}

}  // namespace epo::calib
