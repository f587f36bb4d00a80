#include "cli/report_format.hpp"

#include <cmath>
#include <cstdio>

namespace epo::cli {

std::string fmt_bytes(double bytes) {
  char buf[64];
  const double a = std::fabs(bytes);
  if (a >= 1024.0 * 1024 * 1024) std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  else if (a >= 1024.0 * 1024) std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024));
  else if (a >= 1024.0) std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.0f B", bytes);
  return buf;
}

std::string fmt_time_us(double us) {
  char buf[64];
  if (std::fabs(us) >= 1e6) std::snprintf(buf, sizeof buf, "%.3f s", us / 1e6);
  else if (std::fabs(us) >= 1e3) std::snprintf(buf, sizeof buf, "%.2f ms", us / 1e3);
  else std::snprintf(buf, sizeof buf, "%.1f us", us);
  return buf;
}

std::string fmt_si(double v, const char* unit) {
  static const char* prefixes[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (std::fabs(v) >= 1000.0 && i < 5) {
    v /= 1000.0;
    ++i;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f %s%s", v, prefixes[i], unit);
  return buf;
}

}  // namespace epo::cli
