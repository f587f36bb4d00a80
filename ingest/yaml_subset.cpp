#include "ingest/yaml_subset.hpp"

#include <map>
#include <set>
#include <sstream>

#include "ingest/yaml_quoted.hpp"
#include "model/error.hpp"

namespace epo::ingest {

bool YamlNode::is_null() const {
  return kind == Kind::scalar && !quoted &&
         (text.empty() || text == "null" || text == "Null" || text == "NULL" || text == "~" ||
          text == "None");
}

namespace {

constexpr size_t npos = std::string::npos;
using NodePtr = std::shared_ptr<YamlNode>;

struct Line {
  int number = 0;
  int indent = 0;
  std::string text;  ///< after the indentation; comment and trailing blanks removed
  std::string raw;   ///< the physical line (block scalars keep their text as written)
};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

bool token_start(const std::string& s, size_t i) {
  return i == 0 || std::string(" \t[{,:-").find(s[i - 1]) != npos;
}

/// Where a comment starts ('#' first or after a blank, outside quotes), or npos. A quote opens
/// a string only where a token starts, so that "it's" stays plain text.
size_t comment_start(const std::string& s) {
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (quote) {
      if (quote == '"' && ch == '\\')
        ++i;
      else if (ch == quote)
        quote = 0;  // '' in single quotes closes and reopens: same state
    } else if (ch == '#' && (i == 0 || s[i - 1] == ' ' || s[i - 1] == '\t')) {
      return i;
    } else if ((ch == '"' || ch == '\'') && token_start(s, i)) {
      quote = ch;
    }
  }
  return npos;
}

/// Open brackets minus closed ones outside quotes: a flow collection continues while positive.
int flow_balance(const std::string& s) {
  int depth = 0;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (quote) {
      if (quote == '"' && ch == '\\')
        ++i;
      else if (ch == quote)
        quote = 0;
    } else if ((ch == '"' || ch == '\'') && token_start(s, i)) {
      quote = ch;
    } else if (ch == '[' || ch == '{') {
      ++depth;
    } else if (ch == ']' || ch == '}') {
      --depth;
    }
  }
  return depth;
}

bool is_item(const std::string& t) {
  return t == "-" || t.rfind("- ", 0) == 0;
}

class Parser {
 public:
  Parser(std::vector<Line> lines, std::string source)
      : lines_(std::move(lines)), source_(std::move(source)) {}

  NodePtr document(int first_line) {
    if (lines_.empty()) return scalar("", false, first_line);
    NodePtr root = node(lines_[0].indent, 0);
    if (i_ < lines_.size())
      fail(lines_[i_].number, "bad indentation: this line is left of the block it follows");
    return root;
  }

 private:
  std::vector<Line> lines_;
  size_t i_ = 0;
  std::string source_;
  std::map<std::string, NodePtr> anchors_;

  [[noreturn]] void fail(int line, const std::string& what) const {
    throw EPO_INPUT_ERROR(source_, " line ", line, ": ", what);
  }
  void check_depth(int depth, int line) const {
    if (depth > kMaxYamlDepth)
      fail(line, "nested deeper than " + std::to_string(kMaxYamlDepth) + " levels");
  }
  static NodePtr scalar(std::string text, bool quoted, int line) {
    auto n = std::make_shared<YamlNode>();
    n->text = std::move(text);
    n->quoted = quoted;
    n->line = line;
    return n;
  }
  bool more() const { return i_ < lines_.size(); }

  /// A block node starting on the current line (at least `min_indent` deep).
  NodePtr node(int min_indent, int depth) {
    const Line& l = lines_[i_];
    if (l.indent < min_indent) return scalar("", false, l.number);
    if (is_item(l.text)) return sequence(l.indent, depth);
    if (key_colon(l.text, l.number) != npos) return mapping(l.indent, depth);
    const std::string text = l.text;
    const int number = l.number, indent = l.indent;
    ++i_;
    return inline_value(text, indent - 1, false, number, depth);
  }

  /// The ':' that ends a mapping key (followed by a blank or the end, after a quoted key or in
  /// plain text), or npos.
  size_t key_colon(const std::string& s, int line) const {
    if (s.empty() || s[0] == '[' || s[0] == '{') return npos;
    if (s.rfind("? ", 0) == 0 || s == "?") fail(line, "complex keys ('? ') are not read");
    size_t i = 0;
    if (s[0] == '"' || s[0] == '\'') {
      size_t p = 0;
      if (!unquote(s, p, line, false)) return npos;
      i = s.find_first_not_of(' ', p);
      return i != npos && s[i] == ':' && (i + 1 == s.size() || s[i + 1] == ' ') ? i : npos;
    }
    for (; i < s.size(); ++i)
      if (s[i] == ':' && (i + 1 == s.size() || s[i + 1] == ' ')) return i;
    return npos;
  }

