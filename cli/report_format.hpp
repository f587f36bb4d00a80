#pragma once
// Small formatting helpers shared by the commands' readable reports.
#include <string>

namespace epo::cli {

/// "1.23 GiB", "512.0 MiB"
std::string fmt_bytes(double bytes);
/// "1.23 ms" / "456.7 us"
std::string fmt_time_us(double us);
/// "12.3 GFLOP" style with SI prefixes
std::string fmt_si(double value, const char* unit);

}  // namespace epo::cli
