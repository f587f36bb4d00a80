#pragma once
// Units used across the model. Inside the simulator time is integer nanoseconds.
#include <cstdint>

namespace epo {

using TimeNs = std::int64_t;  ///< simulator time, nanoseconds
using Bytes = double;         ///< byte counts in the cost model (may be expectations, so not integral)
using Flops = double;         ///< floating-point operation counts

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kGB = 1e9;

/// Nanoseconds from microseconds, rounded to nearest.
inline TimeNs ns_from_us(double us) { return static_cast<TimeNs>(us * 1000.0 + 0.5); }
inline double us_from_ns(TimeNs ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace epo
