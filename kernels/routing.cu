// Router: softmax/sigmoid scores, optional selection bias, group-limited top-k (DeepSeek-V3).
// One warp per token; lane l holds the contiguous experts [l*P, l*P + P) in registers (P =
// kPerLane), loaded as 16-byte vectors. Contiguous experts put a whole group in one lane or in an
// aligned run of lanes, so a group's top-2 is a local pass plus one or two shuffle rounds for all
// groups at once, the kept groups come from one rank count, and the top-k is k warp arg-max
// rounds where only the winning lane rescans its experts. Nothing touches shared memory.
#include <cfloat>
#include <climits>
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

// Folds v into the running (first, second) maxima.
__device__ __forceinline__ void push_top2(float v, float& first, float& second) {
  if (v > first) {
    second = first;
    first = v;
  } else if (v > second) {
    second = v;
  }
}

// Merges another lane's (first, second) into ours.
__device__ __forceinline__ void merge_top2(float other_first, float other_second, float& first,
                                           float& second) {
  const float new_first = fmaxf(first, other_first);
  second = fmaxf(fminf(first, other_first), fmaxf(second, other_second));
  first = new_first;
}

// logits[num_tokens][num_experts] -> topk_idx / topk_weights [num_tokens][num_topk].
// lanes_per_group > 0: every group is exactly lanes_per_group lanes (a power of two; group g =
// lanes [g*L, g*L + L)); 0: groups do not align with lanes (general per-group pass).
template <int kPerLane>
__global__ void __launch_bounds__(kWarpsPerBlock* kWarpSize)
    routing_kernel(const float* __restrict__ logits, const float* __restrict__ score_bias,
                   int num_tokens, int num_experts, int num_topk, int num_groups, int group_topk,
                   int lanes_per_group, bool vec4, bool softmax, bool normalize,
                   float scaling_factor, int* __restrict__ topk_idx,
                   float* __restrict__ topk_weights) {
  const int lane = threadIdx.x % kWarpSize;
  const int token = blockIdx.x * kWarpsPerBlock + threadIdx.x / kWarpSize;
  if (token >= num_tokens) return;  // whole warp leaves together
  const float* row = logits + static_cast<int64_t>(token) * num_experts;
  const int first_expert = lane * kPerLane;

  float score[kPerLane], choice[kPerLane];
  if (kPerLane % 4 == 0 && vec4) {
    // num_experts % 4 == 0 and 16-byte aligned rows: a vector is wholly inside or past the row.
#pragma unroll
    for (int q = 0; q < kPerLane / 4; ++q) {
      const int e = first_expert + 4 * q;
      float4 v = make_float4(-FLT_MAX, -FLT_MAX, -FLT_MAX, -FLT_MAX);
      if (e < num_experts) v = __ldg(reinterpret_cast<const float4*>(row + e));
      score[4 * q] = v.x;
      score[4 * q + 1] = v.y;
      score[4 * q + 2] = v.z;
      score[4 * q + 3] = v.w;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = first_expert + j;
      score[j] = e < num_experts ? __ldg(row + e) : -FLT_MAX;
    }
  }
  if (softmax) {
    float local_max = -FLT_MAX;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) local_max = fmaxf(local_max, score[j]);
    const float max_logit = warp_max(local_max);
    float local_sum = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      score[j] = first_expert + j < num_experts ? expf(score[j] - max_logit) : 0.f;
      local_sum += score[j];
    }
    const float sum = warp_sum(local_sum);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) score[j] = score[j] / sum;
  } else {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) score[j] = 1.f / (1.f + expf(-score[j]));
  }
  if (score_bias != nullptr && first_expert < num_experts) {
    if (kPerLane % 4 == 0 && vec4) {
#pragma unroll
      for (int q = 0; q < kPerLane / 4; ++q) {
        const int e = first_expert + 4 * q;
        float4 b = make_float4(0.f, 0.f, 0.f, 0.f);
        if (e < num_experts) b = __ldg(reinterpret_cast<const float4*>(score_bias + e));
        choice[4 * q] = score[4 * q] + b.x;
        choice[4 * q + 1] = score[4 * q + 1] + b.y;
        choice[4 * q + 2] = score[4 * q + 2] + b.z;
        choice[4 * q + 3] = score[4 * q + 3] + b.w;
      }
    } else {
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int e = first_expert + j;
        choice[j] = score[j] + (e < num_experts ? __ldg(score_bias + e) : 0.f);
      }
    }
  } else {
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) choice[j] = score[j];
  }
