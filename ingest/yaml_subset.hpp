#pragma once
// The part of YAML that configuration dumps use (PyYAML's safe_dump in block style, as
// Megatron-Bridge writes its ConfigContainer, and hand-edited copies of it): mappings and
// sequences by indentation (including PyYAML's sequences at their key's indentation), flow
// sequences and mappings (`[a, b]`, `{k: v}`), plain, single- and double-quoted scalars (plain
// ones folded over several lines), `|` / `>` block scalars, anchors and aliases, comments, `---`.
// Not read: tags beyond skipping them, complex keys (`? `), several documents. Tabs may not
// indent. Every refusal is an input error naming the source and line.
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace epo::ingest {

/// Deepest nesting of mappings and sequences read (the JSON readers' bound).
constexpr int kMaxYamlDepth = 64;

struct YamlNode {
  enum class Kind { scalar, sequence, mapping };
  Kind kind = Kind::scalar;
  std::string text;     ///< a scalar's value, quotes and escapes resolved
  bool quoted = false;  ///< written in quotes or as a block scalar: a string, never null or bool
  int line = 0;         ///< 1-based line in the source where the node starts
  std::vector<std::pair<std::string, std::shared_ptr<const YamlNode>>> entries;  ///< mapping
  std::vector<std::shared_ptr<const YamlNode>> items;                            ///< sequence

  /// A plain null / ~ / None / empty scalar (YAML 1.1's null, and Python's spelling of it).
  bool is_null() const;
};

/// Parses one document. `first_line` is the number of the text's first line in the source (a
/// block cut out of a log keeps the log's numbering). Throws an input error naming `source` and
/// the line for anything outside the subset or malformed.
std::shared_ptr<const YamlNode> parse_yaml(const std::string& text, const std::string& source,
                                           int first_line = 1);

}  // namespace epo::ingest
