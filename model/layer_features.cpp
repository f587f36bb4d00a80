// Element-wise work a model's features add where Megatron runs them unfused (layer_features.hpp).
#include "model/layer_features.hpp"

namespace epo::model::detail {

namespace {

bool fused_mlp(const Builder& b) {
  return fused_grouped_mlp_runs(b.cfg_) && b.cfg_.virtual_ranks <= 0;
}

}  // namespace

std::vector<Component> expert_activation(const Builder& b, double rows, double ffn, double glu,
                                         bool recompute) {
  std::vector<Component> parts;
  if (!recompute && fused_mlp(b)) return parts;  // in fc1's epilogue
  parts.push_back(b.mem("expert.act", rows * ffn * (glu + 1) * 2));
  if (fused_mlp(b)) return parts;
  // Unfused weighted activation: the product with the fp32 probabilities (2 bytes read, 4
  // written an element) and the cast back (4 read, 2 written); a GLU's or squared ReLU's
  // intermediate adds a kernel reading and writing 2 bytes more each way.
  const int unfused = b.cfg_.virtual_ranks > 0 ? 0 : unfused_activation_tensors(b.cfg_);
  if (unfused > 0)
    parts.push_back(
        b.mem("expert.act.probs", rows * ffn * (12.0 + 4.0 * (unfused - 1)), 1 + unfused));
  const ModelSpec& m = b.m_;
  if (m.quick_geglu && m.activation_clamp > 0 && b.cfg_.virtual_ranks <= 0) {
    // Two clamps of the halves (each reads and writes its half) and the concatenation (reads
    // and writes the whole): 8 bytes an element of fc1's bf16 output forward; the backward's
    // clamp masks and the split gradient's concatenation about 10.
    parts.push_back(b.mem("expert.act.clamp", rows * ffn * glu * 9, 3));
  }
  return parts;
}

std::vector<Component> expert_output_bias(const Builder& b, double rows, double width) {
  if (!b.m_.linear_bias || fused_mlp(b) || b.cfg_.virtual_ranks > 0) return {};
  // Per expert bias * prob into fp32 (4 bytes written), the bf16 output added to it (2 + 4 read,
  // 4 written), the fp32 concatenation (4 + 4) and the cast back (4 + 2): 28 bytes an element
  // forward; the backward's casts, the sums for the bias and the probabilities' gradients about
  // 36. Both taken as 32, a kernel each.
  return {b.mem("expert.fc2.bias", rows * width * 32, 6)};
}

std::vector<Component> unfused_rope(const Builder& b) {
  const ModelSpec& m = b.m_;
  if (!m.yarn_rope || b.cfg_.virtual_ranks > 0 || m.attention == AttentionKind::mla) return {};
  const double tp = b.p_.tp;
  const double elems =
      b.s_.tokens * (m.num_attention_heads + static_cast<double>(m.num_query_groups)) *
      m.head_dim / tp;
  // rotate_half (a negation and a concatenation), t * cos, rotate_half(t) * sin and their sum:
  // about 20 bytes an element of the bf16 queries and keys, in 7 kernels a tensor.
  return {b.mem("attn.rope", elems * 20, 14)};
}

bool expert_activation_syncs_host(const Config& cfg) {
  const Options& o = cfg.opt;
  return cfg.model.quick_geglu && cfg.model.num_experts > 0 && cfg.virtual_ranks <= 0 &&
         !fused_grouped_mlp_runs(cfg) && o.cuda_graph_impl != CudaGraphImpl::full_iteration &&
         o.cuda_graph_impl != CudaGraphImpl::local;
}

}  // namespace epo::model::detail