  /// Reads the quoted scalar at s[p] into `out`, p moving past the closing quote; false when the
  /// quote is not closed in `s`. An escape outside the set is an input error.
  bool unquote(const std::string& s, size_t& p, int line, bool must_close,
               std::string* out = nullptr) const {
    const detail::QuotedScalar q = detail::read_quoted(s, p);
    if (!q.error.empty()) fail(line, q.error);
    if (!q.closed) {
      if (must_close) fail(line, "a quoted string is not closed");
      return false;
    }
    if (out) *out = q.text;
    return true;
  }

  NodePtr mapping(int indent, int depth) {
    auto m = std::make_shared<YamlNode>();
    m->kind = YamlNode::Kind::mapping;
    m->line = lines_[i_].number;
    check_depth(depth, m->line);
    std::set<std::string> keys;
    while (more() && lines_[i_].indent == indent) {
      const Line l = lines_[i_];
      if (is_item(l.text))
        fail(l.number, "a sequence item where a key of the mapping at column " +
                           std::to_string(indent + 1) + " was expected");
      const size_t c = key_colon(l.text, l.number);
      if (c == npos) fail(l.number, "expected 'key: value', got '" + l.text + "'");
      std::string key = trim(l.text.substr(0, c));
      size_t p = 0;
      if (key[0] == '"' || key[0] == '\'') unquote(key, p, l.number, true, &key);
      if (!keys.insert(key).second) fail(l.number, "key '" + key + "' given twice");
      ++i_;
      m->entries.emplace_back(
          key, inline_value(trim(l.text.substr(c + 1)), indent, true, l.number, depth + 1));
    }
    if (more() && lines_[i_].indent > indent)
      fail(lines_[i_].number, "bad indentation: deeper than the keys at column " +
                                  std::to_string(indent + 1) + " without a key that opens a block");
    return m;
  }

  NodePtr sequence(int indent, int depth) {
    auto s = std::make_shared<YamlNode>();
    s->kind = YamlNode::Kind::sequence;
    s->line = lines_[i_].number;
    check_depth(depth, s->line);
    while (more() && lines_[i_].indent == indent && is_item(lines_[i_].text)) {
      Line& l = lines_[i_];
      const std::string rest = trim(l.text.substr(1));
      if (!rest.empty() && (is_item(rest) || key_colon(rest, l.number) != npos)) {
        // "- key: v" / "- - x": a collection opening on the dash's line, one column per blank.
        const size_t offset = l.text.find_first_not_of(' ', 1);
        l.indent += static_cast<int>(offset);
        l.text = l.text.substr(offset);
        s->items.push_back(node(l.indent, depth + 1));
        continue;
      }
      const int number = l.number;
      ++i_;
      s->items.push_back(inline_value(rest, indent, false, number, depth + 1));
    }
    if (more() && lines_[i_].indent > indent)
      fail(lines_[i_].number,
           "bad indentation: deeper than the items at column " + std::to_string(indent + 1));
    return s;
  }

  /// The value after "key:" or "-" on line `number`; what continues it lies on the following
  /// lines deeper than `parent` (or, for a mapping's key, an indentless sequence at `parent`).
  NodePtr inline_value(std::string rest, int parent, bool in_mapping, int number, int depth) {
    std::string anchor;
    while (!rest.empty() && (rest[0] == '&' || rest[0] == '!')) {  // anchor, tag (skipped)
      const size_t sp = rest.find(' ');
      if (rest[0] == '&') anchor = rest.substr(1, sp == npos ? npos : sp - 1);
      rest = sp == npos ? "" : trim(rest.substr(sp));
    }
    NodePtr v;
    if (rest.empty()) {
      if (more() && lines_[i_].indent > parent)
        v = node(lines_[i_].indent, depth);
      else if (in_mapping && more() && lines_[i_].indent == parent && is_item(lines_[i_].text))
        v = sequence(parent, depth);
      else
        v = scalar("", false, number);
    } else if (rest[0] == '*') {
      const auto it = anchors_.find(rest.substr(1));
      if (it == anchors_.end()) fail(number, "alias '" + rest + "' names no anchor before it");
      return it->second;
    } else if (rest[0] == '[' || rest[0] == '{') {
      while (flow_balance(rest) > 0 && more() && lines_[i_].indent > parent)
        rest += " " + lines_[i_++].text;
      size_t p = 0;
      v = flow(rest, p, number, depth);
      if (p < rest.size() && !trim(rest.substr(p)).empty())
        fail(number, "unexpected text after the flow collection: '" + trim(rest.substr(p)) + "'");
    } else if (rest[0] == '|' || rest[0] == '>') {
      std::string text;
      int block_indent = -1;
      while (more() && lines_[i_].indent > parent) {
        if (block_indent < 0) block_indent = lines_[i_].indent;
        text += (text.empty()     ? ""
                 : rest[0] == '|' ? "\n"
                                  : " ") +
                lines_[i_++].raw.substr(static_cast<size_t>(block_indent));
      }
      v = scalar(text, true, number);
    } else if (rest[0] == '"' || rest[0] == '\'') {
      size_t p = 0;
      std::string text;
      while (!unquote(rest, p, number, !(more() && lines_[i_].indent > parent), &text))
        rest += " " + lines_[i_++].text;  // a string folded over several lines
      if (!trim(rest.substr(p)).empty())
        fail(number, "unexpected text after the quoted string: '" + trim(rest.substr(p)) + "'");
      v = scalar(text, true, number);
    } else {
      while (more() && lines_[i_].indent > parent) {  // a plain scalar folded over lines
        const Line& c = lines_[i_];
        if (is_item(c.text) || key_colon(c.text, c.number) != npos)
          fail(c.number, "bad indentation: deeper than the line before, which holds a value");
        rest += " " + c.text;
        ++i_;
      }
      v = scalar(rest, false, number);
    }
    if (!anchor.empty()) anchors_[anchor] = v;
    return v;
  }

