// Every rule has a configuration that violates it and a close one that does not. The table must
// cover every rule the planner has (a new rule without a case fails the last test).
#include <set>

#include "catch.hpp"
#include "rule_cases.hpp"

using namespace epo;
using namespace epo::planner;
using model::Config;
using model::CudaGraphImpl;
using model::Dispatcher;
using model::FlexBackend;
using model::RecomputeGranularity;
using V = MegatronVersion;

TEST_CASE("the base configuration passes every rule") {
  const Config c = planner::example_config("alltoall");
  for (auto fe : {Frontend::bridge, Frontend::mlm}) {
    ValidationContext x;
    x.frontend = fe;
    CHECK(validate(c, x).empty());
  }
}

TEST_CASE("each rule has a failing and a passing configuration") {
  for (const auto& k : test::rule_cases()) {
    INFO("rule " << k.id);
    Config fail = planner::example_config("alltoall"), pass = fail;
    ValidationContext xf, xp;
    k.fail(fail, xf);
    k.pass(pass, xp);
    const auto vf = validate(fail, xf);
    const auto vp = validate(pass, xp);
    CHECK(test::has_id(vf, k.id));
    CHECK_FALSE(test::has_id(vp, k.id));
    // The violation carries everything a user needs.
    for (const auto& v : vf) {
      if (v.id != k.id) continue;
      CHECK_FALSE(v.message.empty());
      CHECK_FALSE(v.fix.empty());
      CHECK_FALSE(v.source.empty());
      CHECK_FALSE(v.versions.empty());
      CHECK(v.severity == find_rule(k.id).severity);
    }
  }
}

TEST_CASE("every rule is covered by a case, ids are unique") {
  std::set<std::string> covered, ids;
  for (const auto& k : test::rule_cases()) covered.insert(k.id);
  for (const auto& r : all_rules()) {
    INFO("rule " << r.id);
    CHECK(covered.count(r.id) == 1);
    CHECK(ids.insert(r.id).second);
  }
  CHECK(covered.size() == all_rules().size());
}

TEST_CASE("validate reports every violation at once, errors decide") {
  Config c = planner::example_config("alltoall");
  c.opt.recompute_granularity = RecomputeGranularity::full;
  c.opt.moe_shared_expert_overlap = true;
  c.opt.cuda_device_max_connections = 1;
  ValidationContext x;
  const auto v = validate(c, x);
  CHECK(test::has_id(v, "MCORE-OVL-RECOMPUTE-FULL"));
  CHECK(test::has_id(v, "MCORE-OVL-SHARED-EXPERT-OVERLAP"));
  CHECK(test::has_id(v, "MCORE-OVL-CDMC1"));
  CHECK(has_errors(v));
  // Also errors: full recompute with no method and no layer count (their own rules).
  CHECK(test::has_id(v, "MCORE-RECOMPUTE-FULL-METHOD"));
  CHECK(test::has_id(v, "MCORE-RECOMPUTE-FULL-NUM-LAYERS"));
  CHECK(validate_errors(c, x).size() == 4);
  CHECK(validate_errors(c, x, true).size() == 1);
  Config w = planner::example_config("alltoall");
  w.opt.cuda_device_max_connections = 1;
  const auto only_warning = validate(w, x);
  REQUIRE(only_warning.size() == 1);
  CHECK_FALSE(has_errors(only_warning));
}

TEST_CASE("version and frontend parsing") {
  CHECK(parse_megatron_version("core_v0.16", "--megatron") == MegatronVersion::core_v0_16);
  CHECK(parse_megatron_version("main", "--megatron") == MegatronVersion::main);
  CHECK_THROWS_AS(parse_megatron_version("v0.16", "--megatron"), epo::Error);
  CHECK(parse_version("2.12", "--te").minor == 12);
  CHECK_THROWS_AS(parse_version("2", "--te"), epo::Error);
  CHECK_THROWS_AS(parse_version("2.x", "--te"), epo::Error);
  CHECK(parse_frontend("mlm", "--frontend") == Frontend::mlm);
  CHECK_THROWS_AS(parse_frontend("nemo", "--frontend"), epo::Error);
  CHECK(find_rule("MCORE-OVL-RECOMPUTE-MOE").versions() == "core_v0.17+");
  CHECK(find_rule("MCORE-OVL-MTP-PP").versions() == "core_v0.16..core_v0.17");
  CHECK(find_rule("MCORE-EARLY-RELEASE-VERSION").versions() == "up to core_v0.15");
  CHECK(find_rule("MLM-CDMC-TP-CP").versions() == "all (mlm)");
}
