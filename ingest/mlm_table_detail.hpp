#pragma once
// Inside the Megatron-LM argument table: the state its rows write (the configuration and what
// needs the other arguments before it becomes a field) and the rows themselves.
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
  bool enable_deepep = false, saw_bf16 = false, saw_fp16 = false;
  int deepep_sms = -1, hybridep_sms = -1, flex_sms = -1;
  int etp = 0, layers_per_virtual_stage = 0, world_size = 0, data_parallel = 0;
  bool precision_aware = false, bf16_moments = false;
};

using RowFn = void (*)(TableState&, const Value&);

/// One Megatron-LM argument: its dest name and what its value does.
struct Row {
  const char* dest;
  RowFn apply;
};

/// The rows, in the order they are applied (architecture, layout, options).
const std::vector<Row>& table_rows();

}  // namespace epo::ingest::detail
