// One rank's GPU state: one device allocation carved into weights, gradients and activations.
#include "executor/rank_state.hpp"

#include <algorithm>
#include <cmath>

#include "executor/exec_kernels.hpp"
#include "executor/gpu_check.hpp"
#include "model/cost.hpp"
#include "model/error.hpp"

namespace epo::exec {

namespace {

// Seeds of weights do not depend on the rank (dense weights are replicated, an expert's weights
// depend only on its global index), so the reference rank holds the same values.
constexpr std::uint64_t kSeedQkv = 1, kSeedProj = 2, kSeedRouter = 3, kSeedW1s = 4, kSeedW2s = 5,
                        kSeedW1 = 6, kSeedW2 = 7, kSeedTokens = 8, kSeedGrad = 9;

std::uint64_t seed_of(std::uint64_t base, std::uint64_t what, std::uint64_t a, std::uint64_t b) {
  return ((base * 1000003ULL + what) * 1000003ULL + a) * 1000003ULL + b;
}

}  // namespace

RankState::RankState(const model::Config& cfg, const RunShape& shape, const RankSetup& setup)
    : cfg_(cfg), sh_(shape), set_(setup) {
  ScopedOp scope(set_.rank, "allocate");
  EPO_CHECK_CUDA(cudaSetDevice(set_.device));
  plan_ = plan_rank_memory(cfg, shape, setup);
  nt_ = static_cast<int>(plan_.tokens);
  el_ = plan_.local_experts;
  cap_ = plan_.capacity_rows;
  attn_scratch_elems_ = plan_.attn_scratch_elems;
  int lo = 0, hi = 0;
  EPO_CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  compute_ = Stream(lo);
  comm_ = Stream(cfg.opt.high_priority_a2a_comm_stream ? hi : lo);
  grad_ = Stream(lo);
  layers_.resize(sh_.num_layers);
  for (int l = 0; l < sh_.num_layers; ++l) {
    layers_[l].moe = l >= sh_.first_k_dense;
    layers_[l].mlp_ffn = layers_[l].moe ? sh_.shared_ffn : sh_.dense_ffn;
  }
  slots_.resize(set_.slots);
  for (auto& row : slots_) row.resize(sh_.num_layers);
  x0_.assign(set_.slots, nullptr);
  g_.assign(set_.slots, nullptr);
  if (set_.keep_outputs) {
    outputs_.assign(set_.num_microbatches, nullptr);
    input_grads_.assign(set_.num_microbatches, nullptr);
  }
  arena_ = DeviceBuffer(static_cast<std::size_t>(plan_.total_bytes),
                        "the rank's weights, gradients and activations");
  char* base = static_cast<char*>(arena_.get());
  for (const Binding& b : plan_.bindings) bind(b, base);
  {
    // Pinned staging per slot-layer: all counts, received counts, local counts.
    pinned_ = PinnedBuffer(static_cast<std::size_t>(plan_.pinned_bytes), false);
    int* host = static_cast<int*>(pinned_.get());
    for (auto& row : slots_)
      for (auto& sl : row) {
        sl.counts_host = host;
        host += static_cast<std::int64_t>(set_.num_ranks) * sh_.num_experts;
        sl.recv_counts_host = host;
        host += static_cast<std::int64_t>(set_.num_ranks) * el_;
        sl.loc_ntpe_host = host;
        host += el_;
        sl.counts_ready = std::make_unique<Event>();
      }
  }
  EPO_CHECK_CUDA(cudaMemsetAsync(arena_.get(), 0, arena_.bytes(), compute()));
  // The handle keeps the plan's workspace as long as its stream stays the compute stream (the
  // GEMM wrappers rebind only on a change; cublasSetStream resets the workspace).
  EPO_CHECK_CUBLAS(cublasSetStream(blas(), compute()));
  EPO_CHECK_CUBLAS(cublasSetWorkspace(blas(), base + plan_.at(Buf::cublas_ws).offset,
                                      static_cast<std::size_t>(kCublasWorkspaceBytes)));
  if (set_.transport == Transport::flex) {
    auto* err = new PinnedBuffer(sizeof(kernels::FlexError), true);
    flex_error_holder_.reset(err);
    flex_.error = static_cast<kernels::FlexError*>(err->get());
    *flex_.error = kernels::FlexError{};
  }
  init_weights();
  // The expert GEMMs' side streams and handles, before any collective runs, wherever the four
  // streams may be taken (asked for, or by auto on a GPU of its own).
  if (cfg.opt.expert_gemm == model::ExpertGemm::streams ||
      (cfg.opt.expert_gemm == model::ExpertGemm::automatic && cfg.virtual_ranks == 0 &&
       model::expert_fc1_weight(cfg) <= model::kStreamsMaxWeightElems))
    kernels::prepare_grouped_gemm(kernels::GroupedGemmAlgo::kMultiStream, compute());
  EPO_CHECK_CUDA(cudaStreamSynchronize(compute()));
}

void RankState::bind(const Binding& b, char* base) {
  const Allocation& at = plan_.allocations[b.allocation];
  char* p = base + at.offset;
  auto bf = [p] { return reinterpret_cast<bf16*>(p); };
  auto i32 = [p] { return reinterpret_cast<int*>(p); };
  auto f32 = [p] { return reinterpret_cast<float*>(p); };
  if (b.layer >= 0 && b.slot < 0) {  // weights of layer b.layer
    LayerWeights& w = layers_[b.layer];
    switch (b.id) {
      case Buf::wqkv: w.wqkv = bf(); return;
      case Buf::wproj: w.wproj = bf(); return;
      case Buf::w1s: w.w1s = bf(); return;
      case Buf::w2s: w.w2s = bf(); return;
      case Buf::wrouter: w.wrouter = bf(); return;
      case Buf::w1: w.w1 = bf(); return;
      case Buf::w2: w.w2 = bf(); return;
      default: break;
    }
  } else if (b.layer >= 0) {
    SlotLayer& s = slots_[b.slot][b.layer];
    switch (b.id) {
      case Buf::qkv: s.qkv = bf(); return;
      case Buf::h: s.h = bf(); return;
      case Buf::s_fc1: s.s_fc1 = bf(); return;
      case Buf::s_act: s.s_act = bf(); return;
      case Buf::y: s.y = bf(); return;
      case Buf::dx: s.dx = bf(); return;
      case Buf::dh: s.dh = bf(); return;
      case Buf::d_qkv: s.d_qkv = bf(); return;
      case Buf::d_s_fc1: s.d_s_fc1 = bf(); return;
      case Buf::d_s_act: s.d_s_act = bf(); return;
      case Buf::logits: s.logits = f32(); return;
      case Buf::topk_idx: s.topk_idx = i32(); return;
      case Buf::topk_w: s.topk_w = f32(); return;
      case Buf::moe_out: s.moe_out = bf(); return;
      case Buf::loc_offsets: s.loc_offsets = i32(); return;
      case Buf::loc_ntpe: s.loc_ntpe = i32(); return;
      case Buf::permuted_row: s.permuted_row = i32(); return;
      case Buf::row_src_token: s.row_src_token = i32(); return;
      case Buf::expert_offsets: s.expert_offsets = i32(); return;
      case Buf::ntpe: s.ntpe = i32(); return;
      case Buf::counts_all: s.counts_all = i32(); return;
      case Buf::layout_ws: s.layout_ws = p; return;
      case Buf::token_slot: s.token_slot = i32(); return;
      case Buf::ntpr: s.ntpr = i32(); return;
      case Buf::row_w: s.row_w = f32(); return;
      case Buf::fx_permuted_row: s.fx_permuted_row = i32(); return;
      case Buf::fx_row_src: s.fx_row_src = i32(); return;
      case Buf::counts_recv: s.counts_recv = i32(); return;
      case Buf::row_src: s.row_src = i32(); return;
      case Buf::row_dst: s.row_dst = i32(); return;
      case Buf::x_send: s.x_send = bf(); return;
      case Buf::y_recv: s.y_recv = bf(); return;
      case Buf::x_recv: s.x_recv = bf(); return;
      case Buf::x_perm: s.x_perm = bf(); return;
      case Buf::fc1: s.fc1 = bf(); return;
      case Buf::act: s.act = bf(); return;
      case Buf::y_perm: s.y_perm = bf(); return;
      case Buf::d_act: s.d_act = bf(); return;
      case Buf::d_fc1: s.d_fc1 = bf(); return;
      case Buf::d_xperm: s.d_xperm = bf(); return;
      default: break;
    }
  } else {
    const auto R = set_.num_ranks;
    switch (b.id) {
      case Buf::grads: bind_grads(bf(), at.bytes / 2); return;
      case Buf::x0: x0_.at(b.slot) = bf(); return;
      case Buf::loss_grad: g_.at(b.slot) = bf(); return;
      case Buf::output: outputs_.at(b.slot) = bf(); return;
      case Buf::input_grad: input_grads_.at(b.slot) = bf(); return;
      case Buf::attn_scratch: attn_scratch_ = bf(); return;
      case Buf::ones: ones_ = f32(); return;
      case Buf::skew_log_weight: skew_log_weight_ = f32(); return;
      case Buf::gemm_ws: gemm_ws_ = p; return;
      case Buf::cublas_ws: return;  // given to the handle after the memset
      case Buf::flex_fwd:
        flex_.fwd = kernels::flex_buffers_from(p, R, nt_, sh_.hidden, sh_.topk);
        return;
      case Buf::flex_bwd:
        flex_.bwd = kernels::flex_buffers_from(p, R, nt_, sh_.hidden, sh_.topk);
        return;
      case Buf::flex_peers_fwd: flex_.peers_fwd = reinterpret_cast<kernels::FlexBuffers*>(p); return;
      case Buf::flex_peers_bwd: flex_.peers_bwd = reinterpret_cast<kernels::FlexBuffers*>(p); return;
      default: break;
    }
  }
  throw EPO_RUNTIME_ERROR("rank ", set_.rank, ": the memory plan binds buffer ",
                          static_cast<int>(b.id), " (slot ", b.slot, ", layer ", b.layer,
                          ") that RankState does not hold");
}

void RankState::bind_grads(bf16* g, std::int64_t elems) {
  // Per layer: the dense gradients (one contiguous block an all-reduce covers), then the experts'.
  const std::int64_t H = sh_.hidden, F = sh_.expert_ffn, El = el_;
  grad_block_ = g;
  grad_block_elems_ = elems;
  std::int64_t at = 0;
  auto next = [&](std::int64_t n) {
    bf16* p = g + at;
    at += n;
    return p;
  };
  for (int l = 0; l < sh_.num_layers; ++l) {
    LayerWeights& w = layers_[l];
    const std::int64_t f = w.mlp_ffn;
    w.dense_grad_elems = H * sh_.qkv_dim + static_cast<std::int64_t>(sh_.ctx_dim) * H +
                         H * 2 * f + f * H;
    w.g_wqkv = next(H * sh_.qkv_dim);
    w.g_wproj = next(static_cast<std::int64_t>(sh_.ctx_dim) * H);
    w.g_w1s = next(H * 2 * f);
    w.g_w2s = next(f * H);
    if (w.moe) {
      w.g_w1 = next(El * H * 2 * F);
      w.g_w2 = next(El * F * H);
    }
  }
  if (at != elems)
    throw EPO_RUNTIME_ERROR("rank ", set_.rank, ": the memory plan's gradient block holds ", elems,
                            " elements, the layers need ", at);
}

void RankState::init_weights() {
  const std::int64_t H = sh_.hidden, E = sh_.num_experts, El = el_, F = sh_.expert_ffn;
  const std::uint64_t base = cfg_.opt.routing.seed;
  cudaStream_t s = compute();
  // Uniform(-a, a) with a = sqrt(3 / fan_in) keeps activations near unit variance.
  auto fill = [&](bf16* p, std::int64_t n, std::uint64_t seed, std::int64_t fan_in) {
    launch_fill_uniform(p, n, seed, std::sqrt(3.0f / static_cast<float>(fan_in)), s);
  };
  for (int l = 0; l < sh_.num_layers; ++l) {
    LayerWeights& w = layers_[l];
    const std::int64_t f = w.mlp_ffn;
    fill(w.wqkv, H * sh_.qkv_dim, seed_of(base, kSeedQkv, l, 0), H);
    fill(w.wproj, static_cast<std::int64_t>(sh_.ctx_dim) * H, seed_of(base, kSeedProj, l, 0),
         sh_.ctx_dim);
    if (f > 0) {
      fill(w.w1s, H * 2 * f, seed_of(base, kSeedW1s, l, 0), H);
      fill(w.w2s, f * H, seed_of(base, kSeedW2s, l, 0), f);
    }
    if (!w.moe) continue;
    fill(w.wrouter, H * E, seed_of(base, kSeedRouter, l, 0), H);
    const int first = set_.rank * el_;  // global index of this rank's first expert
    for (std::int64_t e = 0; e < El; ++e) {
      fill(w.w1 + e * H * 2 * F, H * 2 * F, seed_of(base, kSeedW1, l, first + e), H);
      fill(w.w2 + e * F * H, F * H, seed_of(base, kSeedW2, l, first + e), F);
    }
  }
  launch_fill_f32(ones_, static_cast<std::int64_t>(nt_) * sh_.topk, 1.0f, s);
  // Skewed routing draws each token's experts with probabilities proportional to their
  // popularity in the cost model (model::expert_popularity: Zipf over a seeded order of the
  // experts), busiest rank included: ln popularity plus Gumbel noise (pre_dispatch_fwd).
  const std::vector<float> log_w = skew_log_weights(cfg_, static_cast<int>(E));
  EPO_CHECK_CUDA(cudaMemcpyAsync(skew_log_weight_, log_w.data(), sizeof(float) * E,
                                 cudaMemcpyHostToDevice, s));
  EPO_CHECK_CUDA(cudaStreamSynchronize(s));  // `log_w` goes out of scope
}

void RankState::zero_grads() {
  EPO_CHECK_CUDA(cudaMemsetAsync(grad_block_, 0, sizeof(bf16) * grad_block_elems_, compute()));
  dense_grads_reduced = false;
}

std::uint64_t RankState::token_seed(int block, int mb) const {
  return seed_of(cfg_.opt.routing.seed, kSeedTokens, set_.rank + block, mb);
}
std::uint64_t RankState::grad_seed(int block, int mb) const {
  return seed_of(cfg_.opt.routing.seed, kSeedGrad, set_.rank + block, mb);
}

}  // namespace epo::exec
