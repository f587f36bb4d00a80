#pragma once
// epo run --dry-run (run_dry.cpp).
#include <string>

#include "executor/run.hpp"
#include "model/config.hpp"

namespace epo::cli {

/// Prints what `epo run` would run and each rank's planned device memory by class, whether it
/// fits the hardware's memory (and if not, smaller runs that would); writes the plan as JSON to
/// `json_path` when not empty. Needs no GPU. Returns the exit code.
int print_dry_run(const model::Config& cfg, const exec::RunOptions& options,
                  const std::string& json_path);

}  // namespace epo::cli
