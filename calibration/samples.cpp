#include "calibration/samples.hpp"

#include <algorithm>

#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/json_reader.hpp"
#include "model/limits.hpp"

namespace epo::calib {

using model::JsonReader;

const char* to_string(TransportKind k) {
  switch (k) {
    case TransportKind::local:
      return "local";
    case TransportKind::nccl:
      return "nccl";
    case TransportKind::flex:
      return "flex";
  }
  return "?";
}

namespace {

constexpr double kMaxDim = 1e7;

void read_sample(const nlohmann::json& js, const std::string& where, const std::string& path,
                 Samples& s) {
  JsonReader r(js, where, path);
  const std::string bench = r.require_string("bench");
  // Negative, zero or non-finite times are refused with the range (model/limits.hpp).
  auto time = [&](const char* k) {
    return r.require_double(k, model::limits::kSampleTimeUs.min, model::limits::kSampleTimeUs.max);
  };
  if (bench == "gemm") {
    GemmSample g;
    g.m = r.require_double("m", 1, kMaxDim);
    g.n = r.require_double("n", 1, kMaxDim);
    g.k = r.require_double("k", 1, kMaxDim);
    g.time_us = time("time_us");
    s.gemm.push_back(g);
  } else if (bench == "grouped_gemm") {
    GemmSample g;
    g.grouped = true;
    g.m = r.require_double("tokens_per_expert", 1, kMaxDim);
    g.count = r.require_int("num_experts", 1, 1 << 16);
    const double hidden = r.require_double("hidden", 1, kMaxDim);
    const double ffn = r.require_double("ffn", 1, kMaxDim);
    if (r.has("product")) {
      g.for_shape = true;
      const std::string product = r.require_string("product");
      EPO_REQUIRE_INPUT(product == "fc1" || product == "fc2", where, ": product = '", product,
                        "': expected fc1 or fc2");
      g.fc2 = product == "fc2";
    }
    if (r.has("pass")) {
      g.pass = r.require_string("pass");
      EPO_REQUIRE_INPUT(g.pass == "fwd" || g.pass == "dgrad" || g.pass == "wgrad", where,
                        ": pass = '", g.pass, "': expected fwd, dgrad or wgrad");
    }
    if (r.has("accumulate")) {
      EPO_REQUIRE_INPUT(g.pass == "wgrad", where, ": accumulate is a wgrad's setting, not ",
                        g.pass, "'s");
      g.accumulate = r.get_bool("accumulate", true);
    }
    // fc1 of SwiGLU experts: hidden -> 2 * ffn; fc2: ffn -> hidden (executor/microbench.hpp).
    g.k = g.fc2 ? ffn : hidden;
    g.n = g.fc2 ? hidden : 2.0 * ffn;
    if (r.has("launch")) {
      const std::string launch = r.require_string("launch");
      EPO_REQUIRE_INPUT(launch == "grouped" || launch == "per_expert" || launch == "strided", where,
                        ": launch = '", launch, "': expected grouped, per_expert or strided");
      g.grouped_launch = launch == "grouped";
      g.strided_launch = launch == "strided";
    }
    g.time_us = time("time_us");
    s.gemm.push_back(g);
  } else if (bench == "copy") {
    CopySample c;
    c.bytes = r.require_double("bytes", 1, 1e13);
    c.sms = r.require_int("sms", 1, 1024);
    c.time_us = time("time_us");
    s.copy.push_back(c);
  } else if (bench == "hbm") {
    HbmSample h;
    h.bytes = r.require_double("bytes", 1, 1e13);
    h.time_us = time("time_us");
    s.hbm.push_back(h);
  } else if (bench == "transport") {
    TransportSample t;
    const std::string kind = r.require_string("kind");
    if (kind == "local")
      t.kind = TransportKind::local;
    else if (kind == "nccl")
      t.kind = TransportKind::nccl;
    else if (kind == "flex")
      t.kind = TransportKind::flex;
    else
      throw EPO_INPUT_ERROR(where, ": ", r.key_path("kind"), " = '", kind,
                            "': expected local, nccl or flex");
    t.ep = r.require_int("ep", 2, 1 << 16);
    t.bytes_per_rank = r.require_double("bytes_per_rank", 1, 1e13);
    t.sms = r.require_int("sms", 0, 1024);
    t.time_us = time("time_us");
    s.transport.push_back(t);
  } else if (bench == "contention") {
    ContentionSample c;
    c.comm_sms = r.require_int("comm_sms", 1, 1024);
    const std::string link = r.require_string("link");
    if (link == "local")
      c.link = ContentionLink::local;
    else if (link == "nvlink")
      c.link = ContentionLink::nvlink;
    else
      throw EPO_INPUT_ERROR(where, ": ", r.key_path("link"), " = '", link,
                            "': expected local or nvlink");
    c.gemm_alone_us = time("gemm_alone_us");
    c.comm_alone_us = time("comm_alone_us");
    c.together_us = time("together_us");
    s.contention.push_back(c);
  } else if (bench == "launch") {
    s.launch_us.push_back(time("time_us"));
  } else if (bench == "host_sync") {
    s.host_sync_us.push_back(time("time_us"));
  } else {
    throw EPO_INPUT_ERROR(
        where, ": ", r.key_path("bench"), " = '", bench,
        "': expected gemm, grouped_gemm, copy, hbm, transport, contention, launch or "
        "host_sync");
  }
  r.finish();
}

}  // namespace

Samples samples_from_json(const nlohmann::json& j, const std::string& where) {
  JsonReader r(j, where);
  r.require_int("schema_version", 1, Samples::kSchemaVersion);
  const std::string kind = r.require_string("kind");
  if (kind != "samples")
    throw EPO_INPUT_ERROR(where, ": kind = '", kind,
                          "': expected 'samples' (from epo calibrate bench)");
  Samples s;
  s.file = where;
  if (r.has("context")) {
    s.context = r.member("context");
    if (!s.context.is_object()) throw EPO_INPUT_ERROR(where, ": context: expected an object");
  }
  s.unmeasured = r.get_string_list("unmeasured");
  const auto& arr = r.member("samples");
  if (!arr.is_array()) throw EPO_INPUT_ERROR(where, ": samples: expected an array");
  for (size_t i = 0; i < arr.size(); ++i)
    read_sample(arr[i], where, "samples[" + std::to_string(i) + "]", s);
  r.finish();
  return s;
}

nlohmann::json to_json(const Samples& s) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& g : s.gemm) {
    if (g.grouped) {
      nlohmann::json j = {{"bench", "grouped_gemm"},
                          {"tokens_per_expert", g.m},
                          {"num_experts", static_cast<int>(g.count)},
                          {"hidden", g.fc2 ? g.n : g.k},
                          {"ffn", g.fc2 ? g.k : g.n / 2.0},
                          {"launch", g.grouped_launch   ? "grouped"
                                     : g.strided_launch ? "strided"
                                                        : "per_expert"},
                          {"time_us", g.time_us}};
      if (g.fc2 || g.for_shape) j["product"] = g.fc2 ? "fc2" : "fc1";
      if (g.pass != "fwd") j["pass"] = g.pass;
      if (!g.accumulate) j["accumulate"] = false;
      arr.push_back(j);
    } else
      arr.push_back(
          {{"bench", "gemm"}, {"m", g.m}, {"n", g.n}, {"k", g.k}, {"time_us", g.time_us}});
  }
  for (const auto& c : s.copy)
    arr.push_back({{"bench", "copy"}, {"bytes", c.bytes}, {"sms", c.sms}, {"time_us", c.time_us}});
  for (const auto& h : s.hbm)
    arr.push_back({{"bench", "hbm"}, {"bytes", h.bytes}, {"time_us", h.time_us}});
  for (const auto& t : s.transport)
    arr.push_back({{"bench", "transport"},
                   {"kind", to_string(t.kind)},
                   {"ep", t.ep},
                   {"bytes_per_rank", t.bytes_per_rank},
                   {"sms", t.sms},
                   {"time_us", t.time_us}});
  for (const auto& c : s.contention)
    arr.push_back({{"bench", "contention"},
                   {"comm_sms", c.comm_sms},
                   {"link", c.link == ContentionLink::local ? "local" : "nvlink"},
                   {"gemm_alone_us", c.gemm_alone_us},
                   {"comm_alone_us", c.comm_alone_us},
                   {"together_us", c.together_us}});
  for (double t : s.launch_us) arr.push_back({{"bench", "launch"}, {"time_us", t}});
  for (double t : s.host_sync_us) arr.push_back({{"bench", "host_sync"}, {"time_us", t}});
  return {{"schema_version", Samples::kSchemaVersion},
          {"kind", "samples"},
          {"context", s.context},
          {"unmeasured", s.unmeasured},
          {"samples", arr}};
}

Samples load_samples_file(const std::string& path) {
  return samples_from_json(model::read_json_file(path), path);
}

std::vector<model::MeasuredExpertGemm> measured_expert_gemms(const Samples& s) {
  std::vector<model::MeasuredExpertGemm> out;
  for (const auto& g : s.gemm) {
    if (!g.grouped || !g.for_shape || !g.accumulate) continue;
    model::MeasuredExpertGemm e;
    e.experts = static_cast<int>(g.count);
    e.rows = g.m;
    e.n = g.n;
    e.k = g.k;
    e.pass = g.pass;
    e.launch = g.grouped_launch ? "grouped" : g.strided_launch ? "strided" : "per_expert";
    e.time_us = g.time_us;
    auto same = [&](const model::MeasuredExpertGemm& x) {
      return x.experts == e.experts && x.rows == e.rows && x.n == e.n && x.k == e.k &&
             x.pass == e.pass && x.launch == e.launch;
    };
    auto it = std::find_if(out.begin(), out.end(), same);
    if (it == out.end()) out.push_back(e);
    else it->time_us = std::min(it->time_us, e.time_us);
  }
  return out;
}

}  // namespace epo::calib
