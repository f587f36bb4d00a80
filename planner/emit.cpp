#include "planner/emit.hpp"

#include <sstream>

#include "model/config_io.hpp"
#include "model/error.hpp"

namespace epo::planner {

using model::Config;
using model::CudaGraphImpl;
using model::Dispatcher;
using model::FlexBackend;
using model::RecomputeGranularity;

namespace {

std::string b(bool v) { return v ? "true" : "false"; }
std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}
bool is_main(const ValidationContext& ctx) { return ctx.megatron == MegatronVersion::main; }
/// The SM-count knob of this Megatron-Core version (HEAD: one knob for every flex backend).
std::string sms_key(const Config& c, const ValidationContext& ctx) {
  if (is_main(ctx)) return "moe_flex_dispatcher_num_sms";
  return c.opt.flex_backend == FlexBackend::deepep ? "moe_deepep_num_sms" : "moe_hybridep_num_sms";
}
std::string graph_key(const ValidationContext& ctx) {
  return is_main(ctx) ? "cuda_graph_modules" : "cuda_graph_scope";
}

int to_int(const std::string& v, const std::string& where) {
  try {
    size_t pos = 0;
    const int x = std::stoi(v, &pos);
    if (pos == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw EPO_INPUT_ERROR(where, ": '", v, "' is not an integer");
}
double to_double(const std::string& v, const std::string& where) {
  try {
    size_t pos = 0;
    const double x = std::stod(v, &pos);
    if (pos == v.size()) return x;
  } catch (const std::exception&) {
  }
  throw EPO_INPUT_ERROR(where, ": '", v, "' is not a number");
}
bool to_bool(const std::string& v, const std::string& where) {
  if (v == "true" || v == "True") return true;
  if (v == "false" || v == "False") return false;
  throw EPO_INPUT_ERROR(where, ": '", v, "' is not a boolean (allowed: true|false)");
}
std::vector<std::string> to_list(const std::string& v) {
  std::vector<std::string> out;
  if (v == "null" || v == "[]") return out;
  std::string s = v;
  if (!s.empty() && s.front() == '[') s = s.substr(1);
  if (!s.empty() && s.back() == ']') s.pop_back();
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}
std::string list_value(const std::vector<std::string>& v) { return "[" + join(v, ",") + "]"; }

}  // namespace

int recommended_cuda_device_max_connections(const Config& c) {
  if (c.opt.overlap_moe_expert_parallel_comm || c.opt.dispatcher == Dispatcher::flex) return 32;
  if ((c.par.tp > 1 || c.par.cp > 1) && c.hw.compute_capability_major < 10) return 1;
  return 32;
}

std::string emit_bridge(const Config& c, const ValidationContext& ctx) {
  std::ostringstream os;
  const auto& p = c.par;
  const auto& o = c.opt;
  os << "# Megatron-Bridge overrides: " << c.model_name << " on " << c.num_gpus << " x "
     << c.hardware_name << " (" << to_string(ctx.megatron) << ")\n";
  os << "model.tensor_model_parallel_size=" << p.tp << "\n";
  os << "model.pipeline_model_parallel_size=" << p.pp << "\n";
  os << "model.virtual_pipeline_model_parallel_size="
     << (p.vpp > 1 ? std::to_string(p.vpp) : "null") << "\n";
  os << "model.context_parallel_size=" << p.cp << "\n";
  os << "model.expert_model_parallel_size=" << p.ep << "\n";
  os << "model.expert_tensor_parallel_size=" << p.etp << "\n";
  os << "model.sequence_parallel=" << b(p.sequence_parallel) << "\n";
  os << "model.seq_length=" << p.seq_length << "\n";
  os << "train.micro_batch_size=" << p.micro_batch_size << "\n";
  os << "train.global_batch_size=" << p.global_batch_size << "\n";
  os << "model.moe_token_dispatcher_type=" << model::to_string(o.dispatcher) << "\n";
  if (o.dispatcher == Dispatcher::flex) {
    os << "model.moe_flex_dispatcher_backend=" << model::to_string(o.flex_backend) << "\n";
    if (o.comm_sms > 0) os << "model." << sms_key(c, ctx) << "=" << o.comm_sms << "\n";
  }
  os << "comm_overlap.overlap_moe_expert_parallel_comm=" << b(o.overlap_moe_expert_parallel_comm)
     << "\n";
  os << "comm_overlap.delay_wgrad_compute=" << b(o.delay_wgrad_compute) << "\n";
  if (o.ep_overlap_early_attn_memory_release)
    os << "model.ep_overlap_early_attn_memory_release=true\n";
  os << "model.moe_permute_fusion=" << b(o.moe_permute_fusion) << "\n";
  os << "model.moe_shared_expert_overlap=" << b(o.moe_shared_expert_overlap) << "\n";
  os << "model.moe_grouped_gemm=" << b(o.moe_grouped_gemm) << "\n";
  os << "model.recompute_granularity="
     << (o.recompute_granularity == RecomputeGranularity::none
             ? "null"
             : model::to_string(o.recompute_granularity))
     << "\n";
  if (!o.recompute_method.empty()) os << "model.recompute_method=" << o.recompute_method << "\n";
  if (o.recompute_num_layers > 0)
    os << "model.recompute_num_layers=" << o.recompute_num_layers << "\n";
  if (!o.recompute_modules.empty())
    os << "model.recompute_modules=" << list_value(o.recompute_modules) << "\n";
  os << "model.cuda_graph_impl=" << model::to_string(o.cuda_graph_impl) << "\n";
  if (o.cuda_graph_impl != CudaGraphImpl::none && !o.cuda_graph_modules.empty())
    os << "model." << graph_key(ctx) << "=" << list_value(o.cuda_graph_modules) << "\n";
  os << "model.bf16=true\n";
  os << "model.fp8=" << (o.precision == model::Precision::fp8 ? "hybrid" : "null") << "\n";
  if (o.capacity_factor > 0) os << "model.moe_expert_capacity_factor=" << o.capacity_factor << "\n";
  if (o.high_priority_a2a_comm_stream) os << "model.high_priority_a2a_comm_stream=true\n";
  os << "model.gradient_accumulation_fusion=" << b(o.gradient_accumulation_fusion) << "\n";
  os << "ddp.use_distributed_optimizer=" << b(o.distributed_optimizer) << "\n";
  os << "ddp.overlap_grad_reduce=" << b(o.overlap_grad_reduce) << "\n";
  return os.str();
}

Config apply_bridge_overrides(Config c, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  auto& p = c.par;
  auto& o = c.opt;
  while (std::getline(in, line)) {
    ++n;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const auto eq = line.find('=');
    const std::string where = "bridge overrides line " + std::to_string(n);
    EPO_REQUIRE_INPUT(eq != std::string::npos, where, ": '", line, "' is not key=value");
    const std::string k = line.substr(0, eq), v = line.substr(eq + 1);
    const std::string w = where + " (" + k + ")";
    if (k == "model.tensor_model_parallel_size") p.tp = to_int(v, w);
    else if (k == "model.pipeline_model_parallel_size") p.pp = to_int(v, w);
    else if (k == "model.virtual_pipeline_model_parallel_size") p.vpp = v == "null" ? 1 : to_int(v, w);
    else if (k == "model.context_parallel_size") p.cp = to_int(v, w);
    else if (k == "model.expert_model_parallel_size") p.ep = to_int(v, w);
    else if (k == "model.expert_tensor_parallel_size") p.etp = to_int(v, w);
    else if (k == "model.sequence_parallel") p.sequence_parallel = to_bool(v, w);
    else if (k == "model.seq_length" || k == "dataset.sequence_length") p.seq_length = to_int(v, w);
    else if (k == "train.micro_batch_size") p.micro_batch_size = to_int(v, w);
    else if (k == "train.global_batch_size") p.global_batch_size = to_int(v, w);
    else if (k == "model.moe_token_dispatcher_type") o.dispatcher = model::parse_dispatcher(v, w);
    else if (k == "model.moe_flex_dispatcher_backend") {
      if (v == "null") o.dispatcher = Dispatcher::alltoall;  // Bridge: no backend = alltoall
      else o.flex_backend = model::parse_flex_backend(v, w);
    } else if (k == "model.moe_flex_dispatcher_num_sms" || k == "model.moe_deepep_num_sms" ||
               k == "model.moe_hybridep_num_sms")
      o.comm_sms = v == "null" ? 0 : to_int(v, w);
    else if (k == "comm_overlap.overlap_moe_expert_parallel_comm")
      o.overlap_moe_expert_parallel_comm = to_bool(v, w);
    else if (k == "comm_overlap.delay_wgrad_compute") o.delay_wgrad_compute = to_bool(v, w);
    else if (k == "model.ep_overlap_early_attn_memory_release")
      o.ep_overlap_early_attn_memory_release = to_bool(v, w);
    else if (k == "model.moe_permute_fusion") o.moe_permute_fusion = to_bool(v, w);
    else if (k == "model.moe_shared_expert_overlap") o.moe_shared_expert_overlap = to_bool(v, w);
    else if (k == "model.moe_grouped_gemm") o.moe_grouped_gemm = to_bool(v, w);
    else if (k == "model.recompute_granularity")
      o.recompute_granularity = model::parse_recompute(v == "null" ? "none" : v, w);
    else if (k == "model.recompute_method") o.recompute_method = v == "null" ? "" : v;
    else if (k == "model.recompute_num_layers") o.recompute_num_layers = v == "null" ? 0 : to_int(v, w);
    else if (k == "model.recompute_modules") o.recompute_modules = to_list(v);
    else if (k == "model.cuda_graph_impl") o.cuda_graph_impl = model::parse_cuda_graph_impl(v, w);
    else if (k == "model.cuda_graph_modules" || k == "model.cuda_graph_scope")
      o.cuda_graph_modules = to_list(v);
    else if (k == "model.bf16") {
      EPO_REQUIRE_INPUT(to_bool(v, w), w, ": only bf16 models are modelled");
    } else if (k == "model.fp8")
      o.precision = v == "null" ? model::Precision::bf16 : model::Precision::fp8;
    else if (k == "model.moe_expert_capacity_factor")
      o.capacity_factor = v == "null" ? 0.0 : to_double(v, w);
    else if (k == "model.high_priority_a2a_comm_stream") o.high_priority_a2a_comm_stream = to_bool(v, w);
    else if (k == "model.gradient_accumulation_fusion") o.gradient_accumulation_fusion = to_bool(v, w);
    else if (k == "ddp.use_distributed_optimizer") o.distributed_optimizer = to_bool(v, w);
    else if (k == "ddp.overlap_grad_reduce") o.overlap_grad_reduce = to_bool(v, w);
    else
      throw EPO_INPUT_ERROR(where, ": unknown override key '", k, "'");
  }
  return c;
}

std::string emit_env(const Config& c) {
  std::ostringstream os;
  const auto& o = c.opt;
  os << "# environment for " << c.model_name << " on " << c.num_gpus << " x " << c.hardware_name
     << "\n";
  os << "export CUDA_DEVICE_MAX_CONNECTIONS=" << o.cuda_device_max_connections << "\n";
  if (o.overlap_moe_expert_parallel_comm) {
    // Persistent TE LayerNorm kernels would otherwise take every SM and starve the comm kernel.
    const bool one_domain = c.ep_num_domains() <= 1;
    const int margin =
        o.dispatcher == Dispatcher::flex ? o.effective_comm_sms(one_domain) : c.hw.nccl_sms;
    os << "export NVTE_FWD_LAYERNORM_SM_MARGIN=" << margin << "\n";
    os << "export NVTE_BWD_LAYERNORM_SM_MARGIN=" << margin << "\n";
  }
  if (o.dispatcher == Dispatcher::flex && o.flex_backend == FlexBackend::hybridep) {
    os << "export NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN="
       << std::min(c.par.tp * c.par.ep, c.hw.nvlink_domain_size) << "\n";
    os << "export USE_MNNVL=" << (c.hw.nvlink_domain_size > 8 ? 1 : 0) << "\n";
  }
  if (o.dispatcher == Dispatcher::flex && o.flex_backend == FlexBackend::deepep &&
      c.ep_num_domains() > 1)
    os << "export NVSHMEM_IB_ENABLE_IBGDA=1\n";
  os << "export NCCL_NVLS_ENABLE=0\n";
  os << "export TORCH_NCCL_AVOID_RECORD_STREAMS=1\n";
  os << "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n";
  return os.str();
}

Config apply_env(Config c, const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.rfind("export ", 0) != 0) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::string k = line.substr(7, eq - 7), v = line.substr(eq + 1);
    if (k == "CUDA_DEVICE_MAX_CONNECTIONS")
      c.opt.cuda_device_max_connections = to_int(v, "environment line " + std::to_string(n));
  }
  return c;
}

nlohmann::json emit_plan_json(const Config& cfg, const nlohmann::json& prediction,
                              const nlohmann::json& search) {
  return {{"schema_version", 1},
          {"kind", "plan"},
          {"config", model::to_json(cfg)},
          {"prediction", prediction},
          {"search", search}};
}

}  // namespace epo::planner
