// Copies a rank's outputs and gradients to the host for --check.
#include <cstring>

#include "executor/check.hpp"
#include "executor/gpu_check.hpp"
#include "executor/rank_state.hpp"
#include "executor/runner.hpp"

namespace epo::exec {

namespace {

std::vector<std::uint16_t> fetch(const bf16* p, std::int64_t n) {
  std::vector<std::uint16_t> v(static_cast<std::size_t>(n));
  if (n > 0) EPO_CHECK_CUDA(cudaMemcpy(v.data(), p, sizeof(bf16) * n, cudaMemcpyDeviceToHost));
  return v;
}

}  // namespace

Capture capture(RankState& rs) {
  ScopedOp scope(rs.rank(), "check: copy outputs and gradients");
  EPO_CHECK_CUDA(cudaSetDevice(rs.setup().device));
  EPO_CHECK_CUDA(cudaDeviceSynchronize());
  Capture c;
  const auto& sh = rs.shape();
  const std::int64_t act = static_cast<std::int64_t>(rs.tokens()) * sh.hidden;
  for (int m = 0; m < rs.setup().num_microbatches; ++m) {
    if (!rs.output(m)) break;
    c.outputs.push_back(fetch(rs.output(m), act));
    c.input_grads.push_back(fetch(rs.input_grad(m), act));
  }
  const std::int64_t El = rs.local_experts(), H = sh.hidden, F = sh.expert_ffn;
  for (int l = 0; l < sh.num_layers; ++l) {
    LayerWeights& w = rs.weights(l);
    c.dense_grads.push_back(fetch(w.g_wqkv, w.dense_grad_elems));
    c.expert_w1.push_back(w.moe ? fetch(w.g_w1, El * H * 2 * F) : std::vector<std::uint16_t>());
    c.expert_w2.push_back(w.moe ? fetch(w.g_w2, El * F * H) : std::vector<std::uint16_t>());
  }
  c.dense_reduced = rs.dense_grads_reduced;
  return c;
}

}  // namespace epo::exec
