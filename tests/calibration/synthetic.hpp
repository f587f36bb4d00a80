#pragma once
// Synthetic microbenchmark samples from known parameters, written from the formulas of
// calibration/samples.hpp independently of the fitters, with relative uniform noise.
#include <random>

#include "calibration/samples.hpp"
#include "model/hardware.hpp"

namespace epo::calib::test {

/// H200-like datasheet figures and parameters different from the preset's, to be recovered.
model::HardwareProfile truth_profile();

/// Samples of every bench generated from `truth` with +-noise relative error (seeded).
Samples synthetic_samples(const model::HardwareProfile& truth, double noise, unsigned seed);

}  // namespace epo::calib::test
