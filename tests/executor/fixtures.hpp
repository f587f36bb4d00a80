#pragma once
// Configurations for the executor tests: the tiny preset on R ranks, small sequence.
#include <string>

#include <nlohmann/json.hpp>

#include "model/config.hpp"
#include "model/config_io.hpp"

namespace epo::test {

/// tiny on `ranks` EP ranks (virtual ranks on one GPU unless `gpus`), 4 micro-batches of `seq`
/// tokens per rank.
inline model::Config tiny_config(int ranks, bool overlap, bool delay_wgrad,
                                 const std::string& dispatcher = "alltoall", bool gpus = false,
                                 int seq = 128, const std::string& routing = "uniform") {
  nlohmann::json j = {
      {"schema_version", 1},
      {"model", "tiny"},
      {"hardware", "h200-sxm"},
      {"gpus", ranks},
      {"parallel",
       {{"ep", ranks}, {"micro_batch_size", 1}, {"global_batch_size", 4 * ranks},
        {"seq_length", seq}}},
      {"options",
       {{"dispatcher", dispatcher},
        {"overlap_moe_expert_parallel_comm", overlap},
        {"delay_wgrad_compute", delay_wgrad},
        {"routing", {{"kind", routing}}}}}};
  if (!gpus) j["virtual_ranks"] = ranks;
  model::Config c = model::config_from_json(j, "test config");
  c.derive_and_check();
  return c;
}

}  // namespace epo::test
