// Megatron-Bridge's printed configuration (ConfigContainer.to_yaml / print_yaml): the fixture
// gives every mapped setting, emit_bridge's overrides written as YAML read back to the same
// configuration, the YAML forms Bridge and hand edits use, and each malformed document refused
// with its line.
#include <algorithm>

#include "catch.hpp"
#include "ingest/bridge_config.hpp"
#include "ingest/bridge_overrides.hpp"
#include "ingest/yaml_subset.hpp"
#include "ingest_test_util.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "planner/emit.hpp"

using namespace epo;
using namespace epo::ingest;

namespace {

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

/// The input error `text` raises, "" when it is read.
std::string error_of(const std::string& text) {
  try {
    parse_yaml(text, "doc.yaml");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::input);
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// emit_bridge's `section.key=value` lines as the YAML document of the same settings: one
/// mapping per section, lists in block form.
std::string overrides_as_yaml(const std::string& overrides) {
  std::vector<std::pair<std::string, std::vector<std::string>>> sections;
  std::string top;
  std::istringstream in(overrides);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    line = line.substr(line.find_first_not_of('+'));
    const size_t eq = line.find('='), dot = line.find('.');
    const std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (dot == std::string::npos || dot > eq) {
      top += key + ": " + value + "\n";
      continue;
    }
    const std::string section = key.substr(0, dot), field = key.substr(dot + 1);
    auto it = std::find_if(sections.begin(), sections.end(),
                           [&](const auto& s) { return s.first == section; });
    if (it == sections.end()) it = sections.insert(sections.end(), {section, {}});
    if (value.size() > 2 && value.front() == '[') {
      std::string item, lines = "  " + field + ":\n";
      std::istringstream items(value.substr(1, value.size() - 2));
      while (std::getline(items, item, ',')) lines += "  - " + item + "\n";
      it->second.push_back(lines);
    } else {
      it->second.push_back("  " + field + ": " + value + "\n");
    }
  }
  std::string yaml = "# written from emit_bridge's overrides\n" + top;
  for (const auto& [name, fields] : sections) {
    yaml += name + ":\n";
    for (const auto& f : fields) yaml += f;
  }
  return yaml;
}

}  // namespace

TEST_CASE("a printed Bridge configuration of Qwen3-30B-A3B: every mapped setting") {
  const model::Config preset = test::sample_config("qwen3-30b-a3b", 0);
  ReadReport r;
  const std::string text = test::read_fixture("bridge/qwen3_30b_a3b_run_config.yaml");
  CHECK(looks_like_bridge_config(text));
  model::Config c = config_from_bridge_config(test::blank_base(preset), text, "run_config.yaml", r);
  c.derive_and_check();
  test::check_same_model(preset.model, c.model);  // 48 layers, 128 experts top-8, GQA 4, ...
  CHECK(c.num_gpus == 16);  // comm_overlap.data_parallel_size 16 x TP 1 x PP 1
  CHECK(c.par.tp == 1);
  CHECK(c.par.pp == 1);
  CHECK(c.par.vpp == 1);
  CHECK(c.par.cp == 1);
  CHECK(c.par.ep == 8);
  CHECK(c.par.etp == 1);
  CHECK_FALSE(c.par.sequence_parallel);
  CHECK(c.par.micro_batch_size == 1);
  CHECK(c.par.global_batch_size == 512);
  CHECK(c.par.seq_length == 4096);
  const model::Options& o = c.opt;
  CHECK(o.dispatcher == model::Dispatcher::flex);
  CHECK(o.flex_backend == model::FlexBackend::deepep);
  CHECK(o.overlap_moe_expert_parallel_comm);
  CHECK(o.delay_wgrad_compute);
  CHECK(o.recompute_granularity == model::RecomputeGranularity::selective);
  CHECK(o.recompute_modules == std::vector<std::string>{"moe_act", "layernorm"});
  CHECK(o.cuda_graph_impl == model::CudaGraphImpl::none);
  CHECK(o.precision == model::Precision::bf16);
  CHECK(o.params_dtype == model::ParamsDtype::bf16);
  CHECK_FALSE(o.grad_reduce_in_fp32);
  CHECK(o.distributed_optimizer);
  CHECK(o.overlap_grad_reduce);
  CHECK(o.moe_permute_fusion);
  CHECK(o.moe_grouped_gemm);
  CHECK_FALSE(o.moe_shared_expert_overlap);
  CHECK(o.gradient_accumulation_fusion);
  CHECK_FALSE(o.adam_moments_bf16);
  CHECK(o.attention_dropout == 0.0);
  CHECK(o.hidden_dropout == 0.0);
  CHECK(o.capacity_factor == 0.0);
  // Unknown fields are listed, not refused; Bridge's unset sections and null comm_overlap
  // fields are ignored; Hydra's instantiation keys too.
  CHECK(has(r.unknown, "model.share_embeddings_and_output_weights"));
  CHECK(has(r.ignored, "peft"));
  CHECK(has(r.ignored, "comm_overlap.bucket_size"));
  CHECK(has(r.ignored, "model._target_"));
  CHECK(has(r.ignored, "train_iters"));
  for (const auto& w : r.warnings) CHECK_FALSE(contains(w, "GPU count"));
}

