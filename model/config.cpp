#include "model/config.hpp"

#include <algorithm>
#include <cstring>
#include <utility>

#include "model/error.hpp"
#include "model/limits.hpp"

namespace epo::model {

namespace {

template <typename E, size_t N>
E parse_enum(const std::string& s, const std::string& where, const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (s == names[i]) return static_cast<E>(i);
  std::string allowed;
  for (size_t i = 0; i < N; ++i) allowed += (i ? "|" : "") + std::string(names[i]);
  throw EPO_INPUT_ERROR(where, ": '", s, "' is not allowed (allowed: ", allowed, ")");
}

constexpr const char* kDispatchers[] = {"allgather", "alltoall", "flex"};
constexpr const char* kBackends[] = {"deepep", "hybridep"};
constexpr const char* kPrecisions[] = {"bf16", "fp8", "nvfp4"};
constexpr const char* kFp8Recipes[] = {"auto", "tensorwise", "delayed", "mxfp8", "blockwise"};
constexpr const char* kParamsDtypes[] = {"bf16", "fp16", "fp32"};
constexpr const char* kRecompute[] = {"none", "selective", "full"};
constexpr const char* kGraphImpls[] = {"none", "local", "transformer_engine", "full_iteration"};
constexpr const char* kAttentionBackends[] = {"auto", "flash", "fused", "unfused", "local"};
constexpr const char* kFsdpSharding[] = {"no_shard", "optim", "optim_grads",
                                           "optim_grads_params"};
constexpr const char* kRouting[] = {"balanced", "uniform", "skewed", "trained"};
constexpr const char* kExpertGemm[] = {"auto", "per-expert", "grouped", "streams", "strided"};

}  // namespace

const char* to_string(Dispatcher d) { return kDispatchers[static_cast<int>(d)]; }
const char* to_string(FlexBackend b) { return kBackends[static_cast<int>(b)]; }
const char* to_string(Precision p) { return kPrecisions[static_cast<int>(p)]; }
const char* to_string(Fp8Recipe r) { return kFp8Recipes[static_cast<int>(r)]; }
const char* to_string(ParamsDtype d) { return kParamsDtypes[static_cast<int>(d)]; }
const char* to_string(RecomputeGranularity g) { return kRecompute[static_cast<int>(g)]; }
const char* to_string(CudaGraphImpl i) { return kGraphImpls[static_cast<int>(i)]; }
const char* to_string(AttentionBackend b) { return kAttentionBackends[static_cast<int>(b)]; }
const char* to_string(FsdpSharding f) { return kFsdpSharding[static_cast<int>(f)]; }
const char* to_string(RoutingKind k) { return kRouting[static_cast<int>(k)]; }
const char* to_string(ExpertGemm g) { return kExpertGemm[static_cast<int>(g)]; }

Dispatcher parse_dispatcher(const std::string& s, const std::string& w) {
  return parse_enum<Dispatcher>(s, w, kDispatchers);
}
FlexBackend parse_flex_backend(const std::string& s, const std::string& w) {
  return parse_enum<FlexBackend>(s, w, kBackends);
}
Precision parse_precision(const std::string& s, const std::string& w) {
  return parse_enum<Precision>(s, w, kPrecisions);
}
Fp8Recipe parse_fp8_recipe(const std::string& s, const std::string& w) {
  return parse_enum<Fp8Recipe>(s, w, kFp8Recipes);
}
Fp8Recipe parse_megatron_fp8_recipe(const std::string& s, const std::string& w) {
  return s == "custom" ? Fp8Recipe::tensorwise : parse_fp8_recipe(s, w);
}
namespace {
/// Linear-module names and the prefix of the cost model's GEMM names each covers.
constexpr std::pair<const char*, const char*> kLinearModulePrefixes[] = {
    {"attn", "attn."},          {"latent", "moe.latent_"},     {"mtp", "mtp."},
    {"shared_expert", "shared."}, {"experts", "expert."},      {"mlp", "mlp.fc"},
    {"mamba_in", "mamba.in_proj"}, {"mamba_out", "mamba.out_proj"}};
bool has(const std::vector<std::string>& v, const char* s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
}  // namespace

const char* const kLinearModules = "attn|latent|mtp|shared_expert|experts|mlp|mamba_in|mamba_out";

void check_linear_modules(const std::vector<std::string>& names, const std::string& where) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    const bool known = std::any_of(std::begin(kLinearModulePrefixes), std::end(kLinearModulePrefixes),
                                   [&](const auto& m) { return names[i] == m.first; });
    if (!known)
      throw EPO_INPUT_ERROR(where, ": '", names[i], "' is not allowed (allowed: ", kLinearModules, ")");
    if (std::find(names.begin(), names.begin() + i, names[i]) != names.begin() + i)
      throw EPO_INPUT_ERROR(where, ": '", names[i], "' is listed twice");
  }
}

