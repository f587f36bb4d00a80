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
// With FP8, TE keeps a GEMM's input quantized (gemm_input_bytes); Megatron has linear_proj and the
// shared experts' fc1 keep the bf16 tensor already saved by flash attention and by the router
// (save_original_input, all recipes but delayed), so those two add no quantized copy.
#include <algorithm>

#include "model/cost_detail.hpp"
#include "model/memory_detail.hpp"

namespace epo::model::detail {

namespace {

constexpr double kAct = 2.0;  // bf16 activations

bool selective(const Options& o, const char* name) {
  return o.recomputes(name);
}

struct Part {
  double saved = 0, full = 0, forward = 0, backward = 0;
  void keep(double b, bool dropped) {
    full += b;
    if (!dropped) saved += b;
  }
};

/// The module's input waits for its backward in host memory (fine-grained activation offloading;
/// brought back for that backward: a transient like a recompute's).
bool offloaded(const Options& o, const char* name) {
  return std::find(o.offload_modules.begin(), o.offload_modules.end(), name) !=
         o.offload_modules.end();
}

/// TE quantizes the linears' inputs (FP8 or NVFP4).
bool fp8(const Config& cfg) { return cfg.opt.quantized(); }
bool delayed_fp8(const Config& cfg) {
  return cfg.opt.precision == Precision::fp8 && fp8_recipe(cfg) == Fp8Recipe::delayed;
}

Part attention(const Config& cfg, double hs) {
  const ModelSpec& m = cfg.model;
  const Options& o = cfg.opt;
  const double S = static_cast<double>(cfg.tokens_per_microbatch()), tp = cfg.par.tp;
  const double sp = cfg.par.sequence_parallel ? tp : 1.0;
  const double q = gemm_input_bytes(cfg), elems = hs / kAct;
  const bool mla = m.attention == AttentionKind::mla;
  Part a;
  a.keep(hs, offloaded(o, "attn_norm"));  // layer input (residual, input-norm input)
  // Input-norm output, saved by the QKV projection; with MLA read by two down-projections, which
  // share the bf16 tensor but each keep their own FP8 copy.
  a.keep(fp8(cfg) && mla ? 2 * elems * q : elems * q, offloaded(o, "qkv_linear"));
  double qkv = 0, out = 0, scores_bwd = 0;
  if (mla) {
    const MlaSpec& l = m.mla;
    const double heads = m.num_attention_heads / tp;
    // q/kv compressed (the fused norms' inputs) and their norm outputs (up-projection inputs).
    a.keep(S * (l.q_lora_rank + l.kv_lora_rank) / sp * (kAct + q), false);
    const bool up = selective(o, "mla_up_proj");
    qkv = S * heads * (2.0 * (l.qk_nope_head_dim + l.qk_rope_head_dim) + l.v_head_dim) * kAct;
    a.keep(qkv, up || offloaded(o, "core_attn"));  // q, k, v after RoPE (flash attention's inputs)
    out = S * heads * l.v_head_dim * kAct;
  } else {
    qkv = S * (m.num_attention_heads + 2.0 * m.num_query_groups) * m.head_dim / tp * kAct;
    a.keep(qkv, offloaded(o, "core_attn"));
    out = S * m.num_attention_heads * m.head_dim / tp * kAct;
  }
  a.keep(out, offloaded(o, "attn_proj"));  // attention output (flash attention's, proj's input)
  if (delayed_fp8(cfg)) a.keep(out / kAct * q, false);
  if (o.unfused_attention()) {
    // Unfused attention keeps the probabilities [heads, S, S] for its backward (what core_attn
    // recompute drops), and has the scores and probabilities both alive while it runs.
    const double probs = S * static_cast<double>(cfg.par.seq_length) * m.num_attention_heads /
                         tp * kAct;
    a.keep(probs, selective(o, "core_attn"));
    // With attention dropout the dropout's mask (1 byte) and the dropped probabilities (the
    // second GEMM's input) are kept too; a fused kernel keeps only its random state.
    if (o.attention_dropout > 0) a.keep(probs / kAct + probs, selective(o, "core_attn"));
    a.forward = std::max(a.forward, 2 * probs);
    scores_bwd = 2 * probs;
  } else {
    a.keep(S * m.num_attention_heads / tp * 4.0, false);  // softmax statistics (fp32)
  }
  a.keep(hs, offloaded(o, "mlp_norm"));  // residual after attention (pre-MLP norm input)
  // Backward: gradients of q/k/v and the output, and the up-projection replay.
  a.backward = qkv + out + scores_bwd + (a.full - a.saved);
  return a;
}

Part dense_mlp(const Config& cfg, double hs) {
  const ModelSpec& m = cfg.model;
  const double S = static_cast<double>(cfg.tokens_per_microbatch()), tp = cfg.par.tp;
  const double glu = m.gated_linear_unit ? 2.0 : 1.0;
  const bool rc = selective(cfg.opt, "mlp");
  const double q = gemm_input_bytes(cfg);
  Part p;
  p.keep(hs / kAct * q, rc);  // norm output (norm fused into fc1; fc1 saves it)
  const double f = S * m.ffn_hidden_size / tp * kAct;
  p.keep(f * glu, rc);       // fc1 output (activation input)
  p.keep(f / kAct * q, rc);  // activation output (fc2 input)
  p.backward = f * (glu + 1) + 2 * hs + (p.full - p.saved);
  return p;
}

/// One Mamba-2 mixer (Megatron's MambaMixer): its input, the norm output in_proj saves, in_proj's
/// output (z, x, B, C, dt), the convolution's output (the scan's x, B, C), the scan's output
/// (the gated norm's input with z) and the norm's output (out_proj's input).
Part mamba(const Config& cfg, double hs) {
  const HybridSpec& y = cfg.model.hybrid;
  const double S = static_cast<double>(cfg.tokens_per_microbatch()), tp = cfg.par.tp;
  const double q = gemm_input_bytes(cfg), elems = hs / kAct;
  Part p;
  p.keep(hs, false);
  p.keep(elems * q, false);
  p.keep(S * y.mamba_in_proj() / tp * kAct, false);
  p.keep(S * y.mamba_conv_channels() / tp * kAct, false);
  p.keep(S * y.mamba_inner() / tp * kAct, false);
  p.keep(S * y.mamba_inner() / tp * q, false);
  p.backward = S * (y.mamba_in_proj() + y.mamba_conv_channels()) / tp * kAct;
  return p;
}

Part scaled(Part p, double k) {
  p.saved *= k;
  p.full *= k;
  p.forward *= k;
  p.backward *= k;
  return p;
}

Part moe(const Config& cfg, double hs) {
  const ModelSpec& m = cfg.model;
  const Options& o = cfg.opt;
  const auto s = detail::make_shapes(cfg);
  const double S = s.tokens, tp = cfg.par.tp, h = m.moe_hidden();
  const double glu = m.gated_linear_unit ? 2.0 : 1.0;
  const bool all = selective(o, "moe");
  const double q = gemm_input_bytes(cfg);
  Part p;
  // Norm output: router and dispatcher input; the checkpoint's input when `moe` is recomputed.
  p.keep(hs, !all && selective(o, "layernorm"));
  p.keep(s.moe_tokens * m.num_experts * 4.0 * 2, all);  // router logits and scores (fp32)
  const double P = s.expert_rows, F = static_cast<double>(m.moe_ffn_hidden_size) / cfg.par.etp;
  // The grouped MLP's inputs: on the host when offloaded (fused_group_mlp: all of them).
  const bool mlp_off = offloaded(o, "fused_group_mlp");
  p.keep(P * h * q, all || mlp_off || offloaded(o, "expert_fc1"));  // received tokens (fc1 input)
  p.keep(P * F * glu * kAct, all || mlp_off || offloaded(o, "moe_act"));  // fc1 output (act input)
  p.keep(P * F * q, all || mlp_off || selective(o, "moe_act"));  // activation output (fc2 input)
  // Unfused weighted activation: its intermediates, and the fp32 product with the probabilities
  // for a moment.
  const int unfused = unfused_activation_tensors(cfg);
  if (unfused > 0) p.keep(P * F * kAct * unfused, all || mlp_off || selective(o, "moe_act"));
  // routing probabilities per pair
  p.keep(P * 4.0, all);
  // Latent MoE: the tokens in the latent (the dispatch's input) and the combined latent
  // (fc2_latent_proj's input).
  if (m.moe_latent_size > 0) p.keep(2 * S * m.moe_latent_size * kAct, all);
  if (m.shared_expert_ffn_hidden_size > 0) {
    const double fs = S * m.shared_expert_ffn_hidden_size / tp * kAct;
    const bool sh = all || selective(o, "shared_experts");
    if (delayed_fp8(cfg)) p.keep(hs / kAct * q, sh);  // fc1 input
    p.keep(fs * glu, sh);
    p.keep(fs / kAct * q, sh);
  }
  // alltoall: the permuted tokens and the received ones live together during the exchange.
  if (o.dispatcher != Dispatcher::flex) p.forward = s.moe_tokens * m.router_topk * h * kAct;
  if (unfused > 0) p.forward = std::max(p.forward, P * F * 4.0);
  // Backward: gradients of the expert tensors (received, fc1 output, activation) and the tokens
  // sent back, plus what recompute rebuilds of this layer.
  p.backward = P * (2 * h + F * (glu + 1)) * kAct + (p.full - p.saved);
  if (o.delay_wgrad_compute) p.backward += P * (F * glu + h) * kAct;  // kept for delayed wgrad
  return p;
}

}  // namespace

double gemm_input_bytes(const Config& cfg) {
  if (!fp8(cfg)) return kAct;
  if (cfg.opt.precision == Precision::nvfp4) return 0.5 + 1.0 / 16;  // E2M1, an E4M3 scale per 16
  const Fp8Recipe r = fp8_recipe(cfg);
  return r == Fp8Recipe::mxfp8 || r == Fp8Recipe::blockwise ? 1.0 + 1.0 / 32 : 1.0;
}

double fp8_weight_bytes_per_param(const Config& cfg) {
  if (!fp8(cfg)) return 0;
  if (cfg.opt.precision == Precision::nvfp4) return 2 * (0.5 + 1.0 / 16);  // both directions
  switch (fp8_recipe(cfg)) {
    case Fp8Recipe::mxfp8:
      return 2 * (1.0 + 1.0 / 32);
    case Fp8Recipe::blockwise:  // both directions, one fp32 scale per 128 x 128 block
      return 2.0;
    default:  // per-tensor: Blackwell's GEMMs read the one copy either way
      return cfg.hw.compute_capability_major >= 10 ? 1.0 : 2.0;
  }
}

double hidden_state_bytes(const Config& cfg) {
  const double sp = cfg.par.sequence_parallel ? cfg.par.tp : 1.0;
  return static_cast<double>(cfg.tokens_per_microbatch()) * cfg.model.hidden_size / sp * kAct;
}

LayerActivation layer_activation(const Config& cfg, LayerKind kind) {
  const double hs = hidden_state_bytes(cfg);
  Part a = attention(cfg, hs);
  const bool is_moe = kind != LayerKind::dense && cfg.model.num_experts > 0;
  const Part b = is_moe ? moe(cfg, hs) : dense_mlp(cfg, hs);
  const HybridSpec& y = cfg.model.hybrid;
  if (y.enabled() && kind != LayerKind::mtp) {
    // A hybrid model's MoE layer carries its share of the pattern's other mixers.
    a = scaled(a, y.share('*'));
    for (const Part& x : {scaled(mamba(cfg, hs), y.share('M')), scaled(dense_mlp(cfg, hs), y.share('-'))}) {
      a.saved += x.saved;
      a.full += x.full;
      a.forward = std::max(a.forward, x.forward);
      a.backward = std::max(a.backward, x.backward);
    }
  }
  LayerActivation l;
  l.saved = a.saved + b.saved;
  l.full = a.full + b.full;
  l.forward = std::max(a.forward, b.forward);
  l.backward = std::max(a.backward, b.backward);
  if (cfg.opt.hidden_dropout > 0) {  // the two bias-dropout-adds keep their masks, 1 byte each
    l.saved += 2 * hs / kAct;
    l.full += 2 * hs / kAct;
  }
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
  if (!cfg.opt.loss_keeps_fp32_logits()) {
    l.saved = l.full = logits + hidden_state_bytes(cfg);
    l.forward = logits;   // the loss kernel's working copy
    l.backward = logits;  // gradient of the final norm's output and the logits' copy
  } else {
    // Megatron's vocab-parallel cross-entropy: an fp32 copy of the logits becomes the softmax it
    // keeps for the backward (the bf16 logits go once it is made); the backward turns it into
    // the gradient in place and casts that back to bf16.
    l.saved = l.full = 2 * logits + hidden_state_bytes(cfg);
    l.forward = logits;
    l.backward = logits;
  }
  return l;
}

}  // namespace epo::model::detail
