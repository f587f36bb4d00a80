#include "ingest/bridge_config.hpp"

#include <map>
#include <sstream>

#include "ingest/arg_value.hpp"
#include "ingest/bridge_overrides.hpp"
#include "ingest/log_lines.hpp"
#include "ingest/yaml_subset.hpp"
#include "model/error.hpp"

namespace epo::ingest {

namespace {

constexpr size_t npos = std::string::npos;
/// Nodes visited while flattening: aliases let a small file name a node many times over.
constexpr size_t kMaxVisitedNodes = size_t{1} << 22;

const YamlNode* entry(const YamlNode& m, const char* key) {
  for (const auto& [k, v] : m.entries)
    if (k == key) return v.get();
  return nullptr;
}

/// The scalar an instantiation mapping stands for: a torch dtype or a function
/// `{_call_: false, _target_: torch.bfloat16}` its target, an enum `{_name_: auto, ...}` its name.
bool collapsed(const YamlNode& m, std::string& value) {
  const YamlNode* target = entry(m, "_target_");
  if (!target || target->kind != YamlNode::Kind::scalar) return false;
  const YamlNode* name = entry(m, "_name_");
  if (name && name->kind == YamlNode::Kind::scalar) {
    value = name->text;
    return true;
  }
  const YamlNode* call = entry(m, "_call_");
  if (m.entries.size() == 2 && call && (call->text == "false" || call->text == "False")) {
    value = target->text;
    return true;
  }
  return false;
}

/// A node as flow text, the form the argument table reads lists in: "[a, b]", "{k: v}".
std::string flow_text(const YamlNode& n) {
  if (n.kind == YamlNode::Kind::scalar) {
    if (n.is_null()) return "None";
    if (n.quoted && (n.text.empty() || n.text.find_first_of(" ,[]{}:'") != npos)) {
      std::string q = "'";
      for (char ch : n.text) q += ch == '\'' ? std::string("''") : std::string(1, ch);
      return q + "'";
    }
    return n.text;
  }
  std::string s;
  if (n.kind == YamlNode::Kind::sequence)
    for (const auto& i : n.items) s += (s.empty() ? "" : ", ") + flow_text(*i);
  else
    for (const auto& [k, v] : n.entries) s += (s.empty() ? "" : ", ") + k + ": " + flow_text(*v);
  return n.kind == YamlNode::Kind::sequence ? "[" + s + "]" : "{" + s + "}";
}

/// PipelineParallelLayerLayout's list of stages (`[[embedding, decoder], [decoder, loss]]`, as
/// the DeepSeek-V3 recipes set it) in Megatron-LM's string form "Et|tL".
bool layout_text(const YamlNode& n, std::string& out) {
  static const std::map<std::string, char> kLetter = {
      {"embedding", 'E'}, {"decoder", 't'}, {"mtp", 'm'}, {"loss", 'L'}};
  out.clear();
  for (const auto& stage : n.items) {
    if (stage->kind != YamlNode::Kind::sequence) return false;
    if (!out.empty()) out += '|';
    for (const auto& layer : stage->items) {
      const auto it = kLetter.find(layer->text);
      if (layer->kind != YamlNode::Kind::scalar || it == kLetter.end()) return false;
      out += it->second;
    }
  }
  return true;
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

struct Flattener {
  std::string source;
  ReadReport& report;
  std::vector<BridgeSetting> out;
  size_t visited = 0;

  void add(const std::string& key, const std::string& value, int line) {
    out.push_back({key, value, source + " line " + std::to_string(line)});
  }

  void walk(const YamlNode& n, const std::string& key) {
    EPO_REQUIRE_INPUT(++visited <= kMaxVisitedNodes, source, ": more than ", kMaxVisitedNodes,
                      " nodes once aliases are expanded (allowed: ", kMaxVisitedNodes, ")");
    if (n.kind == YamlNode::Kind::mapping) {
      std::string v;
      if (!key.empty() && collapsed(n, v)) return add(key, v, n.line);
      if (n.entries.empty() && !key.empty()) report.ignored.push_back(key);  // `{}`
      for (const auto& [k, c] : n.entries) walk(*c, key.empty() ? k : key + "." + k);
      return;
    }
    EPO_REQUIRE_INPUT(!key.empty(), source, " line ", n.line,
                      ": not a Bridge configuration (a mapping of sections such as model:, "
                      "train:, ddp: was expected)");
    std::string layout;
    if (n.kind == YamlNode::Kind::sequence && ends_with(key, ".pipeline_model_parallel_layout") &&
        !n.items.empty() && layout_text(n, layout))
      return add(key, layout, n.line);
    if (n.kind == YamlNode::Kind::sequence) return add(key, flow_text(n), n.line);
    add(key, n.is_null() ? "None" : n.text, n.line);
  }
};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  return b == npos ? "" : s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

}  // namespace

model::Config config_from_bridge_config(const model::Config& base, const std::string& text,
                                        const std::string& source, ReadReport& report,
                                        int first_line) {
  const auto root = parse_yaml(text, source, first_line);
  Flattener f{source, report, {}, 0};
  if (!root->is_null()) f.walk(*root, "");
  EPO_REQUIRE_INPUT(!f.out.empty(), source,
                    ": no Bridge configuration (sections such as model: with their fields) found");
  // Bridge's setup writes mixed_precision onto model, ddp and optimizer, then comm_overlap onto
  // model and ddp: they apply last. A None field of CommOverlapConfig leaves the other's value.
  std::vector<BridgeSetting> settings, precision, overlap;
  bool dp_named = false;
  for (auto& s : f.out) {
    const size_t dot = s.key.find('.');
    const std::string section = s.key.substr(0, dot);
    const bool none = Value(s.value, s.where).is_none();
    if (dot == npos && none) {
      report.ignored.push_back(s.key);  // a section the run leaves unset (peft: null, ft: null)
    } else if (section == "comm_overlap") {
      if (none)
        report.ignored.push_back(s.key);
      else
        overlap.push_back(std::move(s));
      if (!none && overlap.back().key == "comm_overlap.data_parallel_size") dp_named = true;
    } else {
      (section == "mixed_precision" ? precision : settings).push_back(std::move(s));
    }
  }
  settings.insert(settings.end(), precision.begin(), precision.end());
  settings.insert(settings.end(), overlap.begin(), overlap.end());
  if (!dp_named)
    report.warnings.push_back(source +
                              ": the GPU count is not in the configuration (Bridge records it as "
                              "comm_overlap.data_parallel_size when comm_overlap is set): " +
                              std::to_string(base.num_gpus) + " GPUs kept (--gpus to change)");
  return config_from_bridge_settings(base, settings, report);
}

bool looks_like_bridge_config(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == ' ' || line[0] == '\t' || line[0] == '#') continue;
    const size_t hash = line.find(" #");
    line = trim(hash == npos ? line : line.substr(0, hash));
    if (!line.empty() && line.back() == '\r') line = trim(line.substr(0, line.size() - 1));
    if (line == "model:" || line.rfind("_target_: megatron.bridge.", 0) == 0) return true;
  }
  return false;
}

BridgeConfigBlock find_bridge_config_block(const std::string& log_text) {
  if (log_text.find("Task Configuration") == npos) return {};  // most logs: no need to split
  const auto lines = log_lines(log_text);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i].text) != "------- Task Configuration -------") continue;
    const std::string& rank = lines[i].rank_prefix;
    BridgeConfigBlock b;
    b.first_line = lines[i].number + 1;
    for (size_t j = i + 1; j < lines.size(); ++j) {
      const auto& l = lines[j];
      const std::string t = trim(l.text);
      if (l.rank_prefix == rank && t.size() >= 10 && t.find_first_not_of('-') == npos) return b;
      b.text += (l.rank_prefix == rank ? l.text : std::string()) + "\n";
    }
    return {};  // cut inside the block: no configuration rather than half of one
  }
  return {};
}

}  // namespace epo::ingest
