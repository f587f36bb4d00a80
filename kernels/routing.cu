// Router: softmax/sigmoid scores, optional selection bias, group-limited top-k (DeepSeek-V3).
// One warp per token; lane l holds experts l, l+32, l+64, ... in registers, so every reduction is a
// warp shuffle and nothing touches shared memory.
#include <cfloat>
#include <string>

#include "kernels/check.hpp"
#include "kernels/device_utils.cuh"
#include "kernels/launchers.hpp"

namespace epo::kernels {

namespace {

using detail::kWarpSize;
constexpr int kWarpsPerBlock = 8;

// (value, index) pair ordering of the references: higher value, then lower index.
__device__ __forceinline__ bool better(float a, int a_idx, float b, int b_idx) {
  return a > b || (a == b && a_idx < b_idx);
}

__device__ __forceinline__ void warp_argmax(float& value, int& idx) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    float other = __shfl_xor_sync(0xffffffffu, value, offset);
    int other_idx = __shfl_xor_sync(0xffffffffu, idx, offset);
    if (better(other, other_idx, value, idx)) {
      value = other;
      idx = other_idx;
    }
  }
}

__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

// logits[num_tokens][num_experts] -> topk_idx / topk_weights [num_tokens][num_topk]
template <int kPerLane>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize)
    routing_kernel(const float* __restrict__ logits, const float* __restrict__ score_bias,
                   int num_tokens, int num_experts, int num_topk, int num_groups, int group_topk,
                   bool softmax, bool normalize, float scaling_factor, int* __restrict__ topk_idx,
                   float* __restrict__ topk_weights) {
  const int lane = threadIdx.x % kWarpSize;
  const int token = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (token >= num_tokens) return;  // whole warp leaves together
  const float* row = logits + static_cast<int64_t>(token) * num_experts;

  float score[kPerLane], choice[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    int e = lane + j * kWarpSize;
    score[j] = e < num_experts ? row[e] : -FLT_MAX;
  }
  if (softmax) {
    float local_max = -FLT_MAX;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) local_max = fmaxf(local_max, score[j]);
    const float max_logit = warp_max(local_max);
    float local_sum = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      int e = lane + j * kWarpSize;
      score[j] = e < num_experts ? expf(score[j] - max_logit) : 0.f;
      local_sum += score[j];
    }
    const float sum = warp_sum(local_sum);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) score[j] = score[j] / sum;
  } else {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) score[j] = 1.f / (1.f + expf(-score[j]));
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    int e = lane + j * kWarpSize;
    // Experts past num_experts can never be chosen.
    choice[j] = e < num_experts ? score[j] + (score_bias ? score_bias[e] : 0.f) : -INFINITY;
  }

  // Group-limited routing: keep the group_topk groups with the best top-2 sums.
  unsigned int kept_groups = 0xffffffffu;
  const int group_size = num_experts / num_groups;
  if (num_groups > 1) {
    float my_group_score = -INFINITY;  // lane g ends up holding group g's score
    for (int g = 0; g < num_groups; ++g) {
      float first = -INFINITY, second = -INFINITY;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        int e = lane + j * kWarpSize;
        if (e < num_experts && e / group_size == g) {
          if (choice[j] > first) {
            second = first;
            first = choice[j];
          } else if (choice[j] > second) {
            second = choice[j];
          }
        }
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset >>= 1) {
        float other_first = __shfl_xor_sync(0xffffffffu, first, offset);
        float other_second = __shfl_xor_sync(0xffffffffu, second, offset);
        float new_first = fmaxf(first, other_first);
        second = fmaxf(fminf(first, other_first), fmaxf(second, other_second));
        first = new_first;
      }
      if (lane == g) my_group_score = group_size > 1 ? first + second : first;
    }
    kept_groups = 0;
    for (int i = 0; i < group_topk; ++i) {
      bool open = lane < num_groups && !((kept_groups >> lane) & 1u);
      float value = open ? my_group_score : -INFINITY;
      int idx = open ? lane : kWarpSize + lane;
      warp_argmax(value, idx);
      kept_groups |= 1u << idx;
    }
  }

  bool taken[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    int e = lane + j * kWarpSize;
    taken[j] = e >= num_experts || !((kept_groups >> (e / group_size)) & 1u);
  }
  int my_idx = -1;
  float my_weight = 0.f, sum = 0.f;
  for (int k = 0; k < num_topk; ++k) {
    float value = -INFINITY;
    int idx = INT_MAX;
    float value_score = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      int e = lane + j * kWarpSize;
      if (!taken[j] && better(choice[j], e, value, idx)) {
        value = choice[j];
        idx = e;
        value_score = score[j];
      }
    }
    const int local_idx = idx;
    warp_argmax(value, idx);
    // The owning lane marks the winner and broadcasts its unbiased score.
    const int owner = idx % kWarpSize;
    if (lane == owner) {
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (lane + j * kWarpSize == idx) taken[j] = true;
    }
    const float winner_score =
        __shfl_sync(0xffffffffu, local_idx == idx ? value_score : 0.f, owner);
    sum += winner_score;  // in k order, as the reference
    if (lane == k) {
      my_idx = idx;
      my_weight = winner_score;
    }
  }
  if (lane < num_topk) {
    float w = normalize ? my_weight / sum : my_weight;
    w *= scaling_factor;
    topk_idx[static_cast<int64_t>(token) * num_topk + lane] = my_idx;
    topk_weights[static_cast<int64_t>(token) * num_topk + lane] = w;
  }
}

}  // namespace