TEST_CASE("emit_bridge's overrides written as YAML read back to the same configuration") {
  for (const auto& name : test::preset_model_names()) {
    for (int variant = 0; variant < 3; ++variant) {
      const model::Config c = test::sample_config(name, variant);
      const std::string overrides = planner::emit_bridge(c, planner::ValidationContext{});
      const std::string yaml = overrides_as_yaml(overrides);
      INFO(name << " variant " << variant << "\n" << yaml);
      model::Config base = test::blank_base(c);
      base.model = c.model;
      ReadReport ro, ry;
      model::Config from_overrides = config_from_bridge_overrides(base, overrides, "o", ro);
      from_overrides.derive_and_check();
      model::Config back = config_from_bridge_config(base, yaml, "y", ry);
      back.derive_and_check();
      test::check_same_settings(c, back);
      CHECK(model::to_json(back) == model::to_json(from_overrides));
      CHECK(ry.unknown.empty());
    }
  }
}

TEST_CASE("YAML forms: flow lists and mappings, comments, null, quotes, folding, anchors") {
  const std::string text =
      "%YAML 1.1\n"
      "---\n"
      "# a hand-edited copy\n"
      "model:   # the model's fields\n"
      "  num_layers: 6\n"
      "  hidden_size: 512\n"
      "  num_attention_heads: 8\n"
      "  num_moe_experts: 8\n"
      "  moe_router_topk: 2\n"
      "  recompute_granularity: 'selective'\n"
      "  recompute_modules: [core_attn, \"moe_act\"]  # flow list\n"
      "  pipeline_model_parallel_size: 4\n"
      "  virtual_pipeline_model_parallel_size: ~\n"
      "  tensor_model_parallel_size: None\n"
      "  pipeline_model_parallel_layout:\n"
      "  - - embedding\n"
      "    - decoder\n"
      "  - &id001\n"
      "    - decoder\n"
      "    - decoder\n"
      "  - *id001\n"
      "  - - decoder\n"
      "    - loss\n"
      "train: {global_batch_size: 32, micro_batch_size: 2}\n"
      "checkpoint:\n"
      "  save: /results/a very long path that PyYAML folds\n"
      "    onto the next line\n"
      "mixed_precision: bf16_with_fp8_current_scaling_mixed\n"
      "comm_overlap: null\n"
      "...\n";
  model::Config base = test::sample_config("qwen3-30b-a3b", 0);
  ReadReport r;
  const model::Config c = config_from_bridge_config(base, text, "edited.yaml", r);
  CHECK(c.model.num_layers == 6);
  CHECK(c.model.num_experts == 8);
  CHECK(c.par.pp == 4);
  CHECK(c.par.vpp == 1);
  CHECK(c.par.tp == 1);
  CHECK(c.par.pipeline_layout == "Et|tt|tt|tL");
  CHECK(c.par.global_batch_size == 32);
  CHECK(c.par.micro_batch_size == 2);
  CHECK(c.opt.recompute_modules == std::vector<std::string>{"core_attn", "moe_act"});
  CHECK(c.opt.precision == model::Precision::fp8);
  CHECK(has(r.ignored, "comm_overlap"));
  CHECK(r.warnings.size() >= 1);  // no comm_overlap.data_parallel_size: the GPU count is kept
  CHECK(c.num_gpus == base.num_gpus);

  const auto root = parse_yaml(text, "edited.yaml");
  const auto& ckpt = *root->entries[2].second;
  CHECK(ckpt.entries[0].second->text ==
        "/results/a very long path that PyYAML folds onto the next line");
  const auto q =
      parse_yaml("a: 'it''s'\nb: \"tab\\there\"\nc: it's plain # comment\nd: []\ne: {}\n", "q");
  CHECK(q->entries[0].second->text == "it's");
  CHECK(q->entries[1].second->text == "tab\there");
  CHECK(q->entries[2].second->text == "it's plain");
  CHECK(q->entries[3].second->kind == YamlNode::Kind::sequence);
  CHECK(q->entries[4].second->kind == YamlNode::Kind::mapping);
  // PyYAML writes characters outside printable ASCII as \x, \u and \U escapes: read as UTF-8.
  const auto u =
      parse_yaml("a: \"caf\\xE9\"\nb: \"\\u2212 1\"\nc: \"\\U0001F600\"\nd: \"\\x41\"\n", "u");
  CHECK(u->entries[0].second->text == "caf\xC3\xA9");
  CHECK(u->entries[1].second->text == "\xE2\x88\x92 1");
  CHECK(u->entries[2].second->text == "\xF0\x9F\x98\x80");
  CHECK(u->entries[3].second->text == "A");
}

