// A fit with too few points or a parameter outside physical bounds is refused, says which and
// why, and the parameter keeps its base value (and its provenance says so).
#include <cmath>

#include "calibration/fitters.hpp"
#include "calibration/profile_fit.hpp"
#include "catch.hpp"
#include "model/error.hpp"
#include "synthetic.hpp"

using namespace epo::calib;
using epo::model::HardwareProfile;

namespace {

const FittedField& field(const Fit& f, const std::string& name) {
  for (const auto& ff : f.fields)
    if (ff.name == name) return ff;
  FAIL("no field " << name);
  return f.fields.front();
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("too few points: every parameter of the fit is refused and keeps its base value") {
  const HardwareProfile t = test::truth_profile();
  Samples s = test::synthetic_samples(t, 0.0, 1);
  s.gemm.resize(3);  // 2 parameters need 4 points
  HardwareProfile hw = t;
  hw.gemm_efficiency = 0.5;
  const Fit f = fit_gemm(hw, s);
  CHECK_FALSE(field(f, "gemm_efficiency").accepted());
  CHECK_FALSE(field(f, "gemm_half_dim").accepted());
  CHECK(contains(field(f, "gemm_efficiency").refusal, "too few points: 3"));
  apply_fit(hw, f);
  CHECK(hw.gemm_efficiency == 0.5);

  // A mean needs one sample (each is a median of many runs), but not none.
  s.launch_us.resize(1);
  CHECK(field(fit_launch(hw, s), "kernel_launch_us").accepted());
  s.launch_us.clear();
  CHECK_FALSE(field(fit_launch(hw, s), "kernel_launch_us").accepted());
}

TEST_CASE("a GEMM rate above the datasheet peak is refused") {
  const HardwareProfile t = test::truth_profile();
  Samples s = test::synthetic_samples(t, 0.0, 1);
  for (auto& g : s.gemm) g.time_us *= 0.55;  // 0.74 / 0.55 > 1 of peak
  HardwareProfile hw = t;
  const Fit f = fit_gemm(hw, s);
  const auto& e = field(f, "gemm_efficiency");
  CHECK_FALSE(e.accepted());
  CHECK(contains(e.refusal, "datasheet peak"));
  apply_fit(hw, f);
  CHECK(hw.gemm_efficiency == t.gemm_efficiency);
}

TEST_CASE("a negative NCCL latency is refused; the efficiency is refitted with the base latency") {
  const HardwareProfile t = test::truth_profile();
  Samples s;
  for (double mib : {64.0, 128.0, 256.0, 512.0, 1024.0}) {
    const double bpr = mib * (1 << 20);
    s.transport.push_back(
        {TransportKind::nccl, 2, bpr, 0, -8.0 + bpr / 2 / (t.nvlink_gbps * 0.7 * 1e3)});
  }
  const Fit f = fit_nccl(t, s);
  const auto& lat = field(f, "nccl_latency_us");
  CHECK_FALSE(lat.accepted());
  CHECK(contains(lat.refusal, "negative latency"));
  const auto& eff = field(f, "nccl_efficiency");
  REQUIRE(eff.accepted());
  CHECK(eff.value > 0.5);
  CHECK(eff.value <= 1.0);
}

TEST_CASE("a copy asymptote no sample comes near is refused, the per-block rate is kept") {
  const HardwareProfile t = test::truth_profile();
  Samples all = test::synthetic_samples(t, 0.0, 1);
  Samples s;
  for (const auto& c : all.copy)
    if (c.sms <= 8) s.copy.push_back(c);  // 4 and 8 blocks: far below the asymptote
  for (int blocks : {2, 6}) s.copy.push_back({1 << 30, blocks, 0});
  for (auto& c : s.copy)
    if (c.time_us == 0)
      c.time_us = t.kernel_launch_us + c.bytes / (1e3 / (1.0 / (c.sms * t.local_copy_gbps_per_sm) +
                                                         1.0 / t.local_copy_max_gbps));
  s.launch_us = all.launch_us;
  const Fit f = fit_copy(t, s);
  CHECK(field(f, "local_copy_gbps_per_sm").accepted());
  CHECK(field(f, "local_copy_gbps_per_sm").value == Approx(t.local_copy_gbps_per_sm).epsilon(0.02));
  CHECK_FALSE(field(f, "local_copy_max_gbps").accepted());
  CHECK(contains(field(f, "local_copy_max_gbps").refusal, "asymptote"));
}

TEST_CASE("copies small enough to stay in L2 are left out of the copy fit") {
  const HardwareProfile t = test::truth_profile();
  Samples s;
  for (int sms : {4, 8, 16, 32, 64, 132}) s.copy.push_back({4.0 * (1 << 20), sms, 10.0});
  s.launch_us.assign(1, t.kernel_launch_us);  // GCC 13 + ASan: false -Warray-bounds on a list
  const Fit f = fit_copy(t, s);
  CHECK(f.quality.num_points == 0);
  CHECK_FALSE(field(f, "local_copy_gbps_per_sm").accepted());
  CHECK(contains(field(f, "local_copy_gbps_per_sm").refusal, "too few points"));
}

TEST_CASE("an HBM efficiency above the datasheet peak is refused") {
  const HardwareProfile t = test::truth_profile();
  Samples s;
  const double bytes = 256.0 * (1 << 20);
  s.hbm.push_back({bytes, 2.0 * bytes / (t.hbm_gbps * 1.2 * 1e3)});
  const Fit f = fit_hbm(t, s);
  CHECK_FALSE(field(f, "hbm_efficiency").accepted());
  CHECK(contains(field(f, "hbm_efficiency").refusal, "above the datasheet peak"));
}

TEST_CASE("a contention exponent over too narrow an SM range is refused") {
  const HardwareProfile t = test::truth_profile();
  Samples s;
  for (int c : {16, 20, 24, 28}) {
    const double rate = 1.0 - 0.08 * std::pow(c, 0.5);
    s.contention.push_back({c, ContentionLink::local, 10000, 3000, 3000 + 10000 - rate * 3000});
  }
  const Fit f = fit_contention(t, s, ContentionLink::local);
  CHECK_FALSE(field(f, "contention_exp").accepted());
  // The coefficient is refitted with the base exponent (0.5 here, the truth's): exact.
  REQUIRE(field(f, "contention_coeff").accepted());
  CHECK(field(f, "contention_coeff").value == Approx(0.08).epsilon(1e-4));
}

TEST_CASE("fit_profile: values, calibrated flag and provenance per field") {
  const HardwareProfile t = test::truth_profile();
  Samples s = test::synthetic_samples(t, 0.0, 1);
  s.file = "synthetic.json";
  s.host_sync_us.clear();  // host_sync refused: no points
  HardwareProfile base = t;
  base.name = "base";
  base.gemm_efficiency = 0.5;
  base.host_sync_us = 99;
  const ProfileFit pf = fit_profile(base, s, {}, "2026-11-29");
  CHECK(pf.profile.calibrated);
  CHECK(pf.profile.name == "base-calibrated");
  CHECK(pf.profile.gemm_efficiency == Approx(t.gemm_efficiency).epsilon(1e-3));
  CHECK(pf.profile.host_sync_us == 99);
  const auto& prov = pf.profile.provenance;
  REQUIRE(prov.count("host_sync_us"));
  CHECK(contains(prov.at("host_sync_us"), "base value kept"));
  CHECK(contains(prov.at("host_sync_us"), "no host_sync sample"));
  REQUIRE(prov.count("gemm_efficiency"));
  CHECK(contains(prov.at("gemm_efficiency"), "synthetic.json"));
  CHECK(contains(prov.at("gemm_efficiency"), "rel RMS"));
  CHECK(contains(prov.at("gemm_efficiency"), "2026-11-29"));
  const std::string text = fit_report_text(pf);
  CHECK(contains(text, "REFUSED"));
  CHECK(contains(text, "host_sync_us"));
}

TEST_CASE("samples reader rejects unknown keys, benches and kinds") {
  using nlohmann::json;
  json ok = {{"schema_version", 1}, {"kind", "samples"}, {"samples", json::array()}};
  CHECK_NOTHROW(samples_from_json(ok, "x.json"));
  json bad = ok;
  bad["samples"].push_back({{"bench", "launch"}, {"time_us", 2.0}, {"extra", 1}});
  CHECK_THROWS_AS(samples_from_json(bad, "x.json"), epo::Error);
  bad = ok;
  bad["samples"].push_back({{"bench", "warp"}, {"time_us", 2.0}});
  CHECK_THROWS_AS(samples_from_json(bad, "x.json"), epo::Error);
  bad = ok;
  bad["kind"] = "measurement";
  CHECK_THROWS_AS(samples_from_json(bad, "x.json"), epo::Error);
  // Round trip through to_json.
  const Samples s = test::synthetic_samples(test::truth_profile(), 0.0, 1);
  const Samples back = samples_from_json(to_json(s), "round trip");
  CHECK(back.gemm.size() == s.gemm.size());
  CHECK(back.transport.size() == s.transport.size());
  CHECK(back.gemm.back().n == Approx(s.gemm.back().n));
  REQUIRE(back.hbm.size() == s.hbm.size());
  CHECK(back.hbm.back().bytes == Approx(s.hbm.back().bytes));
  CHECK(back.hbm.back().time_us == Approx(s.hbm.back().time_us));
  // An hbm sample needs its bytes.
  bad = ok;
  bad["samples"].push_back({{"bench", "hbm"}, {"time_us", 2.0}});
  CHECK_THROWS_AS(samples_from_json(bad, "x.json"), epo::Error);
}

TEST_CASE("grouped samples of fc2 and of the gradients read with their forward triple") {
  using nlohmann::json;
  json doc = {{"schema_version", 1}, {"kind", "samples"}, {"samples", json::array()}};
  auto sample = [](const char* product, const char* pass) {
    return json{{"bench", "grouped_gemm"}, {"tokens_per_expert", 256}, {"num_experts", 32},
                {"hidden", 7168}, {"ffn", 2048}, {"product", product}, {"pass", pass},
                {"launch", "grouped"}, {"time_us", 100.0}};
  };
  doc["samples"].push_back(sample("fc1", "wgrad"));
  doc["samples"].push_back(sample("fc2", "dgrad"));
  doc["samples"].push_back(sample("fc1", "wgrad"));
  doc["samples"][2]["accumulate"] = false;  // a fresh product, timed for comparison only
  const Samples s = samples_from_json(doc, "x.json");
  REQUIRE(s.gemm.size() == 3u);
  CHECK(s.gemm[0].accumulate);
  CHECK_FALSE(s.gemm[2].accumulate);
  // fc1: hidden -> 2 ffn; fc2: ffn -> hidden, whatever the pass.
  CHECK(s.gemm[0].k == Approx(7168));
  CHECK(s.gemm[0].n == Approx(2 * 2048));
  CHECK(s.gemm[1].k == Approx(2048));
  CHECK(s.gemm[1].n == Approx(7168));
  CHECK(s.gemm[1].count == Approx(32));
  const Samples back = samples_from_json(to_json(s), "round trip");
  REQUIRE(back.gemm.size() == 3u);
  for (int i = 0; i < 3; ++i) {
    CHECK(back.gemm[i].n == Approx(s.gemm[i].n));
    CHECK(back.gemm[i].k == Approx(s.gemm[i].k));
    CHECK(back.gemm[i].fc2 == s.gemm[i].fc2);
    CHECK(back.gemm[i].pass == s.gemm[i].pass);
    CHECK(back.gemm[i].accumulate == s.gemm[i].accumulate);
  }
  // Only a weight gradient sums into anything.
  json bad = doc;
  bad["samples"][1]["accumulate"] = false;
  CHECK_THROWS_AS(samples_from_json(bad, "x.json"), epo::Error);
  bad = doc;
  bad["samples"][0]["pass"] = "backward";
  CHECK_THROWS_AS(samples_from_json(bad, "x.json"), epo::Error);
  bad = doc;
  bad["samples"][0]["product"] = "fc3";
  CHECK_THROWS_AS(samples_from_json(bad, "x.json"), epo::Error);
}

TEST_CASE("a configuration's own expert shapes become the fitted profile's measured times") {
  using nlohmann::json;
  const HardwareProfile t = test::truth_profile();
  Samples s = test::synthetic_samples(t, 0.0, 1);
  s.file = "synthetic.json";
  json doc = {{"schema_version", 1}, {"kind", "samples"}, {"samples", json::array()}};
  auto sample = [](const char* pass, const char* launch, double us) {
    return json{{"bench", "grouped_gemm"}, {"tokens_per_expert", 683}, {"num_experts", 48},
                {"hidden", 7168}, {"ffn", 2048}, {"product", "fc1"}, {"pass", pass},
                {"launch", launch}, {"time_us", us}};
  };
  doc["samples"].push_back(sample("fwd", "per_expert", 2900.0));
  doc["samples"].push_back(sample("fwd", "per_expert", 2800.0));  // a repeat: the faster kept
  doc["samples"].push_back(sample("wgrad", "strided", 3400.0));
  doc["samples"].push_back(sample("wgrad", "strided", 3000.0));
  doc["samples"].back()["accumulate"] = false;  // a fresh product: not what the executor runs
  const Samples shaped = samples_from_json(doc, "for.json");
  // The product survives a round trip, fc1 included (it marks a configuration's shape).
  const Samples back = samples_from_json(to_json(shaped), "round trip");
  REQUIRE(back.gemm.size() == shaped.gemm.size());
  CHECK(back.gemm[0].for_shape);
  for (const auto& g : shaped.gemm) s.gemm.push_back(g);
  const auto table = measured_expert_gemms(s);  // the generic sweep's grouped rows are not kept
  REQUIRE(table.size() == 2u);
  CHECK(table[0].experts == 48);
  CHECK(table[0].rows == Approx(683));
  CHECK(table[0].n == Approx(2 * 2048));
  CHECK(table[0].k == Approx(7168));
  CHECK(table[0].pass == "fwd");
  CHECK(table[0].time_us == Approx(2800.0));
  CHECK(table[1].launch == "strided");
  CHECK(table[1].time_us == Approx(3400.0));
  const ProfileFit pf = fit_profile(t, s, {}, "2026-12-05");
  CHECK(pf.profile.expert_gemm_times.size() == 2u);
  REQUIRE(pf.profile.provenance.count("expert_gemm_times"));
  CHECK(contains(pf.profile.provenance.at("expert_gemm_times"), "synthetic.json"));
}
