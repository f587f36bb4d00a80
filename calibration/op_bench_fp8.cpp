// The FP8 GEMM efficiency of a cluster from published MoE-layer times measured in FP8 and in BF16
// on the same layer (Megatron-LM's moe_perf cases): the ratio of the two times cancels what both
// precisions share (router, permutation, dispatch, combine, and the model's errors on them), so
// it measures what FP8 changes — the GEMM rate and the quantisation passes.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "calibration/op_bench.hpp"

namespace epo::calib {

namespace {

struct LayerPair {
  OpBenchRow fp8, bf16;
};

/// FP8 layer rows with the BF16 row of the same case, library and direction, per cluster.
std::map<std::string, std::vector<LayerPair>> layer_pairs(const std::vector<OpBenchRow>& rows) {
  auto is_layer = [](const OpBenchRow& r) {
    return r.config && (r.quantity == OpQuantity::layer_forward_ms ||
                        r.quantity == OpQuantity::layer_backward_ms) && r.published > 0;
  };
  std::map<std::string, std::vector<LayerPair>> out;
  for (const auto& f : rows) {
    if (!is_layer(f) || f.config->opt.precision != model::Precision::fp8) continue;
    for (const auto& b : rows) {
      if (!is_layer(b) || b.config->opt.precision == model::Precision::fp8) continue;
      const model::Config& fc = *f.config;
      const model::Config& bc = *b.config;
      if (b.cluster == f.cluster && b.quantity == f.quantity && b.library == f.library &&
          bc.model.hidden_size == fc.model.hidden_size &&
          bc.model.num_experts == fc.model.num_experts &&
          bc.model.router_topk == fc.model.router_topk &&
          bc.model.moe_ffn_hidden_size == fc.model.moe_ffn_hidden_size) {
        out[f.cluster].push_back({f, b});
        break;
      }
    }
  }
  return out;
}

/// Mean |ln(predicted FP8/BF16 ratio / published ratio)| with `hw` as the pairs' profile.
double ratio_error(std::vector<LayerPair>& pairs, const model::HardwareProfile& hw) {
  double sum = 0;
  int n = 0;
  for (auto& p : pairs) {
    set_row_profile(p.fp8, hw);
    set_row_profile(p.bf16, hw);
    const double f = predict_op_row(p.fp8), b = predict_op_row(p.bf16);
    if (!(f > 0) || !(b > 0)) continue;
    sum += std::fabs(std::log((f / b) / (p.fp8.published / p.bf16.published)));
    ++n;
  }
  return n ? sum / n : 0.0;
}

}  // namespace

void fit_fp8_on_layer_pairs(const std::vector<OpBenchRow>& rows, const std::string& date,
                            std::map<std::string, OpClusterFit>& fits) {
  for (auto& [cluster, pairs] : layer_pairs(rows)) {
    auto it = fits.find(cluster);
    model::HardwareProfile hw =
        it != fits.end() ? it->second.profile : pairs.front().fp8.config->hw;
    // A grid over the range an FP8 GEMM can reach (0.2 to 1 of its peak), then a finer one.
    double lo = 0.2, hi = 1.0, best_v = hw.fp8_gemm_efficiency;
    const double before = ratio_error(pairs, hw);
    double best = before;
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i <= 40; ++i) {
        model::HardwareProfile t = hw;
        t.fp8_gemm_efficiency = lo + (hi - lo) * i / 40;
        const double e = ratio_error(pairs, t);
        if (e < best - 1e-12) best = e, best_v = t.fp8_gemm_efficiency;
      }
      const double width = (hi - lo) / 8;
      lo = std::max(0.2, best_v - width);
      hi = std::min(1.0, best_v + width);
    }
    hw.fp8_gemm_efficiency = best_v;
    char how[400];
    std::snprintf(how, sizeof how,
                  "fitted %s by epo calibrate ops --fit on %zu published MoE-layer times in FP8 "
                  "against the same layer in BF16 (their ratio; Megatron-LM's moe_perf cases); "
                  "mean |ln error| of the ratio %.3g -> %.3g",
                  date.c_str(), pairs.size(), before, best);
    hw.provenance["fp8_gemm_efficiency"] = how;
    hw.sources.erase("fp8_gemm_efficiency");
    hw.calibrated = true;
    OpClusterFit& f = fits[cluster];
    f.profile = hw;
    f.fields.push_back("fp8_gemm_efficiency");
    f.fp8_pairs = static_cast<int>(pairs.size());
    f.fp8_before = before;
    f.fp8_after = best;
  }
}

}  // namespace epo::calib