TEST_CASE("Bridge's setup order: mixed_precision and comm_overlap win over model and ddp") {
  const model::Config base = test::sample_config("qwen3-30b-a3b", 0);
  ReadReport r;
  const model::Config c = config_from_bridge_config(
      base,
      "comm_overlap:\n  overlap_moe_expert_parallel_comm: true\n  delay_wgrad_compute: null\n"
      "model:\n  overlap_moe_expert_parallel_comm: false\n  delay_wgrad_compute: true\n"
      "ddp:\n  grad_reduce_in_fp32: true\n"
      "mixed_precision:\n  grad_reduce_in_fp32: false\n",
      "order.yaml", r);
  CHECK(c.opt.overlap_moe_expert_parallel_comm);
  CHECK(c.opt.delay_wgrad_compute);  // comm_overlap's null leaves the model's value
  CHECK_FALSE(c.opt.grad_reduce_in_fp32);
}

TEST_CASE("malformed YAML: an input error naming the file and line") {
  CHECK(contains(error_of("model:\n  num_layers: 4\n\thidden_size: 8\n"), "doc.yaml line 3"));
  CHECK(contains(error_of("model:\n  num_layers: 4\n\thidden_size: 8\n"), "tab"));
  CHECK(contains(error_of("model:\n  num_layers: 4\n    hidden_size: 8\n"),
                 "line 3: bad indentation"));
  CHECK(contains(error_of("model:\n    num_layers: 4\n  hidden_size: 8\n"),
                 "line 3: bad indentation"));
  CHECK(contains(error_of("model:\n  a: 1\n  a: 2\n"), "line 3: key 'a' given twice"));
  CHECK(contains(error_of("a: [1, 2\nb: 3\n"), "line 1"));
  CHECK(contains(error_of("a: 'open\nb: 3\n"), "line 1: a quoted string is not closed"));
  CHECK(contains(error_of("a: *nowhere\n"), "line 1: alias"));
  CHECK(contains(error_of("a: 1\n---\nb: 2\n"), "line 2: a second document"));
  CHECK(contains(error_of("model:\n  - 1\n  x: 2\n"), "line 3"));
  CHECK(contains(error_of("a: \"\\q\"\n"), "line 1: escape"));
  CHECK(contains(error_of("a: \"\\xZ1\"\n"), "line 1: an escape has a non-hex digit"));
  CHECK(contains(error_of("a: \"\\uD800\"\n"), "line 1: an escape names no character"));
  CHECK(contains(error_of("a: \"\\U00110000\"\n"), "line 1: an escape names no character"));
  CHECK(contains(error_of("a: \"\\u12\"\n"), "line 1"));
  std::string deep;
  for (int i = 0; i < 70; ++i) deep += std::string(2 * i, ' ') + "k" + std::to_string(i) + ":\n";
  CHECK(contains(error_of(deep + std::string(140, ' ') + "v: 1\n"), "deeper than 64"));
  CHECK(contains(error_of("a: " + std::string(100, '[') + std::string(100, ']') + "\n"),
                 "deeper than 64"));
  std::string ok;
  for (int i = 0; i < 60; ++i) ok += std::string(2 * i, ' ') + "k" + std::to_string(i) + ":\n";
  CHECK(error_of(ok + std::string(120, ' ') + "v: 1\n").empty());
  ReadReport r;
  const model::Config base = test::sample_config("qwen3-30b-a3b", 0);
  CHECK_THROWS_AS(config_from_bridge_config(base, "# nothing\n", "empty.yaml", r), Error);
  CHECK_THROWS_AS(config_from_bridge_config(base, "- a\n- b\n", "list.yaml", r), Error);
  CHECK_THROWS_AS(config_from_bridge_config(base, "model:\n  num_layers: four\n", "v.yaml", r),
                  Error);
}

