#pragma once
// The shapes one configuration runs, for `epo calibrate bench --for`: its dense GEMMs (forward,
// data and weight gradient), its router, its expert GEMMs at the rows per expert its routing
// gives (mean rank and busiest rank), its dispatch bytes per rank. Pure C++.
#include <string>
#include <vector>

#include "executor/microbench.hpp"
#include "model/config.hpp"

namespace epo::exec {

struct ConfigBenchShapes {
  std::string label;                          ///< "deepseek-v3, EP 8, 4096 tokens per micro-batch"
  std::vector<std::vector<int>> gemm_shapes;  ///< {m, n, k}, deduplicated
  ExpertBenchShape experts;
  std::vector<long long> dispatch_bytes;      ///< bytes per rank of one dispatch (and combine)
  int ep = 1;
  std::vector<std::string> not_measured;      ///< what of the configuration has no sample, and why
};

/// The shapes of `cfg` on one rank (TP and ETP split the widths as Megatron's layers do).
ConfigBenchShapes config_bench_shapes(const model::Config& cfg);

/// Adds `shapes` to `options` (beside the generic sweep).
void add_config_shapes(BenchOptions& options, const ConfigBenchShapes& shapes);

}  // namespace epo::exec
