// One rank's GPU state: one device allocation carved into weights, gradients and activations.
#include "executor/rank_state.hpp"

#include <algorithm>
#include <cmath>

#include "executor/exec_kernels.hpp"
#include "executor/gpu_check.hpp"
#include "model/cost.hpp"

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
  nt_ = sh_.tokens * set_.blocks;
  el_ = sh_.num_experts / set_.num_ranks;
  // Expert rows received: the mean is tokens*topk; skewed routing or few ranks can exceed it.
  const double factor = cfg.opt.routing.kind == model::RoutingKind::skewed ? 4.0 : 2.0;
  const std::int64_t all_rows = static_cast<std::int64_t>(nt_) * sh_.topk * set_.num_ranks;
  cap_ = set_.num_ranks == 1 ? static_cast<std::int64_t>(nt_) * sh_.topk
                             : std::min<std::int64_t>(
                                   all_rows, static_cast<std::int64_t>(
                                                 std::ceil(factor * nt_ * sh_.topk)) + 64);
  cap_ += static_cast<std::int64_t>(el_) * (kExpertRowAlign - 1);
  int lo = 0, hi = 0;
  EPO_CHECK_CUDA(cudaDeviceGetStreamPriorityRange(&lo, &hi));
  compute_ = Stream(lo);
  comm_ = Stream(cfg.opt.high_priority_a2a_comm_stream ? hi : lo);
  grad_ = Stream(lo);
  layers_.resize(sh_.num_layers);
  slots_.resize(set_.slots);
  for (auto& row : slots_) row.resize(sh_.num_layers);
  Arena measure;
  carve(measure);
  arena_ = DeviceBuffer(measure.size(), "the rank's weights, gradients and activations");
  Arena host_measure;
  {
    // Pinned staging per slot-layer: all counts, received counts, local counts.
    const std::int64_t per = static_cast<std::int64_t>(set_.num_ranks) * sh_.num_experts +
                             static_cast<std::int64_t>(set_.num_ranks) * el_ + el_ + 64;
    pinned_ = PinnedBuffer(sizeof(int) * per * set_.slots * sh_.num_layers + 4096, false);
    Arena host(pinned_.get());
    for (auto& row : slots_)
      for (auto& sl : row) {
        sl.counts_host = host.take<int>(static_cast<std::int64_t>(set_.num_ranks) * sh_.num_experts);
        sl.recv_counts_host = host.take<int>(static_cast<std::int64_t>(set_.num_ranks) * el_);
        sl.loc_ntpe_host = host.take<int>(el_);
        sl.counts_ready = std::make_unique<Event>();
      }
  }
  Arena real(arena_.get());
  carve(real);
  EPO_CHECK_CUDA(cudaMemsetAsync(arena_.get(), 0, arena_.bytes(), compute()));
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

