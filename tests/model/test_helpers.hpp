#pragma once
// Shared helpers for the model tests.
#include <string>

#include "model/config.hpp"

namespace epo::test {

/// The tiny model on `gpus` H100s with ep = gpus, balanced routing, seq 1024, mbs 1, one
/// micro-batch per rank, checked.
model::Config tiny_config(int gpus = 4);

}  // namespace epo::test
