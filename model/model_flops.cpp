// Megatron's model-FLOPs formula, term by term as in num_floating_point_operations.
#include "model/model_flops.hpp"

#include "model/error.hpp"

namespace epo::model {

namespace {

// Forward, wgrad and dgrad (3) times 2 FLOPs per multiply-add.
constexpr double kFwdBwdFma = 3.0 * 2.0;

/// Token-linear FLOPs per token of one attention layer's projections.
double attention_projection_per_token(const ModelSpec& m) {
  const double h = m.hidden_size;
  const double n = m.num_attention_heads;
  if (m.attention == AttentionKind::mla) {
    const MlaSpec& a = m.mla;
    const double qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
    // q: down projection, q norm (+1) and up projection; or one projection without q_lora_rank
    const double q_term =
        a.q_lora_rank > 0 ? a.q_lora_rank * (h + n * qk + 1) : h * n * qk;
    // kv: down projection, kv norm (+1), up projection to k_nope and v; the rope key; output
    const double kv_term = a.kv_lora_rank * (h + n * (a.qk_nope_head_dim + a.v_head_dim) + 1) +
                           h * a.qk_rope_head_dim;
    const double out_term = n * a.v_head_dim * h;
    return kFwdBwdFma * (q_term + kv_term + out_term);
  }
  const double q = static_cast<double>(m.head_dim) * m.num_attention_heads;
  const double kv = static_cast<double>(m.head_dim) * m.num_query_groups;
  return kFwdBwdFma * (h * (q + 2 * kv) + q * h);
}

/// Core-attention FLOPs per token per token of context (x seq^2 per sequence): QK^T and
/// softmax(QK^T)V over half the score matrix (causal).
double attention_core_per_token_squared(const ModelSpec& m) {
  const double n = m.num_attention_heads;
  if (m.attention == AttentionKind::mla) {
    const MlaSpec& a = m.mla;
    return kFwdBwdFma * (n * (a.qk_nope_head_dim + a.qk_rope_head_dim) / 2 + n * a.v_head_dim / 2);
  }
  const double q = static_cast<double>(m.head_dim) * m.num_attention_heads;
  return kFwdBwdFma * q / 2 * 2;
}

/// Megatron's hybrid_flops (training.py; Bridge's flop_utils.py agrees) for one sequence of s
/// tokens: per mixer kind as the pattern counts them, forward x 3. Its Mamba term takes the inner
/// width as twice the hidden size whatever the heads; each MTP depth adds its "*E" and logits.
double hybrid_flops_per_sequence(const ModelSpec& m, double s, double vocab) {
  const HybridSpec& y = m.hybrid;
  const double h = m.hidden_size;
  const double scale = m.gated_linear_unit ? 1.5 : 1.0;
  const double nq = static_cast<double>(m.num_attention_heads) * m.head_dim;
  const double g = m.num_query_groups, n = m.num_attention_heads;
  const double attn = 4 * s * nq * (h + h * g / n) + 2 * s * s * nq;
  const double mlp = 4 * s * h * m.ffn_hidden_size * scale;
  const double d_in = 2 * h, state = y.mamba_state_dim;
  const double mamba = 2 * s * h * (2 * d_in + 2.0 * y.mamba_num_groups * state + y.mamba_num_heads) +
                       7 * s * d_in * state + 2 * s * d_in * h;
  const double ffn_routed = static_cast<double>(m.moe_ffn_hidden_size) * m.router_topk * scale;
  const double routed = m.moe_latent_size > 0
                            ? 4 * s * m.moe_latent_size * ffn_routed + 4 * s * h * m.moe_latent_size
                            : 4 * s * h * ffn_routed;
  const double moe = routed + 4 * s * h * m.shared_expert_ffn_hidden_size * scale;
  // MTP layers are the pattern's "*E" once per depth (get_hybrid_layer_counts counts them).
  const double mtp = m.mtp_num_layers;
  const double fwd = (y.count('*') + mtp) * attn + y.count('-') * mlp + y.count('M') * mamba +
                     (y.count('E') + mtp) * moe + 2 * s * h * vocab * (1 + mtp);
  return 3 * fwd;
}

}  // namespace

long long padded_vocab_size(int vocab_size, int make_vocab_size_divisible_by,
                            int tensor_parallel) {
  EPO_REQUIRE_INPUT(vocab_size >= 1 && make_vocab_size_divisible_by >= 1 && tensor_parallel >= 1,
                    "padded_vocab_size: vocab_size = ", vocab_size,
                    ", make_vocab_size_divisible_by = ", make_vocab_size_divisible_by,
                    ", tensor_parallel = ", tensor_parallel, " (all must be >= 1)");
  const long long multiple = static_cast<long long>(make_vocab_size_divisible_by) * tensor_parallel;
  return (vocab_size + multiple - 1) / multiple * multiple;
}

double model_flops_per_sequence(const ModelSpec& m, int seq_length, int tensor_parallel) {
  EPO_REQUIRE_INPUT(seq_length >= 1, "model_flops_per_sequence: seq_length = ", seq_length,
                    " (must be >= 1)");
  const double h = m.hidden_size;
  const double s = seq_length;
  if (m.hybrid.enabled())
    return hybrid_flops_per_sequence(
        m, s,
        static_cast<double>(
            padded_vocab_size(m.vocab_size, m.make_vocab_size_divisible_by, tensor_parallel)));
  const double ffn_factor = m.gated_linear_unit ? 3.0 : 2.0;  // fc1 is 2 x wide with a GLU
  const bool moe = m.num_experts > 0;

  // MTP layers repeat the last decoder layer's kind; MoE layers follow the dense ones.
  const int mtp = m.mtp_num_layers;
  const bool last_layer_is_moe = moe && m.num_moe_layers() > 0;
  const int num_moe_layers = (moe ? m.num_moe_layers() : 0) + (last_layer_is_moe ? mtp : 0);
  const int num_dense_layers = (moe ? m.first_k_dense_layers : m.num_layers) +
                               (last_layer_is_moe ? 0 : mtp);
  const int num_attention_layers = m.num_layers + mtp;

  const double mlp = kFwdBwdFma * h *
                     (static_cast<double>(m.ffn_hidden_size) * ffn_factor * num_dense_layers +
                      static_cast<double>(m.moe_ffn_hidden_size) * m.router_topk * ffn_factor *
                          num_moe_layers +
                      static_cast<double>(m.shared_expert_ffn_hidden_size) * ffn_factor *
                          num_moe_layers);
  // MTP: two norms on the way in and the final norm (3h), and the eh projection (2h -> h).
  const double mtp_extra = kFwdBwdFma * mtp * (3 * h + 2 * h * h);
  const double vocab = static_cast<double>(
      padded_vocab_size(m.vocab_size, m.make_vocab_size_divisible_by, tensor_parallel));
  const double logits = kFwdBwdFma * h * vocab * (mtp + 1);

  const double per_token = mlp + attention_projection_per_token(m) * num_attention_layers +
                           mtp_extra + logits;
  const double core = attention_core_per_token_squared(m) * num_attention_layers;
  return s * per_token + s * s * core;
}

double model_flops_per_step(const ModelSpec& m, int seq_length, long long global_batch_size,
                            int tensor_parallel) {
  EPO_REQUIRE_INPUT(global_batch_size >= 1, "model_flops_per_step: global_batch_size = ",
                    global_batch_size, " (must be >= 1)");
  return static_cast<double>(global_batch_size) *
         model_flops_per_sequence(m, seq_length, tensor_parallel);
}

}  // namespace epo::model
