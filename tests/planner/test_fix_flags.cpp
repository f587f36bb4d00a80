// Every fix a rule gives names only flags `epo validate` has (no --bf16, no Megatron-LM flags).
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>
#include <string>

#include "catch.hpp"
#include "rule_cases.hpp"

using namespace epo;
using namespace epo::planner;

namespace {
std::string validate_help() {
  const char* bin = std::getenv("EPO_BIN");
  REQUIRE(bin != nullptr);
  FILE* p = popen((std::string(bin) + " validate --help").c_str(), "r");
  REQUIRE(p != nullptr);
  std::string text;
  for (char line[512]; std::fgets(line, sizeof line, p);) text += line;
  pclose(p);
  return text;
}
}  // namespace

TEST_CASE("every fix names only flags epo validate has") {
  const std::string help = validate_help();
  REQUIRE(help.find("--overlap") != std::string::npos);
  const std::regex flag("--[a-z0-9][a-z0-9-]*");
  std::set<std::string> named;
  for (const auto& k : test::rule_cases()) {
    model::Config c = planner::example_config("alltoall");
    ValidationContext x;
    k.fail(c, x);
    for (const auto& v : validate(c, x))
      for (std::sregex_iterator it(v.fix.begin(), v.fix.end(), flag), end; it != end; ++it) {
        INFO(v.id << ": " << v.fix);
        const std::string f = it->str();
        named.insert(f);
        // The flag, followed by a space or a comma in the help's option list.
        CHECK(std::regex_search(help, std::regex(f + "[ ,\n]")));
      }
  }
  CHECK(named.size() > 20);  // the fixes do name flags
}
