// Shapes, activation slots and the runner's check of a schedule's ordering.
#include "executor/op_plan.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>

#include "executor/run.hpp"
#include "kernels/kernel_types.hpp"
#include "model/cost.hpp"
#include "model/error.hpp"
#include "model/routing_stats.hpp"

namespace epo::exec {

using model::Direction;
using model::OpKind;

model::Config with_layers(const model::Config& cfg, int layers) {
  model::Config c = cfg;
  EPO_REQUIRE_INPUT(layers >= 0, "--layers = ", layers, " is out of range (allowed: >= 1, or 0 "
                    "for all ", cfg.model.num_layers, " layers of ", cfg.model_name, ")");
  if (layers > 0) {
    EPO_REQUIRE_INPUT(layers <= cfg.model.num_layers, "--layers = ", layers, " but ",
                      cfg.model_name, " has ", cfg.model.num_layers, " layers");
    c.model.num_layers = layers;
    c.model.first_k_dense_layers = std::min(c.model.first_k_dense_layers, layers);
  }
  // The executor runs decoder layers only; MTP layers would need their own embedding path, and
  // the embedding and LM head are a seeded input and output gradient.
  c.model.mtp_num_layers = 0;
  c.decoder_only = true;
  c.derive_and_check();
  return c;
}

model::Config with_moe_layers(const model::Config& cfg, int moe_layers) {
  EPO_REQUIRE_INPUT(moe_layers >= 1 && moe_layers <= cfg.model.num_layers, "--moe-layers = ",
                    moe_layers, " is out of range (allowed: 1 to ", cfg.model.num_layers, " for ",
                    cfg.model_name, ")");
  model::Config c = cfg;
  c.model.first_k_dense_layers = 0;
  return with_layers(c, moe_layers);
}

void check_runnable(const model::Config& cfg, const RunOptions& options) {
  const auto& p = cfg.par;
  const auto& m = cfg.model;
  auto need = [](bool ok, const std::string& what) {
    if (!ok) throw EPO_INPUT_ERROR("epo run cannot run this plan: ", what);
  };
  need(p.tp == 1 && p.pp == 1 && p.cp == 1 && p.etp == 1 && p.vpp == 1,
       "it runs TP=PP=CP=ETP=VPP=1 (one pipeline stage); set --tp 1 --pp 1 --cp 1 --etp 1 --vpp 1");
  const int ranks = cfg.virtual_ranks > 0 ? cfg.virtual_ranks : cfg.num_gpus;
  need(p.ep == ranks, "EP = " + std::to_string(p.ep) + " must equal the ranks run (" +
                          std::to_string(ranks) + "); set --ep " + std::to_string(ranks));
  need(cfg.opt.dispatcher != model::Dispatcher::allgather,
       "dispatcher allgather is not executed; use --dispatcher alltoall or flex");
  need(cfg.opt.precision == model::Precision::bf16, "precision fp8 is not executed; use bf16");
  need(cfg.opt.capacity_factor == 0.0, "only dropless routing is executed; set --capacity-factor 0");
  need(cfg.opt.recompute_granularity == model::RecomputeGranularity::none,
       "recomputation is not executed; set --recompute none");
  need(m.num_experts > 0 && m.router_topk > 0, "the model has no routed experts");
  need(m.num_experts % p.ep == 0, "num_experts = " + std::to_string(m.num_experts) +
                                      " must be a multiple of EP = " + std::to_string(p.ep));
  need(m.num_experts <= kernels::kMaxRoutingExperts && m.router_topk <= kernels::kMaxTopk &&
           p.ep <= kernels::kMaxRanks,
       "at most 512 experts, top-k 32 and 64 EP ranks are supported by the kernels");
  need(m.hidden_size % 8 == 0 && m.moe_ffn_hidden_size % 8 == 0 &&
           m.shared_expert_ffn_hidden_size % 8 == 0 && m.ffn_hidden_size % 8 == 0,
       "hidden and FFN sizes must be multiples of 8 (16-byte rows)");
  need(m.gated_linear_unit, "only SwiGLU experts are executed");
  need(!m.hybrid.enabled() && m.moe_latent_size == 0,
       "hybrid Mamba layers and latent MoE are modelled (predict, plan), not executed");
  need(cfg.par.num_microbatches() >= 1, "the step has no micro-batch (gbs < mbs * dp)");
  EPO_REQUIRE_INPUT(options.iters >= 1, "--iters = ", options.iters, " is out of range (>= 1)");
  EPO_REQUIRE_INPUT(options.warmup >= 0, "--warmup = ", options.warmup, " is out of range (>= 0)");
}

RunShape run_shape(const model::Config& cfg) {
  const auto& m = cfg.model;
  RunShape s;
  s.num_ranks = cfg.par.ep;
  s.seq = cfg.par.seq_length;
  s.mbs = cfg.par.micro_batch_size;
  s.tokens = s.seq * s.mbs;
  s.hidden = m.hidden_size;
  s.num_heads = m.num_attention_heads;
  if (m.attention == model::AttentionKind::mla) {
    // Projection widths of MLA with the latent down-projections folded into one GEMM each way.
    s.qk_head_dim = m.mla.qk_nope_head_dim + m.mla.qk_rope_head_dim;
    s.v_head_dim = m.mla.v_head_dim;
    s.qkv_dim = s.num_heads * s.qk_head_dim + m.mla.kv_lora_rank + m.mla.qk_rope_head_dim;
  } else {
    s.qk_head_dim = m.head_dim;
    s.v_head_dim = m.head_dim;
    s.qkv_dim = (s.num_heads + 2 * m.num_query_groups) * m.head_dim;
  }
  s.ctx_dim = s.num_heads * s.v_head_dim;
  s.qkv_dim = std::max(s.qkv_dim, s.ctx_dim);  // the context is read from the QKV output
  s.num_experts = m.num_experts;
  s.topk = m.router_topk;
  s.local_experts = m.num_experts / std::max(1, s.num_ranks);
  s.expert_ffn = m.moe_ffn_hidden_size;
  s.shared_ffn = m.shared_expert_ffn_hidden_size;
  s.dense_ffn = m.ffn_hidden_size;
  s.num_layers = m.num_layers;
  s.first_k_dense = m.first_k_dense_layers;
  s.num_microbatches = cfg.par.num_microbatches();
  s.comm_sms = cfg.opt.dispatcher == model::Dispatcher::flex ? cfg.opt.effective_comm_sms(true)
                                                             : cfg.hw.nccl_sms;
  if (s.comm_sms <= 0) s.comm_sms = 16;
  return s;
}

namespace {

/// Offsets of segments of `rows` each padded to `align`; returns the padded total.
std::int64_t padded_offsets(const std::vector<int>& rows, int align,
                            std::vector<std::int64_t>& off) {
  off.assign(rows.size(), 0);
  std::int64_t at = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    off[i] = at;
    at += (static_cast<std::int64_t>(rows[i]) + align - 1) / align * align;
  }
  return at;
}

}  // namespace

