#pragma once
// --check: what is compared and how. Outputs and gradients are copied to the host as raw bf16
// (Capture); schedules are compared bit for bit, EP ranks against the single-rank reference
// (all experts local, every rank's tokens, no communication) within a stated bf16 tolerance.
// Pure C++ so the CPU tests cover the comparisons.
#include <cstdint>
#include <string>
#include <vector>

#include "executor/run.hpp"

namespace epo::exec {

/// Relative bound on forward outputs: the EP path differs from the reference only in the
/// rounding of partial sums (flex sums each rank's share of a token's experts, rounds it to bf16,
/// then sums the ranks), a few bf16 ulps after several layers.
constexpr double kOutputTolerance = 2e-2;
/// Relative bound on gradients: dense weight gradients are summed over ranks and micro-batches
/// in a different order (bf16 accumulation on the reference, fp32 sums of per-rank bf16 here).
constexpr double kGradTolerance = 5e-2;

/// One rank's outputs and gradients after a step, raw bf16 bits.
struct Capture {
  std::vector<std::vector<std::uint16_t>> outputs;      ///< per micro-batch [tokens][hidden]
  std::vector<std::vector<std::uint16_t>> input_grads;  ///< per micro-batch [tokens][hidden]
  std::vector<std::vector<std::uint16_t>> dense_grads;  ///< per layer (attention, shared/dense MLP)
  std::vector<std::vector<std::uint16_t>> expert_w1, expert_w2;  ///< per layer, local experts
  bool dense_reduced = false;  ///< dense grads already summed over ranks
};

/// bf16 bits to float.
float bf16_to_float(std::uint16_t bits);

/// max |a - b| / max |b| (0 when both are all zero; a and b the same length).
double relative_error(const std::vector<float>& a, const std::vector<float>& b);

/// Names of the tensors that differ in any bit ("outputs mb 2", "dense grads layer 0", ...).
std::vector<std::string> bit_differences(const Capture& a, const Capture& b);

/// Compares the EP ranks' captures (index = rank) against the reference's and fills
/// max_output_error, max_grad_error, failures and the tolerances; `tokens` per rank and
/// micro-batch, `hidden`, `local_experts` per rank.
void compare_to_reference(const std::vector<Capture>& ep, const Capture& ref, int tokens,
                          int hidden, int local_experts, CheckResult& out);

}  // namespace epo::exec
