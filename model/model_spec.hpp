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

struct ModelSpec {
  std::string name;
  int num_layers = 0;            ///< decoder layers, dense and MoE, without MTP
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
  std::map<std::string, std::string> sources;  ///< field name -> where its value was published

  int num_moe_layers() const { return num_layers - first_k_dense_layers; }
  bool is_moe_layer(int layer) const { return layer >= first_k_dense_layers; }
};

}  // namespace epo::model