  /// A flow node at s[p]: `[a, b]`, `{k: v}`, a quoted or a plain scalar.
  NodePtr flow(const std::string& s, size_t& p, int number, int depth, bool key = false) {
    auto skip = [&] {
      while (p < s.size() && s[p] == ' ') ++p;
    };
    skip();
    if (p < s.size() && (s[p] == '[' || s[p] == '{') && !key) {
      check_depth(depth, number);
      const bool is_map = s[p] == '{';
      const char close = is_map ? '}' : ']';
      auto n = std::make_shared<YamlNode>();
      n->kind = is_map ? YamlNode::Kind::mapping : YamlNode::Kind::sequence;
      n->line = number;
      ++p;
      std::set<std::string> keys;
      for (skip(); p < s.size() && s[p] != close; skip()) {
        if (is_map) {
          const NodePtr k = flow(s, p, number, depth + 1, true);
          skip();
          if (p >= s.size() || s[p] != ':') fail(number, "expected ':' after a key in '{...}'");
          ++p;
          if (!keys.insert(k->text).second) fail(number, "key '" + k->text + "' given twice");
          n->entries.emplace_back(k->text, flow(s, p, number, depth + 1));
        } else {
          n->items.push_back(flow(s, p, number, depth + 1));
        }
        skip();
        if (p < s.size() && s[p] == ',')
          ++p;
        else if (p >= s.size() || s[p] != close)
          fail(number, std::string("expected ',' or '") + close + "' in a flow collection");
      }
      if (p >= s.size())
        fail(number, std::string("a flow collection is not closed with '") + close + "'");
      ++p;
      return n;
    }
    if (p < s.size() && (s[p] == '"' || s[p] == '\'')) {
      std::string text;
      unquote(s, p, number, true, &text);
      return scalar(text, true, number);
    }
    const size_t b = p;
    while (
        p < s.size() && std::string(",[]{}").find(s[p]) == npos &&
        !(key && s[p] == ':' && (p + 1 == s.size() || std::string(" ,}").find(s[p + 1]) != npos)))
      ++p;
    return scalar(trim(s.substr(b, p - b)), false, number);
  }
};

std::vector<Line> split_lines(const std::string& text, const std::string& source, int first) {
  std::vector<Line> out;
  std::istringstream in(text);
  std::string raw;
  int n = first - 1;
  bool content = false, document_start = false;
  while (std::getline(in, raw)) {
    ++n;
    if (!raw.empty() && raw.back() == '\r') raw.pop_back();
    const size_t b = raw.find_first_not_of(' ');
    if (b == npos) continue;
    std::string t = raw.substr(b);
    const size_t hash = comment_start(t);
    if (hash != npos) t = t.substr(0, hash);
    t = trim(t);
    if (t.empty()) continue;
    // A tab before the first character: YAML indents with spaces only.
    EPO_REQUIRE_INPUT(raw[b] != '\t', source, " line ", n,
                      ": a tab indents this line (YAML allows spaces only)");
    if (b == 0 && t[0] == '%' && !content) continue;  // a directive (%YAML 1.1)
    if (b == 0 && t == "---") {
      EPO_REQUIRE_INPUT(!content && !document_start, source, " line ", n,
                        ": a second document ('---'); one configuration is read per file");
      document_start = true;
      continue;
    }
    if (b == 0 && t == "...") break;  // end of the document
    content = true;
    out.push_back({n, static_cast<int>(b), t, raw});
  }
  return out;
}

}  // namespace

std::shared_ptr<const YamlNode> parse_yaml(const std::string& text, const std::string& source,
                                           int first_line) {
  EPO_REQUIRE_INPUT(text.find('\0') == npos, source, ": holds a NUL byte");
  Parser p(split_lines(text, source, first_line), source);
  return p.document(first_line);
}

}  // namespace epo::ingest
