#pragma once
// Hand-built configurations and op costs for schedule and simulator tests: durations are chosen in
// the test, never taken from the cost model, so expected step times can be derived by hand.
#include "model/config.hpp"
#include "model/cost.hpp"
#include "model/simulate.hpp"

namespace epo::model::testing {

/// A small MoE model: `layers` decoder layers, 8 experts, EP 2, dp 1, `microbatches` micro-batches.
inline Config make_config(int layers, int pp, int vpp, int microbatches, bool overlap,
                          bool delay_wgrad = false) {
  Config c;
  c.model.name = "test";
  c.model.num_layers = layers;
  c.model.num_experts = 8;
  c.model.router_topk = 2;
  c.num_gpus = 2 * pp;
  c.par.pp = pp;
  c.par.vpp = vpp;
  c.par.ep = 2;
  c.par.dp = 2;
  c.par.micro_batch_size = 1;
  c.par.global_batch_size = microbatches * 2;
  c.opt.overlap_moe_expert_parallel_comm = overlap;
  c.opt.delay_wgrad_compute = delay_wgrad;
  c.opt.cuda_device_max_connections = 32;
  c.hw.name = "test";
  c.hw.num_sms = 132;
  c.hw.host_sync_us = 0.0;
  return c;
}

inline OpCost op_cost(OpKind kind, Direction dir, TimeNs ns, int kernels = 1) {
  OpCost c;
  c.kind = kind;
  c.dir = dir;
  const bool comm = kind == OpKind::dispatch || kind == OpKind::combine ||
                    kind == OpKind::pp_send_recv || kind == OpKind::dp_grad_reduce;
  c.stream = comm ? StreamKind::comm : StreamKind::compute;
  c.link = comm ? LinkClass::nvlink : LinkClass::none;
  c.sms = comm ? 20 : 132;
  c.num_kernels = kernels;
  c.duration_ns = ns;
  return c;
}

/// Durations of one layer's nodes (ns); wgrad nodes only count when the schedule delays them.
struct LayerNs {
  TimeNs pd_f = 1000, di_f = 1000, mlp_f = 1000, co_f = 1000;
  TimeNs pd_b = 1000, di_b = 1000, mlp_b = 1000, co_b = 1000;
  TimeNs mlp_w = 0, pd_w = 0;
  TimeNs mtp_f = 0, mtp_b = 0;
  int kernels = 1;
  TimeNs host = 0;  ///< host issue time of every op that has a duration
};

inline LayerCosts make_layer(const LayerNs& n, bool moe) {
  LayerCosts L;
  L.is_moe = moe;
  const Direction F = Direction::forward, B = Direction::backward, W = Direction::wgrad;
  L.ops.push_back(op_cost(OpKind::pre_dispatch, F, n.pd_f, n.kernels));
  L.ops.push_back(op_cost(OpKind::mlp, F, n.mlp_f, n.kernels));
  L.ops.push_back(op_cost(OpKind::pre_dispatch, B, n.pd_b, n.kernels));
  L.ops.push_back(op_cost(OpKind::mlp, B, n.mlp_b, n.kernels));
  L.ops.push_back(op_cost(OpKind::mlp_wgrad, W, n.mlp_w, n.kernels));
  L.ops.push_back(op_cost(OpKind::pre_dispatch_wgrad, W, n.pd_w, n.kernels));
  if (moe) {
    L.ops.push_back(op_cost(OpKind::dispatch, F, n.di_f));
    L.ops.push_back(op_cost(OpKind::combine, F, n.co_f));
    L.ops.push_back(op_cost(OpKind::dispatch, B, n.di_b));
    L.ops.push_back(op_cost(OpKind::combine, B, n.co_b));
  }
  L.ops.push_back(op_cost(OpKind::mtp_post, F, n.mtp_f));
  L.ops.push_back(op_cost(OpKind::mtp_post, B, n.mtp_b));
  for (auto& op : L.ops)
    if (op.duration_ns > 0) op.host_ns = n.host;
  return L;
}

/// Step costs with every layer as `n`; embedding, LM head, P2P and gradient reduce take `edge_ns`.
inline StepCosts make_costs(const LayerNs& n, TimeNs edge_ns = 0) {
  StepCosts s;
  s.moe_layer = make_layer(n, true);
  s.dense_layer = make_layer(n, false);
  s.mtp_layer = make_layer(n, true);
  s.embedding_fwd = op_cost(OpKind::embedding, Direction::forward, edge_ns);
  s.embedding_bwd = op_cost(OpKind::embedding, Direction::backward, edge_ns);
  s.lm_head_fwd = op_cost(OpKind::lm_head_loss, Direction::forward, edge_ns);
  s.lm_head_bwd = op_cost(OpKind::lm_head_loss, Direction::backward, edge_ns);
  s.pp_send_recv = op_cost(OpKind::pp_send_recv, Direction::forward, edge_ns);
  s.pp_send_recv.sms = 0;
  s.dp_grad_reduce = op_cost(OpKind::dp_grad_reduce, Direction::backward, edge_ns);
  s.dp_grad_reduce.sms = 0;
  return s;
}

/// Simulator options for hand derivations: no contention, no SM admission wait.
inline SimOptions ideal_options() {
  SimOptions o;
  o.contention = false;
  o.sm_admission = false;
  return o;
}

}  // namespace epo::model::testing