Precision Options::linear_precision(const char* gemm, Precision base) const {
  if (base == Precision::bf16 || std::strncmp(gemm, "lm_head", 7) == 0) return Precision::bf16;
  if (bf16_linears.empty() && fp8_linears.empty()) return base;
  for (const auto& [module, prefix] : kLinearModulePrefixes) {
    if (std::strncmp(gemm, prefix, std::strlen(prefix)) != 0) continue;
    if (has(bf16_linears, module)) return Precision::bf16;
    if (base == Precision::nvfp4 && has(fp8_linears, module)) return Precision::fp8;
    break;
  }
  return base;
}

bool fused_grouped_mlp_runs(const Config& c) {
  return c.opt.fused_grouped_mlp && c.hw.compute_capability_major >= 10 &&
         c.opt.precision == Precision::fp8 && c.par.etp == 1 && c.model.num_experts > 0 &&
         c.model.gated_linear_unit;
}
int unfused_activation_tensors(const Config& c) {
  const ModelSpec& m = c.model;
  if (m.num_experts <= 0 || fused_grouped_mlp_runs(c)) return 0;
  if (m.gated_linear_unit) return c.opt.bias_activation_fusion ? 0 : 2;
  if (m.hybrid.enabled()) return c.opt.fused_weighted_squared_relu ? 0 : 2;  // squared ReLU
  return 1;  // GELU
}
bool bridge_preset_gathers_fp8_params(const std::string& p) {
  return (p.find("fp8") != std::string::npos || p.find("nvfp4") != std::string::npos) &&
         p.find("subchannel") == std::string::npos && p.find("blockwise") == std::string::npos;
}
Fp8Recipe bridge_preset_fp8_recipe(const std::string& p) {
  if (p.find("mxfp8") != std::string::npos) return Fp8Recipe::mxfp8;
  if (p.find("subchannel") != std::string::npos || p.find("blockwise") != std::string::npos)
    return Fp8Recipe::blockwise;
  if (p.find("fp8_delayed") != std::string::npos) return Fp8Recipe::delayed;
  if (p.find("fp8_current_scaling") != std::string::npos) return Fp8Recipe::tensorwise;
  return Fp8Recipe::automatic;
}
Fp8Recipe fp8_recipe(const Config& cfg) {
  if (cfg.opt.fp8_recipe != Fp8Recipe::automatic) return cfg.opt.fp8_recipe;
  return cfg.hw.compute_capability_major >= 10 ? Fp8Recipe::mxfp8 : Fp8Recipe::tensorwise;
}
std::pair<int, int> bridge_preset_bf16_layers(const std::string& p) {
  if (p == "nemotron_3_super_bf16_with_nvfp4_mixed") return {0, 14};
  if (p.find("fp8_current_scaling") == std::string::npos) return {0, 0};
  const bool hybrid = p.rfind("nemotron_h", 0) == 0 || p.rfind("nanov2", 0) == 0;
  return hybrid ? std::pair<int, int>{2, 2} : std::pair<int, int>{1, 1};
}
ParamsDtype parse_params_dtype(const std::string& s, const std::string& w) {
  return parse_enum<ParamsDtype>(s, w, kParamsDtypes);
}
RecomputeGranularity parse_recompute(const std::string& s, const std::string& w) {
  return parse_enum<RecomputeGranularity>(s, w, kRecompute);
}
CudaGraphImpl parse_cuda_graph_impl(const std::string& s, const std::string& w) {
  return parse_enum<CudaGraphImpl>(s, w, kGraphImpls);
}
AttentionBackend parse_attention_backend(const std::string& s, const std::string& w) {
  return parse_enum<AttentionBackend>(s, w, kAttentionBackends);
}
bool parse_cross_entropy_te(const std::string& s, const std::string& w) {
  EPO_REQUIRE_INPUT(s == "te" || s == "native", w, ": cross-entropy fusion '", s,
                    "' (allowed: te, native)");
  return s == "te";
}
FsdpSharding parse_fsdp_sharding(const std::string& s, const std::string& w) {
  return parse_enum<FsdpSharding>(s, w, kFsdpSharding);
}
RoutingKind parse_routing(const std::string& s, const std::string& w) {
  return parse_enum<RoutingKind>(s, w, kRouting);
}
ExpertGemm parse_expert_gemm(const std::string& s, const std::string& w) {
  return parse_enum<ExpertGemm>(s, w, kExpertGemm);
}

