// Chrome trace-event JSON and the ASCII layer-step timeline.
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "fixtures.hpp"
#include "model/trace.hpp"

using namespace epo;
using namespace epo::model;
using namespace epo::model::testing;

TEST_CASE("trace file is valid JSON with one track per stream and rank", "[trace]") {
  LayerNs n;
  n.mlp_w = 500;
  n.pd_w = 400;
  Config cfg = make_config(4, 2, 2, 4, true, true);
  const SimResult r = simulate_step(cfg, make_costs(n, 300), ideal_options());
  const std::string path = "test_trace_out.json";
  write_trace(path, r);
  std::ifstream in(path);
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(ss.str());
  std::remove(path.c_str());
  REQUIRE(j.contains("traceEvents"));
  std::set<std::pair<int, int>> named_tracks;
  std::map<std::string, int> slices;
  std::map<int, int> flow_starts, flow_ends;
  std::size_t ops = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") {
      named_tracks.insert({e["pid"].get<int>(), e["tid"].get<int>()});
    } else if (ph == "X") {
      ++ops;
      slices[e["name"].get<std::string>()] += 1;
      CHECK(e["args"].contains("microbatch"));
      CHECK(e["args"].contains("layer"));
      CHECK(e["args"].contains("chunk"));
      CHECK(e["dur"].get<double>() >= 0.0);
      CHECK(named_tracks.count({e["pid"].get<int>(), e["tid"].get<int>()}) == 1);
    } else if (ph == "s") {
      flow_starts[e["id"].get<int>()] += 1;
    } else if (ph == "f") {
      flow_ends[e["id"].get<int>()] += 1;
    }
  }
  CHECK(ops == r.schedule.num_ops());
  // Two ranks, each with a compute and a comm stream (and the gradient reduce).
  for (int rank = 0; rank < 2; ++rank) {
    CHECK(named_tracks.count({rank, static_cast<int>(Lane::compute)}) == 1);
    CHECK(named_tracks.count({rank, static_cast<int>(Lane::comm)}) == 1);
  }
  CHECK(slices["dispatch.fwd"] == 4 * 4);  // 4 micro-batches x 4 layers
  CHECK(slices["mlp_wgrad"] == 4 * 4);
  CHECK(slices.count("pp_send.fwd") == 1);
  CHECK(!flow_starts.empty());
  CHECK(flow_starts == flow_ends);  // every arrow has both ends
}

TEST_CASE("trace JSON from measured records (the executor's path)", "[trace]") {
  std::vector<TraceRecord> recs(2);
  recs[0].name = "pre_dispatch.fwd";
  recs[0].start_ns = 1000;
  recs[0].end_ns = 2500;
  recs[1].name = "dispatch.fwd";
  recs[1].lane = Lane::comm;
  recs[1].start_ns = 2500;
  recs[1].end_ns = 4001;
  const nlohmann::json j = nlohmann::json::parse(trace_json(recs, {{0, 1}}, "measured \"run\""));
  int x = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++x;
    if (e["name"] == "dispatch.fwd") {
      CHECK(e["ts"].get<double>() == Approx(2.5));
      CHECK(e["dur"].get<double>() == Approx(1.501));
      CHECK(e["tid"].get<int>() == 1);
    }
  }
  CHECK(x == 2);
  CHECK(j["otherData"]["title"] == "measured \"run\"");
}

TEST_CASE("ASCII timeline shows one layer step per stream", "[trace]") {
  const Config cfg = make_config(4, 1, 1, 4, true);
  const SimResult r = simulate_step(cfg, make_costs(LayerNs{}), ideal_options());
  const std::string a = ascii_layer_step(r.schedule, r.run, 60);
  INFO(a);
  std::istringstream in(a);
  std::string line, compute, comm;
  while (std::getline(in, line)) {
    if (line.rfind("  compute |", 0) == 0) compute = line;
    if (line.rfind("  comm    |", 0) == 0) comm = line;
  }
  REQUIRE(!compute.empty());
  REQUIRE(!comm.empty());
  CHECK(compute.size() == comm.size());
  CHECK(compute.find("PD.f") != std::string::npos);
  CHECK(compute.find("MLP.b") != std::string::npos);
  CHECK(comm.find("DI.f") != std::string::npos);
  CHECK(comm.find("CO.b") != std::string::npos);
}
