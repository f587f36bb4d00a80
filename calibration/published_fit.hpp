#pragma once
// Fits a cluster profile per system on published runs: the few parameters a Megatron job adds
// beyond the kernels' datasheet rates (GEMM efficiency in BF16 and FP8, the framework's host time
// per layer op, the scale-out network's efficiency), on the rows of the models not held out.
#include <map>
#include <string>
#include <vector>

#include "calibration/published.hpp"

namespace epo::calib {

struct ClusterFit {
  model::HardwareProfile profile;
  int rows = 0;                       ///< fitted on
  double before_mean_abs_log = 0;     ///< mean |ln(predicted / published)| before and after
  double after_mean_abs_log = 0;
};

/// Fits every cluster that has rows of models outside `split` (at least `min_rows`); rows keep
/// their configs, whose hardware is replaced by the profile under fit. `date` goes into the
/// provenance.
std::map<std::string, ClusterFit> fit_published(const std::vector<PublishedRow>& rows,
                                                const Split& split, const std::string& date,
                                                int min_rows = 3);

std::string fit_published_text(const std::map<std::string, ClusterFit>& fits);

}  // namespace epo::calib
