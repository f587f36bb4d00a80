#include "ingest/yaml_quoted.hpp"

#include <cctype>

namespace epo::ingest::detail {

namespace {

/// Code point c as UTF-8.
std::string utf8(unsigned long c) {
  std::string u;
  if (c < 0x80) {
    u += static_cast<char>(c);
  } else if (c < 0x800) {
    u += static_cast<char>(0xC0 | (c >> 6));
    u += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    u += static_cast<char>(0xE0 | (c >> 12));
    u += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    u += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    u += static_cast<char>(0xF0 | (c >> 18));
    u += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    u += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    u += static_cast<char>(0x80 | (c & 0x3F));
  }
  return u;
}

/// The character of a \x, \u or \U escape whose `digits` hex digits follow s[i], as UTF-8; i
/// moves to the last digit. "" with `error` set when cut short, not hex, a surrogate half or past
/// U+10FFFF.
std::string code_point(const std::string& s, size_t& i, int digits, std::string& error) {
  if (i + digits >= s.size()) {
    error = "an escape is cut short";
    return "";
  }
  unsigned long c = 0;
  for (int d = 0; d < digits; ++d) {
    const unsigned char h = static_cast<unsigned char>(s[++i]);
    if (!std::isxdigit(h)) {
      error = "an escape has a non-hex digit";
      return "";
    }
    const int value = std::isdigit(h) ? h - '0' : std::tolower(h) - 'a' + 10;
    c = c * 16 + static_cast<unsigned long>(value);
  }
  if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) {
    error = "an escape names no character";
    return "";
  }
  return utf8(c);
}

}  // namespace

QuotedScalar read_quoted(const std::string& s, size_t& p) {
  QuotedScalar r;
  const char q = s[p];
  for (size_t i = p + 1; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch == q && q == '\'' && i + 1 < s.size() && s[i + 1] == '\'') {
      r.text += '\'';
      ++i;
    } else if (ch == q) {
      p = i + 1;
      r.closed = true;
      return r;
    } else if (ch == '\\' && q == '"' && i + 1 < s.size()) {
      const char e = s[++i];
      const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
      if (digits > 0) {
        r.text += code_point(s, i, digits, r.error);
        if (!r.error.empty()) return r;
        continue;
      }
      const std::string from = "\\\"/0nrt ", to = std::string("\\\"/") + '\0' + "\n\r\t ";
      const size_t k = from.find(e);
      if (k == std::string::npos) {
        r.error = std::string("escape '\\") + e + "' is not read";
        return r;
      }
      r.text += to[k];
    } else {
      r.text += ch;
    }
  }
  return r;
}

}  // namespace epo::ingest::detail
