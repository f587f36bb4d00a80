// Megatron arguments that change a real run's speed or memory in ways EPO's model does not cost.
// The readers say so in a warning rather than list them as having no effect.
#include <map>
#include <string>

#include "ingest/mlm_table_detail.hpp"

namespace epo::ingest::detail {

namespace {

/// Whether an argument's value turns its feature on (a flag, a number, a list).
bool turned_on(const std::string& value) {
  static const char* const kOff[] = {"", "False", "false", "None", "none", "null", "0", "0.0",
                                     "[]", "()"};
  for (const char* off : kOff)
    if (value == off) return false;
  return true;
}

}  // namespace

std::string not_modelled_reason(const std::string& dest, const std::string& value) {
  static const char* const kFp8Attention = "FP8 attention; the model costs attention in BF16";
  static const char* const kFsdp =
      "PyTorch FSDP2; costed as the distributed optimizer, without FSDP's per-layer parameter "
      "gathers";
  static const std::map<std::string, const char*> kReasons = {
      {"fp8_dot_product_attention", kFp8Attention},
      {"fp8_multi_head_attention", kFp8Attention},
      {"tp_comm_overlap",
       "Transformer Engine's tensor-parallel communication overlap; the model costs the TP "
       "all-gathers and reduce-scatters exposed"},
      {"cpu_offloading",
       "whole-layer CPU offloading; the model keeps activations and weights on the GPU"},
      {"optimizer_cpu_offload",
       "optimizer states on the host; the model keeps them, and their step, on the GPU"},
      {"fine_grained_activation_offloading",
       "the memory the offloaded modules free is modelled, the host transfers' time is not"},
      {"use_torch_fsdp2", kFsdp},
  };
  const auto it = kReasons.find(dest);
  if (it == kReasons.end() || !turned_on(value)) return "";
  return it->second;
}

}  // namespace epo::ingest::detail
