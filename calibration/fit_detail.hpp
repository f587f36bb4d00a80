#pragma once
// Pieces shared by the fitters' sources (not part of the calibration API).
#include <cstdio>
#include <initializer_list>
#include <string>
#include <vector>

#include "calibration/fitters.hpp"

namespace epo::calib::detail {

using model::HardwareProfile;

inline std::string fmt(const char* format, double a, double b = 0, double c = 0, double d = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, format, a, b, c, d);
  return buf;
}

/// A fraction as a percentage with two decimals ("1.23%").
inline std::string pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f%%", x * 100);
  return b;
}

inline Fit make_fit(const char* name, const char* formula, const char* unit,
                    const HardwareProfile& hw, std::initializer_list<const char*> fields) {
  Fit f;
  f.name = name;
  f.model = formula;
  f.unit = unit;
  HardwareProfile copy = hw;
  for (const char* n : fields) {
    FittedField ff;
    ff.name = n;
    ff.base = ff.value = profile_field(copy, n);
    f.fields.push_back(ff);
  }
  return f;
}

/// Refuses every field when there are fewer points than parameters + kExtraPoints.
inline bool refuse_if_too_few(Fit& f, int points, const char* what) {
  const int need = static_cast<int>(f.fields.size()) + kExtraPoints;
  if (points >= need) return false;
  for (auto& ff : f.fields)
    ff.refusal = "too few points: " + std::to_string(points) + " " + what +
                 " sample(s), need at least " + std::to_string(need);
  f.quality.num_points = points;
  return true;
}

inline void refuse(FittedField& f, const std::string& why) {
  if (f.refusal.empty()) f.refusal = why;
}

/// Residual plot points at the accepted values (refused fields back at their base values).
template <typename Model>
void evaluate(Fit& f, const Model& model) {
  std::vector<double> p;
  for (const auto& ff : f.fields) p.push_back(ff.accepted() ? ff.value : ff.base);
  f.fitted.clear();
  for (size_t i = 0; i < f.measured.size(); ++i) f.fitted.push_back(model(p, i));
  f.quality = fit_quality(f.measured, f.fitted);
}

}  // namespace epo::calib::detail