Splits alltoall_splits(const std::vector<int>& counts, int num_ranks, int num_experts, int rank,
                       int align) {
  const int R = num_ranks, E = num_experts, El = E / R;
  EPO_REQUIRE_INPUT(static_cast<int>(counts.size()) == R * E && rank >= 0 && rank < R,
                    "alltoall_splits: counts of ", counts.size(), " entries for ", R, " ranks x ",
                    E, " experts, rank ", rank);
  Splits s;
  s.send_rows.assign(R, 0);
  s.recv_rows.assign(R, 0);
  s.loc_rows.assign(El, 0);
  for (int p = 0; p < R; ++p)
    for (int e = p * El; e < (p + 1) * El; ++e) s.send_rows[p] += counts[rank * E + e];
  for (int src = 0; src < R; ++src)
    for (int le = 0; le < El; ++le) {
      const int c = counts[src * E + rank * El + le];
      s.recv_rows[src] += c;
      s.loc_rows[le] += c;
    }
  auto prefix = [](const auto& rows) {
    std::vector<std::int64_t> off(rows.size(), 0);
    std::int64_t at = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      off[i] = at;
      at += rows[i];
    }
    return off;
  };
  s.send_off = prefix(s.send_rows);
  s.recv_off = prefix(s.recv_rows);
  s.padded_rows = padded_offsets(s.loc_rows, align, s.loc_off);
  for (auto r : s.recv_rows) s.total_recv += r;
  return s;
}

Splits flex_splits(const std::vector<int>& loc_counts, int align) {
  Splits s;
  s.loc_rows = loc_counts;
  s.padded_rows = padded_offsets(s.loc_rows, align, s.loc_off);
  for (int c : loc_counts) s.total_recv += c;
  return s;
}

ExpertGemm resolve_expert_gemm(ExpertGemm requested, const Splits& sp, double weight_elems,
                               bool shared_gpu) {
  if (requested != ExpertGemm::automatic) return requested;
  if (sp.loc_rows.empty()) return ExpertGemm::per_expert;
  std::int64_t rows = 0;
  for (int r : sp.loc_rows) rows += r;
  const double mean = static_cast<double>(rows) / static_cast<double>(sp.loc_rows.size());
  return model::automatic_expert_gemm(mean, weight_elems, shared_gpu);
}

