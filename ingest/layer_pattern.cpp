#include "ingest/layer_pattern.hpp"

#include <cctype>

#include "model/error.hpp"

namespace epo::ingest {

namespace {

// A small recursive-descent reader of the list expressions Megatron evaluates:
// expr := term ('+' term)* ; term := atom ('*' int)* ; atom := '[' ints ']' | '(' expr ')'.
class PatternReader {
 public:
  PatternReader(const std::string& s, const std::string& where) : s_(s), where_(where) {}
  std::vector<int> read() {
    std::vector<int> v = expr();
    skip();
    if (i_ != s_.size()) fail();
    return v;
  }

 private:
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char ch) {
    skip();
    if (i_ < s_.size() && s_[i_] == ch) {
      ++i_;
      return true;
    }
    return false;
  }
  long integer() {
    skip();
    const size_t start = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (start == i_ || i_ - start > 6) fail();
    return std::stol(s_.substr(start, i_ - start));
  }
  std::vector<int> expr() {
    std::vector<int> v = term();
    while (eat('+')) {
      const std::vector<int> t = term();
      v.insert(v.end(), t.begin(), t.end());
    }
    return v;
  }
  std::vector<int> term() {
    std::vector<int> v = atom();
    while (eat('*')) {
      const long n = integer();
      if (v.size() * static_cast<size_t>(n) > 100000) fail();
      std::vector<int> r;
      for (long k = 0; k < n; ++k) r.insert(r.end(), v.begin(), v.end());
      v = r;
    }
    return v;
  }
  std::vector<int> atom() {
    std::vector<int> v;
    if (eat('(')) {
      v = expr();
      if (!eat(')')) fail();
      return v;
    }
    if (!eat('[')) fail();
    if (eat(']')) return v;
    do {
      const long x = integer();
      if (x != 0 && x != 1) fail();
      v.push_back(static_cast<int>(x));
    } while (eat(','));
    if (!eat(']')) fail();
    return v;
  }
  [[noreturn]] void fail() const {
    throw EPO_INPUT_ERROR(where_, ": '", s_, "' is not a layer pattern (an integer, or a list "
                          "expression of 0 and 1 such as ([0]*3+[1]*58))");
  }

  const std::string& s_;
  const std::string& where_;
  size_t i_ = 0;
};

}  // namespace

std::vector<int> moe_layer_pattern(const std::string& freq, int num_layers, const std::string& where) {
  std::string s;
  for (char ch : freq)
    if (ch != '"' && ch != '\'' && ch != '\\') s += ch;
  std::vector<int> v;
  const bool is_int = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
  if (is_int) {
    EPO_REQUIRE_INPUT(s.size() <= 6 && std::stol(s) >= 1, where, ": '", freq,
                      "' is not a layer frequency (an integer >= 1)");
    const long n = std::stol(s);
    for (int l = 0; l < num_layers; ++l) v.push_back(l % n == 0 ? 1 : 0);
    return v;
  }
  v = PatternReader(s, where).read();
  EPO_REQUIRE_INPUT(static_cast<int>(v.size()) == num_layers, where, ": the pattern '", freq,
                    "' has ", v.size(), " layers, num_layers is ", num_layers);
  return v;
}

}  // namespace epo::ingest