void launch_routing(const float* logits, const float* score_bias, int num_tokens, int num_experts,
                    int num_topk, int num_groups, int group_topk, ScoreFunction score_function,
                    bool normalize, float scaling_factor, int* topk_idx, float* topk_weights,
                    cudaStream_t stream) {
  constexpr const char* kFn = "launch_routing";
  using detail::require;
  require(num_tokens >= 0, kFn, "num_tokens must be >= 0");
  require(num_experts >= 1 && num_experts <= kMaxRoutingExperts, kFn,
          "num_experts must be in [1, " + std::to_string(kMaxRoutingExperts) + "]");
  require(num_groups >= 1 && num_groups <= kMaxExpertGroups && num_experts % num_groups == 0, kFn,
          "num_groups must divide num_experts and be in [1, 32]");
  require(group_topk >= 1 && group_topk <= num_groups, kFn,
          "group_topk must be in [1, num_groups]");
  require(
      num_topk >= 1 && num_topk <= kMaxTopk && num_topk <= group_topk * (num_experts / num_groups),
      kFn, "num_topk must be in [1, min(32, experts in the kept groups)]");
  if (num_tokens == 0) return;
  detail::require_pointer(logits, kFn, "logits");
  detail::require_pointer(topk_idx, kFn, "topk_idx");
  detail::require_pointer(topk_weights, kFn, "topk_weights");
  const bool softmax = score_function == ScoreFunction::kSoftmax;
  const dim3 grid((num_tokens + kWarpsPerBlock - 1) / kWarpsPerBlock);
  const dim3 block(kWarpsPerBlock * kWarpSize);
#define EPO_ROUTING_LAUNCH(kPerLane)                                                          \
  routing_kernel<kPerLane><<<grid, block, 0, stream>>>(                                       \
      logits, score_bias, num_tokens, num_experts, num_topk, num_groups, group_topk, softmax, \
      normalize, scaling_factor, topk_idx, topk_weights)
  if (num_experts <= 64)
    EPO_ROUTING_LAUNCH(2);
  else if (num_experts <= 128)
    EPO_ROUTING_LAUNCH(4);
  else if (num_experts <= 256)
    EPO_ROUTING_LAUNCH(8);
  else
    EPO_ROUTING_LAUNCH(16);
#undef EPO_ROUTING_LAUNCH
  EPO_CUDA_CHECK_LAUNCH();
}

}  // namespace epo::kernels