TEST_CASE("the configuration block Bridge prints into a log, and file kinds") {
  const std::string yaml = test::read_fixture("bridge/qwen3_30b_a3b_run_config.yaml");
  std::string log = "[default0]: setting up\n[default0]: ------- Task Configuration -------\n";
  std::istringstream in(yaml);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    log += "[default0]:" + (line.empty() ? "" : " " + line) + "\n";
    if (++n == 40) log += "[default3]: a line of another rank\n";
  }
  log += "[default0]: ----------------------------------\n[default0]: done\n";
  const BridgeConfigBlock b = find_bridge_config_block(log);
  CHECK(b.first_line == 3);
  ReadReport r;
  const model::Config base = test::sample_config("qwen3-30b-a3b", 0);
  const model::Config c = config_from_bridge_config(base, b.text, "log", r, b.first_line);
  CHECK(c.par.ep == 8);
  CHECK(c.num_gpus == 16);
  CHECK(find_bridge_config_block("iteration 1\n").text.empty());
  CHECK(find_bridge_config_block("------- Task Configuration -------\nmodel:\n").text.empty());
  CHECK_FALSE(looks_like_bridge_config("model.tensor_model_parallel_size=2\n"));
  CHECK_FALSE(looks_like_bridge_config("--num-layers 4 --hidden-size 8\n"));
  CHECK(looks_like_bridge_config("# x\nmodel:\n  num_layers: 4\n"));
}

TEST_CASE("mutated Bridge configurations: read, or refused with EPO's input error") {
  const std::string seed = test::read_fixture("bridge/qwen3_30b_a3b_run_config.yaml");
  const model::Config base = test::sample_config("qwen3-30b-a3b", 0);
  const std::string inserts[] = {" ",   "\t", ":",  "- ", "[",  "]",     "{", "'",  "\"",
                                 "&a ", "*a", "\n", "#",  "  ", "---\n", "|", "\\", ": "};
  unsigned state = 7;
  auto next = [&](size_t n) {
    state = state * 1103515245u + 12345u;
    return static_cast<size_t>((state >> 8) % n);
  };
  int read = 0, refused = 0;
  for (int i = 0; i < 600; ++i) {
    std::string text = seed;
    for (int k = 0; k < 3; ++k) {
      const size_t at = next(text.size());
      if (next(2) == 0)
        text.erase(at, 1 + next(4));
      else
        text.insert(at, inserts[next(sizeof inserts / sizeof inserts[0])]);
    }
    try {
      ReadReport r;
      config_from_bridge_config(base, text, "mutated", r);
      ++read;
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::input);
      ++refused;
    } catch (const std::exception& e) {
      FAIL_CHECK("not EPO's error: " << e.what() << "\n" << text);
    }
  }
  CHECK(read + refused == 600);
}
