// References: bf16 conversion and routing (see launchers.hpp for the semantics).
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/reference.hpp"

namespace epo::kernels::ref {

uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  // Round to nearest even on the 16 dropped bits.
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float bf16_to_float(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, sizeof value);
  return value;
}

namespace {

// a ranks before b: higher value, then lower index (the kernels use the same order).
bool better(float a, int a_idx, float b, int b_idx) {
  return a > b || (a == b && a_idx < b_idx);
}

void check_routing_args(int num_tokens, int num_experts, int num_topk, int num_groups,
                        int group_topk) {
  if (num_tokens < 0) throw std::invalid_argument("num_tokens must be >= 0");
  if (num_experts < 1 || num_experts > kMaxRoutingExperts)
    throw std::invalid_argument("num_experts must be in [1, " + std::to_string(kMaxRoutingExperts) +
                                "]");
  if (num_groups < 1 || num_groups > kMaxExpertGroups || num_experts % num_groups != 0)
    throw std::invalid_argument("num_groups must divide num_experts and be in [1, 32]");
  if (group_topk < 1 || group_topk > num_groups)
    throw std::invalid_argument("group_topk must be in [1, num_groups]");
  if (num_topk < 1 || num_topk > kMaxTopk || num_topk > group_topk * (num_experts / num_groups))
    throw std::invalid_argument("num_topk must be in [1, min(32, experts in the kept groups)]");
}

}  // namespace

void routing(const float* logits, const float* score_bias, int num_tokens, int num_experts,
             int num_topk, int num_groups, int group_topk, ScoreFunction score_function,
             bool normalize, float scaling_factor, int* topk_idx, float* topk_weights) {
  check_routing_args(num_tokens, num_experts, num_topk, num_groups, group_topk);
  const int group_size = num_experts / num_groups;
  std::vector<float> scores(num_experts), choice(num_experts);
  std::vector<char> allowed(num_experts), taken(num_experts);
  std::vector<float> group_score(num_groups);
  std::vector<char> group_kept(num_groups);
  for (int t = 0; t < num_tokens; ++t) {
    const float* row = logits + static_cast<int64_t>(t) * num_experts;
    if (score_function == ScoreFunction::kSoftmax) {
      float max_logit = row[0];
      for (int e = 1; e < num_experts; ++e) max_logit = std::max(max_logit, row[e]);
      float sum = 0.f;
      for (int e = 0; e < num_experts; ++e) {
        scores[e] = std::exp(row[e] - max_logit);
        sum += scores[e];
      }
      for (int e = 0; e < num_experts; ++e) scores[e] /= sum;
    } else {
      for (int e = 0; e < num_experts; ++e) scores[e] = 1.f / (1.f + std::exp(-row[e]));
    }
    for (int e = 0; e < num_experts; ++e)
      choice[e] = scores[e] + (score_bias ? score_bias[e] : 0.f);

    std::fill(allowed.begin(), allowed.end(), 1);
    if (num_groups > 1) {
      for (int g = 0; g < num_groups; ++g) {
        // Sum of the two best biased scores in the group (DeepSeek-V3); the best one if alone.
        float first = -INFINITY, second = -INFINITY;
        for (int e = g * group_size; e < (g + 1) * group_size; ++e) {
          if (choice[e] > first) {
            second = first;
            first = choice[e];
          } else if (choice[e] > second) {
            second = choice[e];
          }
        }
        group_score[g] = group_size > 1 ? first + second : first;
      }
      std::fill(group_kept.begin(), group_kept.end(), 0);
      for (int i = 0; i < group_topk; ++i) {
        int best = -1;
        for (int g = 0; g < num_groups; ++g)
          if (!group_kept[g] && (best < 0 || better(group_score[g], g, group_score[best], best)))
            best = g;
        group_kept[best] = 1;
      }
      for (int e = 0; e < num_experts; ++e) allowed[e] = group_kept[e / group_size];
    }

    std::fill(taken.begin(), taken.end(), 0);
    float sum = 0.f;
    for (int k = 0; k < num_topk; ++k) {
      int best = -1;
      for (int e = 0; e < num_experts; ++e)
        if (allowed[e] && !taken[e] && (best < 0 || better(choice[e], e, choice[best], best)))
          best = e;
      taken[best] = 1;
      topk_idx[static_cast<int64_t>(t) * num_topk + k] = best;
      topk_weights[static_cast<int64_t>(t) * num_topk + k] = scores[best];
      sum += scores[best];
    }
    for (int k = 0; k < num_topk; ++k) {
      float& w = topk_weights[static_cast<int64_t>(t) * num_topk + k];
      if (normalize) w = w / sum;
      w *= scaling_factor;
    }
  }
}

}  // namespace epo::kernels::ref
