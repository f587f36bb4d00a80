#pragma once
// The minimal working configuration with overlap on, one per dispatcher (`epo validate --example`).
#include <string>
#include <vector>

#include "model/config.hpp"

namespace epo::planner {

/// alltoall, flex-deepep, flex-hybridep.
std::vector<std::string> example_names();
/// The example's configuration (model and hardware from the presets, derived fields filled);
/// an unknown name is an input error listing the known ones.
model::Config example_config(const std::string& name);

}  // namespace epo::planner