template <typename A>
void RankState::carve(A& a) {
  const std::int64_t H = sh_.hidden, NT = nt_, K = sh_.topk, E = sh_.num_experts, El = el_;
  const std::int64_t R = set_.num_ranks, F = sh_.expert_ffn, cap = cap_;
  // Gradients first, in one block (zeroed by one memset per step); dense grads of a layer are
  // contiguous so one all-reduce covers them.
  std::int64_t grad_elems = 0;
  for (int l = 0; l < sh_.num_layers; ++l) {
    const bool moe = l >= sh_.first_k_dense;
    const std::int64_t f = moe ? sh_.shared_ffn : sh_.dense_ffn;
    const std::int64_t dense = H * sh_.qkv_dim + static_cast<std::int64_t>(sh_.ctx_dim) * H +
                               H * 2 * f + f * H;
    grad_elems += dense + (moe ? El * H * 2 * F + El * F * H : 0);
  }
  bf16* g = a.template take<bf16>(grad_elems);
  grad_block_ = g;
  grad_block_elems_ = grad_elems;
  std::int64_t at = 0;
  auto next = [&](std::int64_t n) {
    bf16* p = g ? g + at : nullptr;
    at += n;
    return p;
  };
  for (int l = 0; l < sh_.num_layers; ++l) {
    LayerWeights& w = layers_[l];
    w.moe = l >= sh_.first_k_dense;
    w.mlp_ffn = w.moe ? sh_.shared_ffn : sh_.dense_ffn;
    const std::int64_t f = w.mlp_ffn;
    w.g_wqkv = next(H * sh_.qkv_dim);
    w.g_wproj = next(static_cast<std::int64_t>(sh_.ctx_dim) * H);
    w.g_w1s = next(H * 2 * f);
    w.g_w2s = next(f * H);
    w.dense_grad_elems = H * sh_.qkv_dim + static_cast<std::int64_t>(sh_.ctx_dim) * H +
                         H * 2 * f + f * H;
    if (w.moe) {
      w.g_w1 = next(El * H * 2 * F);
      w.g_w2 = next(El * F * H);
    }
  }
  for (int l = 0; l < sh_.num_layers; ++l) {
    LayerWeights& w = layers_[l];
    const std::int64_t f = w.mlp_ffn;
    w.wqkv = a.template take<bf16>(H * sh_.qkv_dim);
    w.wproj = a.template take<bf16>(static_cast<std::int64_t>(sh_.ctx_dim) * H);
    w.w1s = a.template take<bf16>(H * 2 * f);
    w.w2s = a.template take<bf16>(f * H);
    if (w.moe) {
      w.wrouter = a.template take<bf16>(H * E);
      w.w1 = a.template take<bf16>(El * H * 2 * F);
      w.w2 = a.template take<bf16>(El * F * H);
    }
  }
  const bool flex = set_.transport == Transport::flex;
  for (auto& row : slots_)
    for (int l = 0; l < sh_.num_layers; ++l) {
      SlotLayer& s = row[l];
      const bool moe = layers_[l].moe;
      const std::int64_t f = layers_[l].mlp_ffn;
      s.qkv = a.template take<bf16>(NT * sh_.qkv_dim);
      s.h = a.template take<bf16>(NT * H);
      s.s_fc1 = a.template take<bf16>(NT * 2 * f);
      s.s_act = a.template take<bf16>(NT * f);
      s.s_out = a.template take<bf16>(NT * H);
      s.y = a.template take<bf16>(NT * H);
      s.dh = a.template take<bf16>(NT * H);
      s.d_s_act = a.template take<bf16>(NT * f);
      s.d_s_fc1 = a.template take<bf16>(NT * 2 * f);
      s.d_qkv = a.template take<bf16>(NT * sh_.qkv_dim);
      s.dx = a.template take<bf16>(NT * H);
      if (!moe) continue;
      s.logits = a.template take<float>(NT * E);
      s.topk_idx = a.template take<int>(NT * K);
      s.topk_w = a.template take<float>(NT * K);
      s.moe_out = a.template take<bf16>(NT * H);
      s.loc_offsets = a.template take<int>(El + 1);
      s.loc_ntpe = a.template take<int>(El);
      s.x_perm = a.template take<bf16>(cap * H);
      s.fc1 = a.template take<bf16>(cap * 2 * F);
      s.act = a.template take<bf16>(cap * F);
      s.y_perm = a.template take<bf16>(cap * H);
      s.d_act = a.template take<bf16>(cap * F);
      s.d_fc1 = a.template take<bf16>(cap * 2 * F);
      s.d_xperm = a.template take<bf16>(cap * H);
      if (flex) {
        s.token_slot = a.template take<int>(NT * R);
        s.ntpr = a.template take<int>(R);
        s.row_w = a.template take<float>(cap);
        s.fx_permuted_row = a.template take<int>(R * NT * K);
        s.fx_row_src = a.template take<int>(
            kernels::alltoall_layout_max_rows(R * NT, static_cast<int>(K), static_cast<int>(El),
                                              kExpertRowAlign));
        s.layout_ws = a.template take<char>(
            static_cast<std::int64_t>(kernels::layout_workspace_bytes(R * NT, El)) + 256 +
            static_cast<std::int64_t>(kernels::layout_workspace_bytes(NT, R)));
      } else {
        s.permuted_row = a.template take<int>(NT * K);
        s.row_src_token = a.template take<int>(NT * K);
        s.expert_offsets = a.template take<int>(E + 1);
        s.ntpe = a.template take<int>(E);
        s.counts_all = a.template take<int>(R * E);
        s.layout_ws = a.template take<char>(
            static_cast<std::int64_t>(kernels::layout_workspace_bytes(NT, E)));
        s.x_send = a.template take<bf16>(NT * K * H);
        s.y_recv = a.template take<bf16>(NT * K * H);
        s.x_recv = a.template take<bf16>(cap * H);
        s.row_src = a.template take<int>(cap);
        s.row_dst = a.template take<int>(cap);
        s.counts_recv = a.template take<int>(R * El);
      }
    }
  x0_.assign(set_.slots, nullptr);
  g_.assign(set_.slots, nullptr);
  for (int i = 0; i < set_.slots; ++i) {
    x0_[i] = a.template take<bf16>(NT * H);
    g_[i] = a.template take<bf16>(NT * H);
  }
  outputs_.clear();
  input_grads_.clear();
  if (set_.keep_outputs)
    for (int m = 0; m < set_.num_microbatches; ++m) {
      outputs_.push_back(a.template take<bf16>(NT * H));
      input_grads_.push_back(a.template take<bf16>(NT * H));
    }
  // Core-attention stand-in scratch: scores of a few (sequence, head) pairs at a time.
  const std::int64_t seq = sh_.seq, half = std::max<std::int64_t>(1, seq / 2);
  const std::int64_t batches = static_cast<std::int64_t>(sh_.num_heads) * sh_.mbs * set_.blocks;
  const std::int64_t chunk =
      std::max<std::int64_t>(1, std::min<std::int64_t>(batches, (32LL << 20) / (seq * half)));
  attn_scratch_elems_ = chunk * seq * half + chunk * seq * std::max(sh_.qk_head_dim, sh_.v_head_dim);
  attn_scratch_ = a.template take<bf16>(attn_scratch_elems_);
  ones_ = a.template take<float>(NT * K);
  skew_log_weight_ = a.template take<float>(E);
  gemm_ws_ = a.template take<char>(
      static_cast<std::int64_t>(kernels::grouped_gemm_workspace_bytes(el_)));
  if (flex) {
    const auto b = kernels::flex_buffer_bytes(static_cast<int>(R), static_cast<int>(NT),
                                              static_cast<int>(H), static_cast<int>(K));
    for (kernels::FlexBuffers* fb : {&flex_.fwd, &flex_.bwd}) {
      fb->recv_x = a.template take<bf16>(static_cast<std::int64_t>(b.recv_x / sizeof(bf16)));
      fb->recv_topk_idx = a.template take<int>(static_cast<std::int64_t>(b.recv_topk_idx / 4));
      fb->recv_topk_weights =
          a.template take<float>(static_cast<std::int64_t>(b.recv_topk_weights / 4));
      fb->recv_count = a.template take<int>(static_cast<std::int64_t>(b.recv_count / 4));
      fb->recv_flag = a.template take<std::uint64_t>(static_cast<std::int64_t>(b.recv_flag / 8));
      fb->combine_x = a.template take<bf16>(static_cast<std::int64_t>(b.combine_x / sizeof(bf16)));
      fb->combine_flag =
          a.template take<std::uint64_t>(static_cast<std::int64_t>(b.combine_flag / 8));
      fb->done_counter =
          a.template take<unsigned int>(static_cast<std::int64_t>(b.done_counter / 4));
    }
    flex_.peers_fwd = a.template take<kernels::FlexBuffers>(R);
    flex_.peers_bwd = a.template take<kernels::FlexBuffers>(R);
  }
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
