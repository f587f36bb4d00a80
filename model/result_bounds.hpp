#pragma once
// Results that cannot be right are refused, not printed: the check every command runs on a
// prediction before it prints or writes it.
#include "model/prediction.hpp"

namespace epo::model {

/// Throws a runtime error (exit 1) naming the figure when a time, rate or byte count of `p` is
/// negative or not finite, when the step time is not positive, or when MFU exceeds 1 (the
/// model's FLOPs cannot run faster than the GPU's peak).
void check_prediction(const Prediction& p);

}  // namespace epo::model