#pragma unroll
  for (int j = 0; j < kPerLane; ++j)  // experts past num_experts can never be chosen
    if (first_expert + j >= num_experts) choice[j] = -INFINITY;

  // Group-limited routing: keep the group_topk groups with the best top-2 sums.
  const int group_size = num_experts / num_groups;
  bool allowed[kPerLane];
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) allowed[j] = first_expert + j < num_experts;
  if (num_groups > 1) {
    float my_group_score = -INFINITY;  // lane g ends up holding group g's score
    if (lanes_per_group > 0) {
      // All of this lane's experts are in group lane / L: local top-2, then the L lanes merge.
      float first = -INFINITY, second = -INFINITY;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) push_top2(choice[j], first, second);
      for (int offset = lanes_per_group / 2; offset > 0; offset >>= 1)
        merge_top2(__shfl_xor_sync(0xffffffffu, first, offset),
                   __shfl_xor_sync(0xffffffffu, second, offset), first, second);
      const float group_score = group_size > 1 ? first + second : first;
      my_group_score = __shfl_sync(0xffffffffu, group_score, (lane * lanes_per_group) % kWarpSize);
    } else {
      for (int g = 0; g < num_groups; ++g) {
        float first = -INFINITY, second = -INFINITY;
#pragma unroll
        for (int j = 0; j < kPerLane; ++j) {
          const int e = first_expert + j;
          if (e < num_experts && e / group_size == g) push_top2(choice[j], first, second);
        }
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1)
          merge_top2(__shfl_xor_sync(0xffffffffu, first, offset),
                     __shfl_xor_sync(0xffffffffu, second, offset), first, second);
        if (lane == g) my_group_score = group_size > 1 ? first + second : first;
      }
    }
    // Group g is kept when fewer than group_topk groups rank before it (a strict total order, so
    // this is the references' repeated arg-max).
    int rank = 0;
    for (int g = 0; g < num_groups; ++g) {
      const float other = __shfl_sync(0xffffffffu, my_group_score, g);
      rank += better(other, g, my_group_score, lane) ? 1 : 0;
    }
    const unsigned int kept_groups =
        __ballot_sync(0xffffffffu, lane < num_groups && rank < group_topk);
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      const int e = first_expert + j;
      const int g = lanes_per_group > 0 ? lane / lanes_per_group : e / group_size;
      allowed[j] = allowed[j] && ((kept_groups >> (g % kWarpSize)) & 1u);
    }
  }

  // This lane's best allowed expert; only the lane whose expert wins a round rescans.
  float best = -INFINITY, best_score = 0.f;
  int best_idx = INT_MAX;
  auto rescan = [&] {
    best = -INFINITY;
    best_idx = INT_MAX;
    best_score = 0.f;
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) {
      if (allowed[j] && better(choice[j], first_expert + j, best, best_idx)) {
        best = choice[j];
        best_idx = first_expert + j;
        best_score = score[j];
      }
    }
  };
  rescan();
  int my_idx = -1;
  float my_weight = 0.f, sum = 0.f;
  for (int k = 0; k < num_topk; ++k) {
    float value = best;
    int idx = best_idx;
    warp_argmax(value, idx);
    const int owner = idx / kPerLane;
    const float winner_score = __shfl_sync(0xffffffffu, best_score, owner);
    if (lane == owner) {
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (first_expert + j == idx) allowed[j] = false;
      rescan();
    }
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
  const bool aligned = reinterpret_cast<uintptr_t>(logits) % 16 == 0 &&
                       (score_bias == nullptr || reinterpret_cast<uintptr_t>(score_bias) % 16 == 0);
  const bool vec4 = aligned && num_experts % 4 == 0;
  // Lanes per group when groups fall on whole, aligned runs of a power-of-two number of lanes.
  auto lanes_per_group_for = [&](int per_lane) {
    const int group_size = num_experts / num_groups;
    if (group_size % per_lane != 0) return 0;
    const int lanes = group_size / per_lane;
    return (lanes & (lanes - 1)) == 0 ? lanes : 0;
  };
#define EPO_ROUTING_LAUNCH(kPerLane)                                                            \
  routing_kernel<kPerLane>                                                                      \
      <<<grid, block, 0, stream>>>(logits, score_bias, num_tokens, num_experts, num_topk,       \
                                   num_groups, group_topk, lanes_per_group_for(kPerLane), vec4, \
                                   softmax, normalize, scaling_factor, topk_idx, topk_weights)
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
