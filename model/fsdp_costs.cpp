// Megatron-FSDP (use_megatron_fsdp): the communication its sharding strategy adds to every
// micro-batch and what of it the step sees.
//
// Megatron-FSDP keeps a shard of the optimizer states (optim), also of the gradients
// (optim_grads) and also of the parameters (optim_grads_params) on each data-parallel rank of a
// distributed-optimizer instance (megatron_fsdp.py):
// - optim_grads and optim_grads_params reduce-scatter each layer's gradients after its backward
//   in every micro-batch ("grad_reduce_every_bprop"), not once after the last;
// - optim_grads_params all-gathers each layer's parameters before its forward and again before
//   its backward (resharded after the forward), prefetching the next layer's on a communication
//   stream so that the gather hides behind the current layer's compute;
// - with several instances (HSDP) the shards are reduced across the instances once per step.
// optim and no_shard communicate like the distributed optimizer and DDP (step_costs.cpp).
#include <algorithm>

#include "model/cost_builder.hpp"

namespace epo::model {

using detail::Builder;

void detail::add_fsdp_costs(const Config& cfg, StepCosts& sc) {
  const Options& o = cfg.opt;
  sc.fsdp_exposed_us = sc.fsdp_comm_us = 0;
  if (!o.fsdp_shards_grads() || cfg.virtual_ranks > 0 || cfg.decoder_only) return;
  const Parallel& p = cfg.par;
  const HardwareProfile& hw = cfg.hw;
  const GpuParams g = gpu_params(cfg);
  const int inst = o.optimizer_instances();
  const int domain = hw.nvlink_domain_size;
  // The groups a layer's parameters are sharded over: dense over DP x CP (with TP beside each
  // member), experts over expert-DP (with EP x ETP beside each), inside one instance.
  const ShardRanks shard = shard_ranks(cfg);
  const int dense_group = static_cast<int>(shard.dense);
  const int expert_group = static_cast<int>(shard.expert);
  const bool dense_net = dense_group * p.tp > domain;
  const bool expert_net = expert_group * p.ep * p.etp > domain;
  auto ring = [&](double bytes_per_param) {
    return ring_time_us(hw, g.dense * bytes_per_param, dense_group, dense_net) +
           ring_time_us(hw, g.expert * bytes_per_param, expert_group, expert_net);
  };
  // Gradients travel in the main-gradient type (megatron_fsdp_grad_comm_dtype 'auto'); the
  // parameters in bf16, or FP8 where the parameters are kept in FP8 (not MXFP8, gathered in bf16).
  const double grad_bytes = o.grad_reduce_in_fp32 ? 4.0 : 2.0;
  const bool fp8_gather = o.fp8_param_gather && o.precision == Precision::fp8 &&
                          fp8_recipe(cfg) != Fp8Recipe::mxfp8;
  const double param_bytes = fp8_gather ? 1.0 : 2.0;
  const double reduce = ring(grad_bytes);
  const double gather = o.fsdp_shards_params() ? ring(param_bytes) : 0.0;

  // One micro-batch: layer i+1's gather runs under layer i's forward, so the first layer's is
  // exposed and the rest only where they outlast the compute; in the backward the gathers and
  // the reduce-scatters run under the layers' backward, the first gather exposed.
  const double units = std::max(1.0, rank_decoder_layers(cfg));
  const double fwd = rank_layers_us(cfg, sc, true);
  const double bwd = rank_layers_us(cfg, sc, false);
  const double rest = (units - 1) / units;
  const double fwd_exposed = gather / units + std::max(0.0, (gather - fwd) * rest);
  const double bwd_exposed = gather / units + std::max(0.0, (gather + reduce - bwd) * rest);
  // While NCCL's kernels run beside the layers they hold SMs the layers' kernels wait for.
  const double hidden = std::min(gather, fwd) * rest + std::min(gather + reduce, bwd) * rest;
  const double slowed = hw.num_sms > hw.nccl_sms
                            ? hidden * hw.nccl_sms / static_cast<double>(hw.num_sms - hw.nccl_sms)
                            : 0.0;
  const double mb = static_cast<double>(p.num_microbatches());
  // The last micro-batch's last reduce-scatter has no compute left to hide behind.
  sc.fsdp_exposed_us = mb * (fwd_exposed + bwd_exposed + slowed) + reduce / units;
  sc.fsdp_comm_us = mb * (2 * gather + reduce);

  // What is left for the end of the step: the reduction across instances (its shard of the
  // gradients all-reduced), and, with the parameters sharded, no gather after the optimizer step.
  const double dense_shard = g.dense / dense_group, expert_shard = g.expert / expert_group;
  const bool across_net = cfg.num_gpus > domain;
  const double across =
      inst > 1 ? 2 * ring_time_us(hw, (dense_shard + expert_shard) * grad_bytes, inst, across_net)
               : 0.0;
  Component c;
  c.name = "dp.fsdp_across_instances";
  c.duration_us = across;
  (across_net ? c.net_bytes : c.nvl_bytes) =
      inst > 1 ? (dense_shard + expert_shard) * grad_bytes : 0.0;
  const int sms = sc.dp_grad_reduce.sms;
  sc.dp_grad_reduce =
      Builder::assemble(OpKind::dp_grad_reduce, Direction::backward, StreamKind::comm, {c});
  sc.dp_grad_reduce.link = across_net ? LinkClass::network : LinkClass::nvlink;
  sc.dp_grad_reduce.sms = sms;
  if (o.fsdp_shards_params()) sc.param_gather_us = sc.param_gather_first_us = 0;
}

}  // namespace epo::model
