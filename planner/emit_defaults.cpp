// What the emitted settings imply beside what a search varies: CUDA_DEVICE_MAX_CONNECTIONS, the
// recipes' FP8 defaults, the flex SM knobs a Megatron-Core version takes, HybridEP's topology.
#include <algorithm>

#include "planner/emit.hpp"

namespace epo::planner {

using model::Config;
using model::Dispatcher;
using model::FlexBackend;

namespace {

bool is_main(const ValidationContext& ctx) { return ctx.megatron == MegatronVersion::main; }

}  // namespace

int recommended_cuda_device_max_connections(const Config& c) {
  // Megatron-LM asserts 1 for TP/CP > 1 before Blackwell unless EP overlap is on (arguments.py
  // l.1453-1479); with overlap the comm stream needs its own hardware queue.
  if (c.opt.overlap_moe_expert_parallel_comm) return 32;
  // Megatron-FSDP needs more than one queue (its gathers run on their own stream); Megatron-LM
  // then only warns about TP/CP.
  if (c.opt.megatron_fsdp) return 32;
  if ((c.par.tp > 1 || c.par.cp > 1) && c.hw.compute_capability_major < 10) return 1;
  return 32;
}

void apply_emitted_defaults(Config& c, const ValidationContext& ctx) {
  auto& o = c.opt;
  if (!o.quantized()) return;
  if (o.distributed_optimizer && o.fp8_recipe != model::Fp8Recipe::blockwise) o.fp8_param_gather = true;
  if (o.precision != model::Precision::fp8) return;
  // Bridge's Hopper preset (current scaling) keeps the first and last layers in BF16.
  if (ctx.frontend == Frontend::bridge && c.hw.compute_capability_major < 10 &&
      o.bf16_layers_start + o.bf16_layers_end == 0)
    o.bf16_layers_start = o.bf16_layers_end = 1;
  if (c.hw.compute_capability_major >= 10 && is_main(ctx) && c.model.num_experts > 0 &&
      c.model.gated_linear_unit)
    o.fused_grouped_mlp = true;
}

SmKnobs sm_knobs(const Config& c, const ValidationContext& ctx) {
  const auto& o = c.opt;
  SmKnobs k{0, o.deepep_num_sms, o.hybridep_num_sms};
  if (o.dispatcher != Dispatcher::flex || o.comm_sms <= 0) return k;
  if (is_main(ctx)) k.flex = o.comm_sms;
  else (o.flex_backend == FlexBackend::deepep ? k.deepep : k.hybridep) = o.comm_sms;
  return k;
}

void route_per_backend_sms(model::Options& o, bool flex_sms_given) {
  int& per_backend = o.flex_backend == FlexBackend::deepep ? o.deepep_num_sms : o.hybridep_num_sms;
  if (flex_sms_given || o.dispatcher != Dispatcher::flex || per_backend <= 0) return;
  o.comm_sms = per_backend;
  per_backend = 0;
}

int hybridep_ranks_per_nvlink_domain(const Config& c) {
  return std::max(1, std::min(c.par.ep, c.hw.nvlink_domain_size));
}

}  // namespace epo::planner
