// The fit report: per fit its points, each parameter fitted or refused, quality and residuals.
#include <cstdio>
#include <sstream>

#include "calibration/fit_detail.hpp"
#include "calibration/least_squares.hpp"
#include "calibration/profile_fit.hpp"

namespace epo::calib {

std::string fit_report_text(const ProfileFit& pf) {
  std::ostringstream os;
  int accepted = 0, refused = 0;
  for (const auto& f : pf.fits) {
    os << "fit " << f.name << ": " << f.model << "\n";
    os << "  points: " << f.source << "\n";
    for (const auto& ff : f.fields) {
      char buf[256];
      if (ff.accepted()) {
        std::snprintf(buf, sizeof buf, "  %-24s %12.6g -> %-12.6g fitted\n", ff.name.c_str(),
                      ff.base, ff.value);
        ++accepted;
      } else {
        std::snprintf(buf, sizeof buf, "  %-24s %12.6g    REFUSED, base kept: ", ff.name.c_str(),
                      ff.base);
        ++refused;
      }
      os << buf;
      if (!ff.accepted()) os << ff.refusal << "\n";
    }
    if (!f.fitted.empty() && f.fitted.size() == f.measured.size()) {
      os << "  quality: rel RMS " << detail::pct(f.quality.rel_rms) << ", max |rel error| "
         << detail::pct(f.quality.max_rel_error) << ", " << f.quality.num_points << " points\n";
      os << residual_plot(f.labels, f.measured, f.fitted, f.unit);
    }
    os << "\n";
  }
  os << "summary: " << accepted << " parameter(s) fitted, " << refused
     << " refused (base value kept)\n";
  return os.str();
}

}  // namespace epo::calib
