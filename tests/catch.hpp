#pragma once
// One include for Catch2 2.x and 3.x.
#if defined(EPO_CATCH3)
#include <catch2/catch_all.hpp>
using Catch::Approx;
/// A message matcher: the string appears in the exception's message.
inline auto epo_contains(const std::string& s) { return Catch::Matchers::ContainsSubstring(s); }
#else
#include <catch2/catch.hpp>
inline auto epo_contains(const std::string& s) { return Catch::Contains(s); }
#endif
