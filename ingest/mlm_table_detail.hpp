#pragma once
// Inside the Megatron-LM argument table: the state its rows write (the configuration and what
// needs the other arguments before it becomes a field) and the rows themselves.
#include <set>
#include <string>
#include <vector>

#include "ingest/arg_value.hpp"
#include "ingest/mlm_table.hpp"

namespace epo::ingest::detail {

/// What the rows set; settings that depend on other arguments wait here for finish().
struct TableState {
  model::Config c;
  ReadReport* report = nullptr;
  bool gqa = false;
  int query_groups = 0, kv_channels = 0, ffn = 0, moe_ffn = 0;
  int vocab = 0, padded_vocab = 0, vocab_divisible = 0;
  bool vocab_file = false;
  std::string tokenizer, layer_freq, graph_scope, flex_backend;
  /// Sliding-window attention: --window-size as given and --window-attn-skip-freq (integer or
  /// list expression); finish_model turns them into the model's window.
  std::string window, window_skip;
  /// Hybrid models: the pattern as given ('|' stage breaks, '/' MTP depths) and Mamba sizes
  /// (0: Megatron's default).
  std::string hybrid_pattern;
  int mamba_heads = 0, mamba_head_dim = 0, mamba_state = 0, mamba_groups = 0;
  bool enable_deepep = false, saw_bf16 = false, saw_fp16 = false;
  /// --first-last-layers-bf16 and its two counts (Megatron-Core's defaults 1 and 1).
  bool first_last_bf16 = false;
  int bf16_at_start = 1, bf16_at_end = 1;
  int deepep_sms = -1, hybridep_sms = -1, flex_sms = -1;
  int etp = 0, layers_per_virtual_stage = 0, world_size = 0, data_parallel = 0;
  bool precision_aware = false, bf16_moments = false;
  bool manual_gc = false;
  /// --no-bias-swiglu-fusion / --no-bias-gelu-fusion (Megatron-LM: both on); finish_model keeps
  /// the one of the experts' activation.
  bool swiglu_fusion = true, gelu_fusion = true;
  int manual_gc_interval = 0;
  /// --fine-grained-activation-offloading (-1 not given) and its --offload-modules.
  int offload = -1;
  std::vector<std::string> offload_modules;
};

using RowFn = void (*)(TableState&, const Value&);

/// One Megatron-LM argument: its dest name and what its value does.
struct Row {
  const char* dest;
  RowFn apply;
};

/// The rows, in the order they are applied (architecture, layout, options).
const std::vector<Row>& table_rows();

/// Why an argument set to `value` changes a real run in a way EPO's model does not cost ("" when
/// the argument is modelled, or `value` leaves the feature off).
std::string not_modelled_reason(const std::string& dest, const std::string& value);

/// The settings of `c` that no argument in `given` named, each with the value taken and where it
/// came from ("expert_model_parallel_size not in the arguments: parallel.ep = 1 (Megatron-LM's
/// default)"); architecture settings only when the arguments define the model.
std::vector<AssumedSetting> assumed_settings(const model::Config& c,
                                             const std::set<std::string>& given, bool from_args);

}  // namespace epo::ingest::detail
