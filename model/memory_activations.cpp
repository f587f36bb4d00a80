// What Megatron-Core (Transformer Engine layers, flash attention, grouped-GEMM experts, fused
// permute, probabilities applied in the expert activation) saves per layer, by module, and what
// each selective-recompute module drops:
//   core_attn     flash attention already recomputes its internals: nothing more
//   mla_up_proj   MLA query/key/value after the up-projections and RoPE (inputs kept)
//   layernorm     the pre-MLP norm output of MoE layers (the input norm is fused into QKV)
//   mlp           dense MLP layers: all but the input
//   moe_act       routed experts' activation output (fc2 input)
//   shared_experts shared experts' fc1 and activation outputs
//   moe           the whole MoE block but its input
#include <algorithm>

#include "model/cost_detail.hpp"
#include "model/memory_detail.hpp"

namespace epo::model::detail {

namespace {

constexpr double kAct = 2.0;  // bf16 activations (TE's FP8 saves on Hopper: data + transpose)

bool selective(const Options& o, const char* name) {
  return o.recompute_granularity == RecomputeGranularity::selective &&
         std::find(o.recompute_modules.begin(), o.recompute_modules.end(), name) !=
             o.recompute_modules.end();
}

struct Part {
  double saved = 0, full = 0, forward = 0, backward = 0;
  void keep(double b, bool dropped) {
    full += b;
    if (!dropped) saved += b;
  }
};

Part attention(const Config& cfg, double hs) {
  const ModelSpec& m = cfg.model;
  const Options& o = cfg.opt;
  const double S = static_cast<double>(cfg.tokens_per_microbatch()), tp = cfg.par.tp;
  const double sp = cfg.par.sequence_parallel ? tp : 1.0;
  Part a;
  a.keep(hs, false);  // layer input (residual, input-norm input)
  a.keep(hs, false);  // input-norm output, saved by the QKV (or down) projections
  double qkv = 0, out = 0;
  if (m.attention == AttentionKind::mla) {
    const MlaSpec& l = m.mla;
    const double heads = m.num_attention_heads / tp;
    // q/kv compressed (norm inputs) and their norm outputs (up-projection inputs).
    a.keep(2.0 * S * (l.q_lora_rank + l.kv_lora_rank) / sp * kAct, false);
    const bool up = selective(o, "mla_up_proj");
    qkv = S * heads * (2.0 * (l.qk_nope_head_dim + l.qk_rope_head_dim) + l.v_head_dim) * kAct;
    a.keep(qkv, up);  // query, key, value after fused RoPE (flash attention's inputs)
    out = S * heads * l.v_head_dim * kAct;
  } else {
    qkv = S * (m.num_attention_heads + 2.0 * m.num_query_groups) * m.head_dim / tp * kAct;
    a.keep(qkv, false);
    out = S * m.num_attention_heads * m.head_dim / tp * kAct;
  }
  a.keep(out, false);                                   // attention output (projection input)
  a.keep(S * m.num_attention_heads / tp * 4.0, false);  // softmax statistics (fp32)
  a.keep(hs, false);                                    // residual after attention (pre-MLP norm)
  // Backward: gradients of q/k/v and the output, and the up-projection replay.
  a.backward = qkv + out + (a.full - a.saved);
  return a;
}

Part dense_mlp(const Config& cfg, double hs) {
  const ModelSpec& m = cfg.model;
  const double S = static_cast<double>(cfg.tokens_per_microbatch()), tp = cfg.par.tp;
  const double glu = m.gated_linear_unit ? 2.0 : 1.0;
  const bool rc = selective(cfg.opt, "mlp");
  Part p;
  p.keep(hs, rc);  // norm output (norm fused into fc1; fc1 saves it)
  const double f = S * m.ffn_hidden_size / tp * kAct;
  p.keep(f * glu, rc);  // fc1 output (activation input)
  p.keep(f, rc);        // activation output (fc2 input)
  p.backward = f * (glu + 1) + 2 * hs + (p.full - p.saved);
  return p;
}

Part moe(const Config& cfg, double hs) {
  const ModelSpec& m = cfg.model;
  const Options& o = cfg.opt;
  const auto s = detail::make_shapes(cfg);
  const double S = s.tokens, tp = cfg.par.tp, h = m.hidden_size;
  const double glu = m.gated_linear_unit ? 2.0 : 1.0;
  const bool all = selective(o, "moe");
  Part p;
  // Norm output: router and dispatcher input; the checkpoint's input when `moe` is recomputed.
  p.keep(hs, !all && selective(o, "layernorm"));
  p.keep(s.moe_tokens * m.num_experts * 4.0 * 2, all);  // router logits and scores (fp32)
  const double P = s.recv_pairs, F = static_cast<double>(m.moe_ffn_hidden_size) / cfg.par.etp;
  p.keep(P * h * kAct, all);                             // received tokens (fc1 input)
  p.keep(P * F * glu * kAct, all);                       // fc1 output (activation input)
  p.keep(P * F * kAct, all || selective(o, "moe_act"));  // activation output (fc2 input)
  p.keep(P * 4.0, all);                                  // routing probabilities per pair
  if (m.shared_expert_ffn_hidden_size > 0) {
    const double fs = S * m.shared_expert_ffn_hidden_size / tp * kAct;
    const bool sh = all || selective(o, "shared_experts");
    p.keep(fs * glu, sh);
    p.keep(fs, sh);
  }
  // alltoall: the permuted tokens and the received ones live together during the exchange.
  if (o.dispatcher != Dispatcher::flex) p.forward = s.moe_tokens * m.router_topk * h * kAct;
  // Backward: gradients of the expert tensors (received, fc1 output, activation) and the tokens
  // sent back, plus what recompute rebuilds of this layer.
  p.backward = P * (2 * h + F * (glu + 1)) * kAct + (p.full - p.saved);
  if (o.delay_wgrad_compute) p.backward += P * (F * glu + h) * kAct;  // kept for delayed wgrad
  return p;
}

}  // namespace

double hidden_state_bytes(const Config& cfg) {
  const double sp = cfg.par.sequence_parallel ? cfg.par.tp : 1.0;
  return static_cast<double>(cfg.tokens_per_microbatch()) * cfg.model.hidden_size / sp * kAct;
}

LayerActivation layer_activation(const Config& cfg, LayerKind kind) {
  const double hs = hidden_state_bytes(cfg);
  const Part a = attention(cfg, hs);
  const bool is_moe = kind != LayerKind::dense && cfg.model.num_experts > 0;
  const Part b = is_moe ? moe(cfg, hs) : dense_mlp(cfg, hs);
  LayerActivation l;
  l.saved = a.saved + b.saved;
  l.full = a.full + b.full;
  l.forward = std::max(a.forward, b.forward);
  l.backward = std::max(a.backward, b.backward);
  if (kind == LayerKind::mtp) {
    // Two norms (in and out), the concatenated projection input, and its output.
    l.saved += 6 * hs;
    l.full += 6 * hs;
  }
  return l;
}

LayerActivation head_activation(const Config& cfg) {
  const double S = static_cast<double>(cfg.tokens_per_microbatch());
  const double logits = S * cfg.model.vocab_size / cfg.par.tp * kAct;
  LayerActivation l;
  l.saved = l.full = logits + hidden_state_bytes(cfg);
  l.forward = logits;   // the loss kernel's working copy
  l.backward = logits;  // gradient of the final norm's output and the logits' copy
  return l;
}

}  // namespace epo::model::detail
