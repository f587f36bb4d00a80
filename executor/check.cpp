// --check comparisons.
#include "executor/check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace epo::exec {

float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  if (a.size() != b.size()) return INFINITY;
  if (scale == 0) return diff == 0 ? 0 : INFINITY;
  return diff / scale;
}

namespace {

std::vector<float> to_float(const std::vector<std::uint16_t>& v, std::size_t from = 0,
                            std::size_t count = static_cast<std::size_t>(-1)) {
  const std::size_t n = std::min(count, v.size() - std::min(from, v.size()));
  std::vector<float> f(n);
  for (std::size_t i = 0; i < n; ++i) f[i] = bf16_to_float(v[from + i]);
  return f;
}

void diff_list(const std::vector<std::vector<std::uint16_t>>& a,
               const std::vector<std::vector<std::uint16_t>>& b, const char* what,
               const char* index_name, std::vector<std::string>& out) {
  if (a.size() != b.size()) {
    out.push_back(std::string(what) + ": different counts");
    return;
  }
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) out.push_back(std::string(what) + " " + index_name + " " + std::to_string(i));
}

}  // namespace

std::vector<std::string> bit_differences(const Capture& a, const Capture& b) {
  std::vector<std::string> out;
  diff_list(a.outputs, b.outputs, "outputs", "mb", out);
  diff_list(a.input_grads, b.input_grads, "input grads", "mb", out);
  diff_list(a.dense_grads, b.dense_grads, "dense grads", "layer", out);
  diff_list(a.expert_w1, b.expert_w1, "expert fc1 grads", "layer", out);
  diff_list(a.expert_w2, b.expert_w2, "expert fc2 grads", "layer", out);
  return out;
}

void compare_to_reference(const std::vector<Capture>& ep, const Capture& ref, int tokens,
                          int hidden, int local_experts, CheckResult& out) {
  out.output_tolerance = kOutputTolerance;
  out.grad_tolerance = kGradTolerance;
  const std::size_t rank_elems = static_cast<std::size_t>(tokens) * hidden;
  auto judge = [&](double err, double tol, double& worst, const std::string& what) {
    worst = std::max(worst, err);
    if (!(err <= tol))
      out.failures.push_back(what + ": relative error " + std::to_string(err) + " > " +
                             std::to_string(tol));
  };
  for (std::size_t r = 0; r < ep.size(); ++r) {
    const std::string rank = "rank " + std::to_string(r) + " ";
    for (std::size_t m = 0; m < ep[r].outputs.size() && m < ref.outputs.size(); ++m) {
      judge(relative_error(to_float(ep[r].outputs[m]), to_float(ref.outputs[m], r * rank_elems, rank_elems)),
            kOutputTolerance, out.max_output_error, rank + "output mb " + std::to_string(m));
      judge(relative_error(to_float(ep[r].input_grads[m]),
                           to_float(ref.input_grads[m], r * rank_elems, rank_elems)),
            kGradTolerance, out.max_grad_error, rank + "input grad mb " + std::to_string(m));
    }
    for (std::size_t l = 0; l < ep[r].expert_w1.size() && l < ref.expert_w1.size(); ++l) {
      const std::size_t n1 = ep[r].expert_w1[l].size(), n2 = ep[r].expert_w2[l].size();
      judge(relative_error(to_float(ep[r].expert_w1[l]), to_float(ref.expert_w1[l], r * n1, n1)),
            kGradTolerance, out.max_grad_error, rank + "expert fc1 grad layer " + std::to_string(l));
      judge(relative_error(to_float(ep[r].expert_w2[l]), to_float(ref.expert_w2[l], r * n2, n2)),
            kGradTolerance, out.max_grad_error, rank + "expert fc2 grad layer " + std::to_string(l));
    }
  }
  (void)local_experts;
  // Dense (replicated) weights: the reference's gradient is the sum over all ranks' tokens.
  if (!ep.empty())
    for (std::size_t l = 0; l < ref.dense_grads.size() && l < ep[0].dense_grads.size(); ++l) {
      std::vector<float> sum = to_float(ep[0].dense_grads[l]);
      if (!ep[0].dense_reduced)
        for (std::size_t r = 1; r < ep.size(); ++r) {
          const auto other = to_float(ep[r].dense_grads[l]);
          for (std::size_t i = 0; i < sum.size() && i < other.size(); ++i) sum[i] += other[i];
        }
      judge(relative_error(sum, to_float(ref.dense_grads[l])), kGradTolerance, out.max_grad_error,
            "dense grads layer " + std::to_string(l));
    }
  out.ran = true;
  out.passed = out.failures.empty();
}

}  // namespace epo::exec