std::string expert_gemm_note(const model::Config& cfg) {
  const model::ExpertGemm path = model::expert_gemm_path(cfg);
  std::string note = std::string("expert GEMMs: ") + model::to_string(path);
  if (cfg.opt.expert_gemm != model::ExpertGemm::automatic) return note + " (--expert-gemm)";
  switch (path) {
    case model::ExpertGemm::grouped:
      return note + " (auto: under 512 rows per expert)";
    case model::ExpertGemm::streams:
      return note +
             " (auto: 512 or more rows per expert, an fc1 weight of at most 8 Mi "
             "elements, a GPU per rank)";
    default:
      return note + " (auto: 512 or more rows per expert, and " +
             (cfg.virtual_ranks > 0 ? "virtual ranks sharing the GPU)" : "a large fc1 weight)");
  }
}

std::vector<float> skew_log_weights(const model::Config& cfg, int num_experts) {
  std::vector<float> log_w(static_cast<std::size_t>(std::max(0, num_experts)), 0.0f);
  if (!model::routes_by_popularity(cfg.opt.routing.kind) || num_experts <= 0) return log_w;
  const auto pop = model::expert_popularity(num_experts, cfg.opt.routing.kind,
                                            cfg.opt.routing.skew, cfg.opt.routing.seed);
  const double top = *std::max_element(pop.begin(), pop.end());
  for (std::size_t e = 0; e < log_w.size(); ++e)
    log_w[e] = static_cast<float>(std::log(pop[e] / top));
  return log_w;
}

int activation_slots(const model::Schedule& schedule) {
  std::map<int, std::pair<int, int>> life;  // mb -> first, last op index
  for (int i = 0; i < static_cast<int>(schedule.ops.size()); ++i) {
    const auto& op = schedule.ops[i];
    if (op.microbatch < 0) continue;
    auto it = life.find(op.microbatch);
    if (it == life.end()) life[op.microbatch] = {i, i};
    else it->second.second = i;
  }
  int best = 1;
  for (const auto& [mb, a] : life) {
    int alive = 0;
    for (const auto& [mb2, b] : life)
      if (b.first <= a.first && a.first <= b.second) ++alive;
    best = std::max(best, alive);
  }
  return best;
}

namespace {

using Key = std::tuple<int, int, int, int>;  // kind, dir, mb, layer

Key key(OpKind k, Direction d, int mb, int layer) {
  return {static_cast<int>(k), static_cast<int>(d), mb, layer};
}

std::map<Key, int> index_ops(const model::Schedule& s) {
  std::map<Key, int> idx;
  for (int i = 0; i < static_cast<int>(s.ops.size()); ++i) {
    const auto& op = s.ops[i];
    idx[key(op.kind, op.dir, op.microbatch, op.layer)] = i;
  }
  return idx;
}

int last_layer(const model::Schedule& s) {
  int last = -1;
  for (const auto& op : s.ops) last = std::max(last, op.layer);
  return last;
}

}  // namespace

namespace {

std::vector<int> producers_of(const model::Schedule& s, const std::map<Key, int>& idx,
                              int op_index) {
  const auto& op = s.ops[op_index];
  const int mb = op.microbatch, l = op.layer, L = last_layer(s);
  const auto F = Direction::forward, B = Direction::backward;
  std::vector<Key> want;
  // The node of a layer that hands the activation on: combine for MoE layers, mlp for dense.
  auto out_of = [&](int layer, Direction d) {
    if (d == B) return key(OpKind::pre_dispatch, B, mb, layer);
    const Key moe = key(OpKind::combine, F, mb, layer);
    return idx.count(moe) ? moe : key(OpKind::mlp, F, mb, layer);
  };
  switch (op.kind) {
    case OpKind::pre_dispatch:
      if (op.dir == F) want.push_back(l == 0 ? key(OpKind::embedding, F, mb, -1) : out_of(l - 1, F));
      else if (op.is_moe) want.push_back(key(OpKind::dispatch, B, mb, l));
      else want.push_back(key(OpKind::mlp, B, mb, l));
      break;
    case OpKind::dispatch:
      want.push_back(op.dir == F ? key(OpKind::pre_dispatch, F, mb, l) : key(OpKind::mlp, B, mb, l));
      break;
    case OpKind::mlp:
      if (op.dir == F) want.push_back(op.is_moe ? key(OpKind::dispatch, F, mb, l)
                                                : key(OpKind::pre_dispatch, F, mb, l));
      else if (op.is_moe) want.push_back(key(OpKind::combine, B, mb, l));
      else want.push_back(l == L ? key(OpKind::lm_head_loss, B, mb, -1) : out_of(l + 1, B));
      break;
    case OpKind::combine:
      if (op.dir == F) want.push_back(key(OpKind::mlp, F, mb, l));
      else want.push_back(l == L ? key(OpKind::lm_head_loss, B, mb, -1) : out_of(l + 1, B));
      break;
    case OpKind::mlp_wgrad: want.push_back(key(OpKind::mlp, B, mb, l)); break;
    case OpKind::pre_dispatch_wgrad: want.push_back(key(OpKind::pre_dispatch, B, mb, l)); break;
    case OpKind::lm_head_loss:
      want.push_back(op.dir == F ? out_of(L, F) : key(OpKind::lm_head_loss, F, mb, -1));
      break;
    case OpKind::embedding:
      if (op.dir == B) want.push_back(out_of(0, B));
      break;
    case OpKind::dp_grad_reduce: {
      // Reduces the gradients of its layer (every layer when -1): the last micro-batch's
      // weight-gradient producers must be done (delayed wgrad ops when the schedule has them).
      int last_mb = -1;
      for (const auto& [k, i] : idx) last_mb = std::max(last_mb, std::get<2>(k));
      for (int layer = (l < 0 ? 0 : l); layer <= (l < 0 ? L : l); ++layer)
        for (auto [kind, wkind] : {std::pair{OpKind::mlp, OpKind::mlp_wgrad},
                                   std::pair{OpKind::pre_dispatch, OpKind::pre_dispatch_wgrad}}) {
          const Key w = key(wkind, Direction::wgrad, last_mb, layer);
          want.push_back(idx.count(w) ? w : key(kind, B, last_mb, layer));
        }
      break;
    }
    default: break;
  }
  std::vector<int> out;
  for (const auto& k : want) {
    auto it = idx.find(k);
    if (it != idx.end()) out.push_back(it->second);
  }
  return out;
}

}  // namespace

