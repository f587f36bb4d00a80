#pragma once
// Assertions the round-trip tests of the emitters and readers share.
#include "model/config.hpp"

namespace epo::config_checks {

/// Every layout field and every option the Megatron arguments and Bridge overrides carry equal
/// (CUDA_DEVICE_MAX_CONNECTIONS aside: it travels in the environment).
void check_same_layout_and_options(const model::Config& a, const model::Config& b);

}  // namespace epo::config_checks
