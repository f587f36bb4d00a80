#pragma once
// The kernel path of an expert-GEMM choice (model::ExpertGemm, resolved from `automatic` first).
#include "kernels/launchers.hpp"
#include "model/config.hpp"

namespace epo::exec {

inline kernels::GroupedGemmAlgo kernel_algo(model::ExpertGemm resolved) {
  switch (resolved) {
    case model::ExpertGemm::grouped:
      return kernels::GroupedGemmAlgo::kGroupedBatched;
    case model::ExpertGemm::streams:
      return kernels::GroupedGemmAlgo::kMultiStream;
    case model::ExpertGemm::strided:
      return kernels::GroupedGemmAlgo::kStridedBatched;
    default:
      return kernels::GroupedGemmAlgo::kPerExpertLoop;
  }
}

}  // namespace epo::exec
