#pragma once
// One argument's value as a reader saw it, converted on request; a value that does not convert is
// an input error naming the argument and where it was read.
#include <string>
#include <vector>

namespace epo::ingest {

class Value {
 public:
  Value(std::string raw, std::string where) : raw_(std::move(raw)), where_(std::move(where)) {}
  const std::string& raw() const { return raw_; }
  const std::string& where() const { return where_; }
  /// Python's None, YAML's null, an empty value or a Hydra deletion.
  bool is_none() const;
  /// True/False, true/false, 1/0; a flag given without a value reads "True".
  bool boolean() const;
  /// An integer; `if_none` when the value is None.
  long long integer(long long if_none) const;
  /// A number; `if_none` when the value is None.
  double number(double if_none) const;
  /// The text without surrounding quotes; "" when None.
  std::string text() const;
  /// The words of a list value: "['a', 'b']", "[a,b]", "a b" -> {a, b}; {} when None.
  std::vector<std::string> words() const;

 private:
  std::string raw_;
  std::string where_;
};

}  // namespace epo::ingest
