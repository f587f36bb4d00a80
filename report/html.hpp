#pragma once
// One self-contained HTML page: inline style, inline SVG charts, tables. No script, no fonts,
// images or styles from the network.
#include <string>
#include <vector>

namespace epo::report {

class Page {
 public:
  explicit Page(const std::string& title);
  void heading(const std::string& text);
  /// A paragraph of plain text (escaped).
  void para(const std::string& text);
  /// An SVG chart made by the chart writers (inserted as is).
  void chart(const std::string& svg);
  /// A table: header cells, then rows; cells are plain text (escaped). Numbers right-aligned
  /// when a cell starts with a digit, a sign or a dot.
  void table(const std::vector<std::string>& header,
             const std::vector<std::vector<std::string>>& rows);
  /// The whole document.
  std::string str() const;

 private:
  std::string title_, body_;
};

}  // namespace epo::report