std::vector<std::vector<int>> data_producers(const model::Schedule& s) {
  const auto idx = index_ops(s);
  std::vector<std::vector<int>> out(s.ops.size());
  for (int i = 0; i < static_cast<int>(s.ops.size()); ++i) out[i] = producers_of(s, idx, i);
  return out;
}

std::vector<std::string> verify_schedule_for_runner(const model::Schedule& s, int slots) {
  // Vector clocks: done[i][lane] = highest op index of that lane known complete when op i
  // starts. Lanes run FIFO, so op p (lane L) is complete before i iff p <= done[i][L].
  const int n = static_cast<int>(s.ops.size());
  std::vector<std::array<int, model::kNumLanes>> done(n);
  std::array<int, model::kNumLanes> lane_last;
  lane_last.fill(-1);
  std::vector<std::string> errors;
  const auto producers = data_producers(s);
  for (int i = 0; i < n; ++i) {
    const auto& op = s.ops[i];
    const int lane = static_cast<int>(op.lane);
    auto& d = done[i];
    d.fill(-1);
    auto absorb = [&](int p) {
      for (int l = 0; l < model::kNumLanes; ++l) d[l] = std::max(d[l], done[p][l]);
      d[static_cast<int>(s.ops[p].lane)] = std::max(d[static_cast<int>(s.ops[p].lane)], p);
    };
    if (lane_last[lane] >= 0) absorb(lane_last[lane]);
    for (int w = 0; w < op.num_waits; ++w) {
      const int p = op.waits[w];
      if (p < 0 || p >= i) {
        errors.push_back("op " + std::to_string(i) + " (" + model::op_name(op) +
                         ") waits for op " + std::to_string(p) + ", not an earlier op");
        continue;
      }
      absorb(p);
    }
    lane_last[lane] = i;
    auto before = [&](int p) { return p <= d[static_cast<int>(s.ops[p].lane)]; };
    for (int p : producers[i])
      if (!before(p))
        errors.push_back("op " + std::to_string(i) + " (" + model::op_name(op) + " mb " +
                         std::to_string(op.microbatch) + " layer " + std::to_string(op.layer) +
                         ") may start before its input from op " + std::to_string(p) + " (" +
                         model::op_name(s.ops[p]) + ")");
    // Slot reuse: the same layer of micro-batch mb - slots must be finished.
    if (op.microbatch >= slots && op.layer >= 0)
      for (int p = 0; p < n; ++p) {
        const auto& q = s.ops[p];
        if (q.microbatch == op.microbatch - slots && q.layer == op.layer && (p > i || !before(p)))
          errors.push_back("op " + std::to_string(i) + " (" + model::op_name(op) + " mb " +
                           std::to_string(op.microbatch) + ") reuses the slot of op " +
                           std::to_string(p) + " (" + model::op_name(q) + " mb " +
                           std::to_string(q.microbatch) + ") before it is finished");
      }
  }
  return errors;
}

}  // namespace epo::exec
