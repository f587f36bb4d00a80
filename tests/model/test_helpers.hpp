#pragma once
// Shared helpers for the model tests.
#include <string>

#include "model/config.hpp"
#include "model/cost.hpp"

namespace epo::test {

/// A model preset on `gpus` GPUs of a hardware preset, balanced routing, layout not set.
model::Config on_hardware(const char* model_name, int gpus, const char* hardware);

/// The tiny model on `gpus` H100s with ep = gpus, balanced routing, seq 1024, mbs 1, one
/// micro-batch per rank, checked.
model::Config tiny_config(int gpus = 4);

/// Qwen3-30B-A3B on `gpus` H100s (datasheet preset) with the given TP, CP, EP and micro-batch
/// size, sequence parallel with TP, balanced routing, seq 4096, global batch 64, checked.
model::Config qwen(int gpus, int tp, int cp, int ep, int mbs);

/// The part of `op` whose full name ("name" or "name.variant") is `full_name`; nullptr if none.
const model::Component* component(const model::OpCost& op, const std::string& full_name);

}  // namespace epo::test
