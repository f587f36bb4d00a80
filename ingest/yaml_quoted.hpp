#pragma once
// Quoted YAML scalars: 'single' (a doubled quote is one quote) and "double" with the escapes
// PyYAML writes (\\ \" \/ \0 \n \r \t, an escaped space, \xHH, \uHHHH and \UHHHHHHHH as UTF-8).
#include <cstddef>
#include <string>

namespace epo::ingest::detail {

/// A quoted scalar as read from its opening quote.
struct QuotedScalar {
  bool closed = false;  ///< its closing quote is in the text
  std::string text;     ///< the value, escapes resolved (when closed)
  std::string error;    ///< why it cannot be read (an escape outside the set), else ""
};

/// Reads the quoted scalar whose opening quote is s[p]; p moves past the closing quote when there
/// is one. Stops at the first escape it cannot read, with `error` saying which.
QuotedScalar read_quoted(const std::string& s, size_t& p);

}  // namespace epo::ingest::detail
