#pragma once
// Architecture of an MoE transformer as published (presets/models/*.json).
#include <map>
#include <string>

namespace epo::model {

enum class AttentionKind { gqa, mla };
enum class ScoreFunction { softmax, sigmoid };

/// Multi-head latent attention sizes (DeepSeek-V2/V3).
struct MlaSpec {
  int q_lora_rank = 0;        ///< 0 = no query compression
  int kv_lora_rank = 0;
  int qk_nope_head_dim = 0;
  int qk_rope_head_dim = 0;
  int v_head_dim = 0;
};

/// Hybrid models (Nemotron-H, Nemotron 3): one mixer per layer, in the order of Megatron's
/// hybrid_layer_pattern: 'M' a Mamba-2 mixer, '*' attention, 'E' an MoE block, '-' a dense MLP.
/// The cost model keeps its MoE-layer unit: each 'E' is one layer carrying an equal share of the
/// pattern's other mixers (hybrid_share), so a step holds every mixer of the pattern once.
struct HybridSpec {
  std::string pattern;  ///< empty: not a hybrid model
  int mamba_num_heads = 0;
  int mamba_head_dim = 64;
  int mamba_state_dim = 128;
  int mamba_num_groups = 8;
  int mamba_conv_kernel = 4;

  bool enabled() const { return !pattern.empty(); }
  int count(char kind) const {
    int n = 0;
    for (char c : pattern) n += c == kind;
    return n;
  }
  /// Mixers of `kind` per MoE layer of the cost model.
  double share(char kind) const {
    const int e = count('E');
    return e > 0 ? static_cast<double>(count(kind)) / e : 0.0;
  }
  int mamba_inner() const { return mamba_num_heads * mamba_head_dim; }
  /// in_proj's output: z and x (inner each), B and C (groups x state each), dt (one per head).
  int mamba_in_proj() const {
    return 2 * mamba_inner() + 2 * mamba_num_groups * mamba_state_dim + mamba_num_heads;
  }
  /// The causal convolution's channels: x, B and C.
  int mamba_conv_channels() const { return mamba_inner() + 2 * mamba_num_groups * mamba_state_dim; }
};

/// The largest latent MoE width any reader accepts.
inline constexpr int kMaxMoeLatentSize = 1 << 20;

struct ModelSpec {
  std::string name;
  int num_layers = 0;            ///< decoder layers, dense and MoE, without MTP (hybrid: its 'E')
  int hidden_size = 0;
  int num_attention_heads = 0;
  int num_query_groups = 0;      ///< KV heads for GQA (= heads for MHA)
  int head_dim = 0;              ///< per-head dimension for GQA
  AttentionKind attention = AttentionKind::gqa;
  MlaSpec mla;
  int vocab_size = 0;
  int make_vocab_size_divisible_by = 128;  ///< Megatron pads vocab_size to a multiple of this x TP
  int ffn_hidden_size = 0;       ///< FFN width of dense layers
  int num_experts = 0;           ///< routed experts per MoE layer
  int router_topk = 0;
  int moe_ffn_hidden_size = 0;   ///< FFN width of one routed expert
  int shared_expert_ffn_hidden_size = 0;  ///< total width of shared experts, 0 = none
  int router_num_groups = 0;     ///< 0 = no group-limited routing
  int router_group_topk = 0;
  int first_k_dense_layers = 0;  ///< leading dense layers (DeepSeek-V3: 3)
  int mtp_num_layers = 0;        ///< multi-token-prediction layers
  ScoreFunction score_function = ScoreFunction::softmax;
  bool gated_linear_unit = true; ///< SwiGLU experts (fc1 is 2 x ffn wide)
  /// The output layer shares the word embeddings' weight (Megatron-LM's default without
  /// --untie-embeddings-and-output-weights): one copy where a stage holds both, a copy on the
  /// last stage otherwise. Every preset's model is untied.
  bool tied_embeddings = false;
  /// Latent MoE (Nemotron 3 Super/Ultra): tokens are projected to this width before the
  /// dispatch, the experts run on it, the combine returns it; 0 = the hidden size.
  int moe_latent_size = 0;
  /// Sliding-window attention (gpt-oss): the keys one query sees, itself included (Megatron's
  /// window_size (left, right) as left + right + 1); 0 = full causal attention.
  int window_size = 0;
  /// With a window: every this-many-th layer keeps full attention (Megatron's integer
  /// window_attn_skip_freq: layer numbers it divides); 0 = every layer windowed.
  int window_attn_skip_freq = 0;
  /// Megatron's add_bias_linear: biases on the attention, router and expert linears (gpt-oss).
  bool linear_bias = false;
  /// The experts' GLU is quick-GELU with a linear offset (Megatron's quick_geglu, gpt-oss)
  /// instead of SwiGLU.
  bool quick_geglu = false;
  /// activation_func_clamp_value: the GLU's inputs clamped to this; 0 = none.
  double activation_clamp = 0;
  /// YaRN rotary embeddings (position_embedding_type yarn): Megatron-Bridge and Megatron-LM
  /// apply RoPE fusion to plain rope only, so these run unfused.
  bool yarn_rope = false;
  HybridSpec hybrid;
  std::map<std::string, std::string> sources;  ///< field name -> where its value was published

  int num_moe_layers() const { return num_layers - first_k_dense_layers; }
  /// Width of a token inside the MoE block (dispatched, expert input and output).
  int moe_hidden() const { return moe_latent_size > 0 ? moe_latent_size : hidden_size; }
  /// Decoder layers as the model has them (a hybrid pattern's length; num_layers counts its
  /// MoE layers, the cost model's unit).
  int published_layers() const {
    return hybrid.enabled() ? static_cast<int>(hybrid.pattern.size()) : num_layers;
  }
  bool is_moe_layer(int layer) const { return layer >= first_k_dense_layers; }
  /// Decoder layers whose attention is windowed.
  int windowed_layers() const {
    if (window_size <= 0) return 0;
    const int n = num_layers;
    return window_attn_skip_freq > 0 ? n - n / window_attn_skip_freq : n;
  }
};

}  // namespace epo::model
