#pragma once
// Expert GEMMs measured at a configuration's own shapes (HardwareProfile::expert_gemm_times):
// their lookup, their use in a layer's costs, and their JSON form in a profile.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/cost.hpp"
#include "model/hardware.hpp"

namespace epo::model {

/// Rows of a measured entry and of the GEMM it stands for may differ by this share at most;
/// the time is scaled linearly by rows between them.
constexpr double kMeasuredRowsTolerance = 0.10;

/// Device time of `experts` expert GEMMs of rows x n x k in `pass` ("fwd", "dgrad", "wgrad")
/// on `launch`, from the profile's measured entry of that shape; < 0 when it holds none.
double measured_expert_gemm_us(const HardwareProfile& hw, int experts, double rows, double n,
                               double k, const std::string& pass, const std::string& launch);

/// The expert GEMMs of one MoE layer's MLP (components "expert.fc1" and "expert.fc2" and their
/// "dgrad", "wgrad" and "recompute" variants) take the measured time of their shape where the
/// profile has one: `share` ranks' worth (virtual ranks share one GPU). fc1 is rows x n1 x k1,
/// fc2 rows x n2 x k2. Returns the number of components set.
int use_measured_expert_gemms(const HardwareProfile& hw, int experts, double rows, double n1,
                              double k1, double n2, double k2, const std::string& launch,
                              double share, std::vector<std::vector<Component>*> parts);

std::vector<MeasuredExpertGemm> measured_expert_gemms_from_json(const nlohmann::json& j,
                                                               const std::string& where);
nlohmann::json to_json(const std::vector<MeasuredExpertGemm>& v);

}  // namespace epo::model
