#pragma once
// Units used across the model. Inside the simulator time is integer nanoseconds.
#include <cstdint>

namespace epo {

using TimeNs = std::int64_t;  ///< simulator time, nanoseconds
using Bytes = double;         ///< byte counts in the cost model (may be expectations, so not integral)
using Flops = double;         ///< floating-point operation counts

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;

/// What ns_from_us gives for a time it cannot represent (NaN, infinite, or 2^62 ns and beyond);
/// check_step_work (model/limits.hpp) refuses op costs that reach it.
constexpr TimeNs kTimeNsSaturated = TimeNs{1} << 62;

/// Nanoseconds from microseconds, rounded to nearest; saturates at +-kTimeNsSaturated (NaN too)
/// instead of overflowing the conversion.
inline TimeNs ns_from_us(double us) {
  const double ns = us * 1000.0 + 0.5;
  if (!(ns < 4.0e18)) return kTimeNsSaturated;
  if (ns < -4.0e18) return -kTimeNsSaturated;
  return static_cast<TimeNs>(ns);
}
inline double us_from_ns(TimeNs ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace epo