bool Options::recomputes(const char* module) const {
  if (recompute_granularity != RecomputeGranularity::selective) return false;
  if (recompute_modules.empty()) return std::string(module) == "core_attn";
  return std::find(recompute_modules.begin(), recompute_modules.end(), module) !=
         recompute_modules.end();
}

int Options::effective_comm_sms(bool single_nvlink_domain) const {
  if (comm_sms > 0) return comm_sms;
  if (dispatcher != Dispatcher::flex) return 0;
  const int per_backend = flex_backend == FlexBackend::deepep ? deepep_num_sms : hybridep_num_sms;
  if (per_backend > 0) return per_backend;
  if (flex_backend == FlexBackend::deepep) return 20;
  return single_nvlink_domain ? 24 : 8;
}

namespace {
void require_positive(int v, const char* name) {
  EPO_REQUIRE_INPUT(v >= 1, name, " = ", v, " is out of range (allowed: an integer >= 1)");
}
}  // namespace

void Config::derive_and_check() {
  // Ranges first (model/limits.hpp, shared with the JSON reader); then every product of sizes in
  // 64 bits, so no check below can overflow.
  check_config_limits(*this);
  require_positive(num_gpus, "gpus");
  EPO_REQUIRE_INPUT(virtual_ranks == 0 || virtual_ranks == num_gpus, "virtual_ranks = ",
                    virtual_ranks, " must equal gpus = ", num_gpus,
                    " (allowed: 0, or the number of ranks sharing the one GPU)");
  require_positive(par.tp, "tp");
  require_positive(par.pp, "pp");
  require_positive(par.vpp, "vpp");
  require_positive(par.cp, "cp");
  require_positive(par.ep, "ep");
  require_positive(par.etp, "etp");
  require_positive(par.micro_batch_size, "mbs");
  require_positive(par.seq_length, "seq");
  const long long mp = static_cast<long long>(par.tp) * par.pp * par.cp;
  EPO_REQUIRE_INPUT(num_gpus % mp == 0, "layout tp*pp*cp = ", par.tp, "*", par.pp, "*", par.cp,
                    " = ", mp, " does not divide gpus = ", num_gpus,
                    " (allowed: a layout whose product divides the GPU count)");
  par.dp = static_cast<int>(num_gpus / mp);
  // Megatron-FSDP (v1) runs on the distributed optimizer: Megatron-LM turns it on (arguments.py).
  if (opt.megatron_fsdp) opt.distributed_optimizer = true;
  const long long expert_mp = static_cast<long long>(par.etp) * par.ep * par.pp;
  EPO_REQUIRE_INPUT(num_gpus % expert_mp == 0, "expert layout etp*ep*pp = ", par.etp, "*", par.ep,
                    "*", par.pp, " = ", expert_mp, " does not divide gpus = ", num_gpus,
                    " (allowed: etp*ep*pp dividing the GPU count)");
  const long long dense_group = static_cast<long long>(par.tp) * par.cp * par.dp;
  const long long expert_group = static_cast<long long>(par.etp) * par.ep;
  EPO_REQUIRE_INPUT(dense_group % expert_group == 0, "etp*ep = ", expert_group,
                    " does not divide tp*cp*dp = ", dense_group,
                    " (allowed: the expert group folded inside one pipeline stage)");
  if (model.num_experts > 0) {
    EPO_REQUIRE_INPUT(model.num_experts % par.ep == 0, "ep = ", par.ep,
                      " does not divide the model's ", model.num_experts,
                      " experts (allowed: a divisor of ", model.num_experts, ")");
  } else {
    EPO_REQUIRE_INPUT(par.ep == 1, "ep = ", par.ep, " but the model has no experts (allowed: 1)");
  }
  const long long chunks = static_cast<long long>(par.pp) * par.vpp;
  // Megatron splits layers unevenly across virtual stages when asked (first/last stage layer
  // counts); every stage needs at least one layer.
  EPO_REQUIRE_INPUT(model.num_layers >= chunks, "pp*vpp = ", par.pp, "*", par.vpp, " = ", chunks,
                    " exceeds the model's ", model.num_layers,
                    " layers (allowed: at most one virtual stage per layer)");
  EPO_REQUIRE_INPUT(par.vpp == 1 || par.pp > 1, "vpp = ", par.vpp,
                    " needs pp > 1 (allowed: vpp = 1 when pp = 1)");
  EPO_REQUIRE_INPUT(model.num_attention_heads % par.tp == 0, "tp = ", par.tp,
                    " does not divide the model's ", model.num_attention_heads,
                    " attention heads (allowed: a divisor of ", model.num_attention_heads, ")");
  EPO_REQUIRE_INPUT(par.seq_length % par.cp == 0, "cp = ", par.cp, " does not divide seq = ",
                    par.seq_length, " (allowed: a divisor of seq)");
  EPO_REQUIRE_INPUT(!par.sequence_parallel || par.seq_length % (par.cp * par.tp) == 0,
                    "sequence parallel needs seq divisible by tp*cp");
  const long long batch_per_step = static_cast<long long>(par.micro_batch_size) * par.dp;
  if (par.global_batch_size == 0) {
    EPO_REQUIRE_INPUT(batch_per_step <= limits::kGlobalBatch.max, "gbs = mbs*dp = ",
                      par.micro_batch_size, "*", par.dp, " = ", batch_per_step,
                      " is out of range (allowed: ", limits::kGlobalBatch.min, "..",
                      limits::kGlobalBatch.max, "; lower mbs or dp)");
    par.global_batch_size = static_cast<int>(batch_per_step);
  }
  EPO_REQUIRE_INPUT(par.global_batch_size % batch_per_step == 0, "gbs = ",
                    par.global_batch_size, " is not a multiple of mbs*dp = ", batch_per_step,
                    " (allowed: a multiple of micro-batch size times data-parallel size)");
  check_pipeline_slots(*this);
  EPO_REQUIRE_INPUT(opt.comm_sms >= 0 && opt.comm_sms <= std::max(1, hw.num_sms), "comm_sms = ",
                    opt.comm_sms, " is out of range (allowed: 0 for the backend default, or 1..",
                    hw.num_sms, ")");
  EPO_REQUIRE_INPUT(opt.cuda_device_max_connections >= 1 && opt.cuda_device_max_connections <= 32,
                    "cuda_device_max_connections = ", opt.cuda_device_max_connections,
                    " is out of range (allowed: 1..32)");
  EPO_REQUIRE_INPUT(opt.capacity_factor >= 0.0, "capacity_factor = ", opt.capacity_factor,
                    " is out of range (allowed: 0 for dropless, or > 0)");
  EPO_REQUIRE_INPUT(opt.routing.skew >= 0.0 && opt.routing.skew <= 4.0, "skew = ",
                    opt.routing.skew, " is out of range (allowed: 0..4)");
}

long long Config::tokens_per_microbatch() const {
  return static_cast<long long>(par.seq_length / par.cp) * par.micro_batch_size;
}

int Config::ep_ranks_per_nvlink_domain() const {
  // EP ranks are laid out innermost after ETP (Megatron's expert rank order), so the ep*etp GPUs
  // of one EP group are consecutive and fill NVLink domains in order.
  const int domain = std::max(1, hw.nvlink_domain_size);
  return std::max(1, std::min(par.ep, domain / std::max(1, par.etp)));
}

int Config::ep_num_domains() const {
  const int per = ep_ranks_per_nvlink_domain();
  return (par.ep + per - 1) / per;
}

int Config::layers_per_chunk() const {
  const int chunks = par.pp * par.vpp;
  return (model.num_layers + chunks - 1) / chunks;
}

}  // namespace epo::model
