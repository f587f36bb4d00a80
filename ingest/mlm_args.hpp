#pragma once
// Megatron-LM command lines and launch scripts (`torchrun ... pretrain_gpt.py --flag value ...`),
// and the architecture written as Megatron-LM arguments (planner's emit_mlm writes the rest).
#include <string>
#include <vector>

#include "ingest/mlm_table.hpp"
#include "model/config.hpp"

namespace epo::ingest {

/// The arguments of a command line or launch script: `--flag value`, `--flag=value`, store-true
/// flags ("True") and `--no-flag` ("False"), values of several words, backslash line
/// continuations, quotes and `#` comments; words before a `*.py` script and launcher flags are
/// skipped (torchrun's --nproc-per-node x --nnodes becomes world_size), as are shell variables
/// (with a warning). Each value stays on its logical line.
std::vector<ArgValue> read_mlm_command_line(const std::string& text, const std::string& source,
                                            ReadReport& report);

/// Reads a command line onto `base` (Megatron-LM's defaults for what it does not name; the
/// architecture from the arguments when they name it). CUDA_DEVICE_MAX_CONNECTIONS=N in the text
/// sets the connections.
model::Config config_from_mlm_args(const model::Config& base, const std::string& text,
                                   const std::string& source, ReadReport& report);

/// The architecture as Megatron-LM arguments (--num-layers ... --vocab-size), one per line
/// ending in " \", so that a configuration can be read back without a preset.
std::string emit_mlm_model_args(const model::ModelSpec& m);

}  // namespace epo::ingest
