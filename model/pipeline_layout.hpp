#pragma once
// Which decoder layers, embedding, loss and MTP layers each pipeline stage holds, as Megatron-Core
// places them: an explicit pipeline_model_parallel_layout string ("Et|(tt|)*30mL"), or
// num_layers_in_first/last_pipeline_stage, or account_for_embedding/loss_in_pipeline_split, or an
// even split of num_layers over pp*vpp virtual stages.
#include <string>
#include <vector>

#include "model/config.hpp"

namespace epo::model {

/// One virtual pipeline stage: chunk `chunk` of pipeline rank `rank` (flat index chunk*pp + rank).
struct VirtualStage {
  int first_layer = 0;  ///< global index of its first decoder layer
  int num_layers = 0;   ///< decoder layers (dense and MoE)
  int num_dense = 0;    ///< of which dense (index < first_k_dense_layers)
  int mtp_layers = 0;   ///< multi-token-prediction layers
  bool embedding = false;
  bool loss = false;  ///< final norm, output layer and loss
};

struct PipelinePlacement {
  int pp = 1;
  int vpp = 1;
  std::vector<VirtualStage> stages;  ///< pp*vpp entries, index chunk*pp + rank
  const VirtualStage& at(int rank, int chunk) const {
    return stages[static_cast<std::size_t>(chunk * pp + rank)];
  }
};

/// Megatron's layout string unrolled into one string of layer symbols (E, t, m, L) per virtual
/// stage: commas dropped, "(...)*n" and "x*n" repeated. Throws an input error on other symbols.
std::vector<std::string> parse_pipeline_layout(const std::string& layout);

/// Placement of the configuration's layers; throws an input error naming the field when a layout
/// or first/last-stage count does not fit the model and pp*vpp (as Megatron would).
PipelinePlacement pipeline_placement(const Config& cfg);

/// Checks the layout fields of the configuration (pipeline_placement without the result).
void check_pipeline_layout(const Config& cfg);

}  // namespace epo::model
