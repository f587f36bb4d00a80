// Hardware profiles: the ranges model/limits.hpp states (limits::profile) are the reader's, field
// by field, and every number the writer puts in a profile has one.
#include <iterator>
#include <string>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/limits.hpp"

using namespace epo;
using namespace epo::model;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// The input error reading `j` gives ("" when it reads).
std::string read_error(const nlohmann::json& j) {
  try {
    hardware_from_json(j, "p.json");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::input);
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("profile ranges: the reader accepts each field's bounds and refuses beyond them",
          "[limits][profile]") {
  const nlohmann::json base = to_json(load_hardware_preset("h100-sxm"));
  for (const RealRange& r : limits::profile::kReal) {
    INFO(r.key);
    nlohmann::json j = base;
    j[r.key] = r.min;
    CHECK(read_error(j).empty());
    j[r.key] = r.max;
    CHECK(read_error(j).empty());
    const double span = r.max - r.min;
    for (const double bad : {r.min - 0.01 * span - 1e-3, r.max + 0.5 * span}) {
      j[r.key] = bad;
      const std::string e = read_error(j);
      CHECK(contains(e, "p.json"));
      CHECK(contains(e, r.key));
      CHECK(contains(e, "allowed"));
    }
  }
  using namespace limits::profile;
  for (const IntRange& r : {kComputeCapability, kNumSms, kNvlinkDomain, kNcclSms}) {
    INFO(r.key);
    nlohmann::json j = base;
    j[r.key] = r.max;
    CHECK(read_error(j).empty());
    j[r.key] = static_cast<long long>(r.max) + 1;
    CHECK(contains(read_error(j), r.key));
    j[r.key] = static_cast<long long>(r.min) - 1;
    CHECK(contains(read_error(j), r.key));
  }
}

TEST_CASE("profile ranges: every number a written profile holds has its range stated",
          "[limits][profile]") {
  const nlohmann::json j = to_json(load_hardware_preset("h100-sxm"));
  int numbers = 0;
  for (const auto& [key, v] : j.items()) {
    const bool number = v.is_number() || (v.is_object() && v.contains("value"));
    if (!number || key == "schema_version") continue;
    ++numbers;
    using namespace limits::profile;
    const bool int_field = key == kComputeCapability.key || key == kNumSms.key ||
                           key == kNvlinkDomain.key || key == kNcclSms.key;
    INFO(key);
    CHECK((int_field || profile_range(key) != nullptr));
  }
  CHECK(numbers == static_cast<int>(std::size(limits::profile::kReal)) + 4);
  CHECK(profile_range("no_such_field") == nullptr);
}
