#include "planner/pipeline_split.hpp"

#include <vector>

namespace epo::planner {

std::string balanced_pipeline_layout(int num_layers, int mtp_layers, int pp, int vpp) {
  const long long stages = static_cast<long long>(pp) * vpp;
  // The loss (output layer and cross-entropy) takes a layer's slot in the last stage.
  const long long slots = static_cast<long long>(num_layers) + mtp_layers + 1;
  if (stages < 2 || num_layers < stages || mtp_layers < 0 || stages > 4096) return "";
  const long long per = (slots + stages - 1) / stages;
  if (per < 2) return "";
  std::vector<long long> n(static_cast<std::size_t>(stages), per);
  const long long last_min = mtp_layers + 1;
  if (per < last_min) return "";
  long long deficit = stages * per - slots;
  // Last, first, second to last, second, ...: the stages holding the loss and the embedding
  // lose a slot first; the last keeps its MTP layers and the loss, every other stage a layer.
  for (long long i = 0; deficit > 0 && i < 4 * stages; ++i) {
    const long long k = (i / 2) % stages;
    const auto at = static_cast<std::size_t>(i % 2 == 0 ? stages - 1 - k : k);
    if (n[at] > (at + 1 == n.size() ? last_min : 1)) {
      --n[at];
      --deficit;
    }
  }
  if (deficit > 0) return "";
  n.back() -= last_min;  // decoder layers left in the last stage
  auto stage = [&](long long i) {
    std::string s(static_cast<std::size_t>(n[static_cast<std::size_t>(i)]), 't');
    if (i == 0) s.insert(0, "E");
    if (i == stages - 1) s += std::string(static_cast<std::size_t>(mtp_layers), 'm') + "L";
    return s;
  };
  std::string out = stage(0) + "|";
  for (long long i = 1; i < stages - 1;) {
    long long j = i;
    while (j + 1 < stages - 1 && n[static_cast<std::size_t>(j + 1)] == n[static_cast<std::size_t>(i)]) ++j;
    const long long run = j - i + 1;
    out += run >= 2 ? "(" + stage(i) + "|)*" + std::to_string(run) : stage(i) + "|";
    i = j + 1;
  }
  return out + stage(stages - 1);
}

}  // namespace epo::planner
