// Bad input at the edge: every range stated once (flags, JSON reader and writer agree), 64-bit
// products, bounded simulator work, checked files in and out, refused results.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/fast_path.hpp"
#include "model/json_file.hpp"
#include "model/limits.hpp"
#include "model/prediction.hpp"
#include "model/result_bounds.hpp"
#include "model/simulate.hpp"
#include "test_helpers.hpp"

using namespace epo;
using namespace epo::model;

namespace {

/// The message and kind of the Error `f` throws ("" and 0 when it throws none).
std::string error_of(const std::function<void()>& f, int* exit_code = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (exit_code) *exit_code = e.exit_code();
    return e.what();
  }
  if (exit_code) *exit_code = 0;
  return "";
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// A small valid configuration file's JSON with one parallel/options key set.
nlohmann::json tiny_json() {
  return {{"schema_version", 1}, {"model", "tiny"}, {"hardware", "h100-sxm"}, {"gpus", 4},
          {"parallel", {{"ep", 4}, {"seq_length", 1024}}}};
}

/// Sets the key path "a.b" (or "a.b.c") of j.
void set_path(nlohmann::json& j, const std::string& path, const nlohmann::json& v) {
  nlohmann::json* at = &j;
  std::size_t start = 0;
  for (;;) {
    const auto dot = path.find('.', start);
    const std::string k = path.substr(start, dot == std::string::npos ? dot : dot - start);
    if (dot == std::string::npos) {
      (*at)[k] = v;
      return;
    }
    at = &(*at)[k];
    start = dot + 1;
  }
}

const IntRange kIntRanges[] = {
    limits::kGpus,        limits::kVirtualRanks,    limits::kTp,         limits::kPp,
    limits::kVpp,         limits::kCp,              limits::kEp,         limits::kEtp,
    limits::kMicroBatch,  limits::kGlobalBatch,     limits::kSeqLength,  limits::kCommSms,
    limits::kRecomputeLayers, limits::kMaxConnections, limits::kSeed};

}  // namespace

TEST_CASE("the JSON reader and the flags' check allow the same ranges", "[limits]") {
  for (const IntRange& r : kIntRanges) {
    INFO(r.key);
    // The reader: max reads, max + 1 is refused naming the key path and the range.
    nlohmann::json j = tiny_json();
    set_path(j, r.key, r.max);
    CHECK_NOTHROW(config_from_json(j, "f.json"));
    set_path(j, r.key, static_cast<long long>(r.max) + 1);
    const std::string e = error_of([&] { config_from_json(j, "f.json"); });
    CHECK(contains(e, "f.json"));
    CHECK(contains(e, std::to_string(r.max)));
    set_path(j, r.key, static_cast<long long>(r.min) - 1);
    CHECK(!error_of([&] { config_from_json(j, "f.json"); }).empty());
    // The flags' path (derive_and_check) refuses the same values, naming flag and key.
    Config c = test::tiny_config();
    if (std::string(r.key) == "parallel.dp") continue;
    auto set = [&](long long v) {
      const std::string k = r.key;
      if (k == "gpus") c.num_gpus = static_cast<int>(v);
      else if (k == "virtual_ranks") c.virtual_ranks = static_cast<int>(v);
      else if (k == "parallel.tp") c.par.tp = static_cast<int>(v);
      else if (k == "parallel.pp") c.par.pp = static_cast<int>(v);
      else if (k == "parallel.vpp") c.par.vpp = static_cast<int>(v);
      else if (k == "parallel.cp") c.par.cp = static_cast<int>(v);
      else if (k == "parallel.ep") c.par.ep = static_cast<int>(v);
      else if (k == "parallel.etp") c.par.etp = static_cast<int>(v);
      else if (k == "parallel.micro_batch_size") c.par.micro_batch_size = static_cast<int>(v);
      else if (k == "parallel.global_batch_size") c.par.global_batch_size = static_cast<int>(v);
      else if (k == "parallel.seq_length") c.par.seq_length = static_cast<int>(v);
      else if (k == "options.comm_sms") c.opt.comm_sms = static_cast<int>(v);
      else if (k == "options.recompute_num_layers") c.opt.recompute_num_layers = static_cast<int>(v);
      else if (k == "options.cuda_device_max_connections")
        c.opt.cuda_device_max_connections = static_cast<int>(v);
      else if (k == "options.routing.seed") c.opt.routing.seed = static_cast<unsigned>(v);
    };
    set(static_cast<long long>(r.max) + 1);
    const std::string fe = error_of([&] { check_config_limits(c); });
    CHECK(contains(fe, r.flag));
    CHECK(contains(fe, r.key));
    CHECK(contains(fe, "allowed: " + std::to_string(r.min) + ".." + std::to_string(r.max)));
  }
  // Names: the flags and the reader share the lists.
  Config c = test::tiny_config();
  c.opt.recompute_method = "bogus";
  CHECK(contains(error_of([&] { c.derive_and_check(); }), "uniform, block"));
  c = test::tiny_config();
  c.opt.cuda_graph_modules = {"attn", "bogus"};
  CHECK(contains(error_of([&] { c.derive_and_check(); }), "moe_router"));
  c = test::tiny_config();
  c.opt.recompute_modules = {"bogus"};
  CHECK(contains(error_of([&] { c.derive_and_check(); }), "core_attn"));
  c = test::tiny_config();
  c.opt.capacity_factor = std::nan("");
  CHECK(contains(error_of([&] { c.derive_and_check(); }), "capacity_factor"));
}

TEST_CASE("layout products are 64-bit: no overflow, an error naming the sizes", "[limits]") {
  Config c = test::tiny_config(8);
  c.par.tp = 1024;
  c.par.pp = 1024;
  c.par.cp = 1024;
  int code = 0;
  CHECK(contains(error_of([&] { c.derive_and_check(); }, &code), "does not divide gpus"));
  CHECK(code == 2);
  c = test::tiny_config(8);
  c.par.etp = 1024;
  c.par.ep = 65536;
  c.par.pp = 1024;
  CHECK(error_of([&] { c.derive_and_check(); }, &code) != "");
  CHECK(code == 2);
  // gbs 0 means mbs * dp, which must itself be in range.
  c = test::tiny_config(4);
  c.num_gpus = 1 << 20;
  c.par.ep = 4;
  c.par.micro_batch_size = 4096;
  c.par.global_batch_size = 0;
  CHECK(contains(error_of([&] { c.derive_and_check(); }), "4294967296"));
  // Micro-batch slots are bounded: 2^24 chunk-micro-batches.
  c = test::tiny_config(1);
  c.par.global_batch_size = (1 << 24) + 1;
  CHECK(contains(error_of([&] { c.derive_and_check(); }), "2^24"));
  c.par.global_batch_size = 1 << 24;
  CHECK_NOTHROW(c.derive_and_check());
  CHECK(pipeline_slots(c) == (1LL << 24));
}

TEST_CASE("accepted configurations write JSON that reads back the same", "[limits]") {
  std::mt19937 rng(19);
  auto pick = [&](std::initializer_list<int> v) {
    return *(v.begin() + std::uniform_int_distribution<std::size_t>(0, v.size() - 1)(rng));
  };
  int accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    Config c = test::tiny_config(4);
    c.num_gpus = pick({1, 2, 4, 8, 16, 1 << 20});
    c.par.tp = pick({1, 2, 4});
    c.par.pp = pick({1, 2});
    c.par.vpp = pick({1, 2});
    c.par.cp = pick({1, 2});
    c.par.ep = pick({1, 2, 4, 8});
    c.par.etp = pick({1, 2});
    c.par.micro_batch_size = pick({1, 2, 65536});
    c.par.global_batch_size = pick({0, 16, 64, 1 << 24, 1 << 30});
    c.par.seq_length = pick({1024, 4096, 1 << 24});
    c.opt.routing.seed = static_cast<unsigned>(pick({0, 1, 2147483647}));
    c.opt.comm_sms = pick({0, 8, 132});
    c.opt.recompute_num_layers = pick({0, 1000});
    c.opt.capacity_factor = pick({0, 1, 1000});
    try {
      c.derive_and_check();
    } catch (const Error& e) {
      REQUIRE(e.exit_code() == 2);
      continue;
    }
    ++accepted;
    const nlohmann::json written = to_json(c);
    const nlohmann::json reparsed = parse_json_text(written.dump(2), "written.json");
    Config back = config_from_json(reparsed, "written.json");
    INFO(written.dump());
    REQUIRE_NOTHROW(back.derive_and_check());
    CHECK(to_json(back) == written);
  }
  CHECK(accepted > 100);
}

TEST_CASE("JSON text: depth, duplicate keys, NUL bytes and huge numbers are input errors",
          "[limits][json]") {
  int code = 0;
  const std::string deep = std::string(80000, '[') + std::string(80000, ']');
  CHECK(contains(error_of([&] { parse_json_text(deep, "d.json"); }, &code), "nested deeper"));
  CHECK(code == 2);
  std::string ok_depth;
  for (int i = 0; i < kMaxJsonDepth - 1; ++i) ok_depth += "[";
  for (int i = 0; i < kMaxJsonDepth - 1; ++i) ok_depth += "]";
  CHECK_NOTHROW(parse_json_text(ok_depth, "d.json"));
  CHECK(contains(error_of([&] { parse_json_text(R"({"a":1,"b":{"a":2},"a":3})", "k.json"); }),
                 "'a' appears twice"));
  CHECK_NOTHROW(parse_json_text(R"({"a":1,"b":{"a":2}})", "k.json"));
  CHECK(contains(error_of([&] { parse_json_text(std::string("{}\0{\"x\":1}", 10), "n.json"); }),
                 "NUL byte at offset 2"));
  CHECK(contains(error_of([&] { parse_json_text(R"({"a":1e400})", "big.json"); }, &code),
                 "big.json"));
  CHECK(code == 2);
}

TEST_CASE("input files: only regular files of bounded size", "[limits][json]") {
  int code = 0;
  CHECK(contains(error_of([] { read_json_file("."); }, &code), "is a directory"));
  CHECK(code == 2);
  CHECK(contains(error_of([] { read_json_file("/dev/zero"); }), "character device"));
  const std::string fifo = "limits_test.fifo";
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(contains(error_of([&] { read_json_file(fifo); }), "is a FIFO"));
  std::remove(fifo.c_str());
  const std::string big = "limits_test_big.json";
  {
    std::ofstream(big) << "{}";
    REQUIRE(::truncate(big.c_str(), static_cast<off_t>(kMaxInputFileBytes) + 1) == 0);
  }
  CHECK(contains(error_of([&] { read_json_file(big); }), "too large"));
  std::remove(big.c_str());
  CHECK(contains(error_of([] { read_json_file("/nonexistent/x.json"); }), "cannot open"));
}

TEST_CASE("outputs: checked first, never an input, written whole", "[limits][json]") {
  const std::string in = "limits_test_in.json", out = "limits_test_out.json";
  std::ofstream(in) << "{}";
  int code = 0;
  CHECK(contains(error_of([&] { check_output_paths({in}, {in}); }, &code), "is also an input"));
  CHECK(code == 2);
  CHECK(contains(error_of([&] { check_output_paths({"./" + in}, {in}); }), "same file"));
  CHECK(contains(error_of([&] { check_output_paths({out, out}, {}); }), "two outputs"));
  CHECK(contains(error_of([&] { check_output_paths({"."}, {}); }), "is a directory"));
  CHECK(contains(error_of([&] { check_output_paths({"/nonexistent/x.json"}, {}); }),
                 "does not exist"));
  CHECK_NOTHROW(check_output_paths({out, "", "other.json"}, {in}));
  write_json_file(out, nlohmann::json{{"a", 1}});
  CHECK(read_json_file(out)["a"] == 1);
  CHECK(contains(error_of([&] { write_text_file("/nonexistent/x.json", "x"); }, &code),
                 "does not exist"));
  CHECK(code == 2);
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST_CASE("simulated times cannot overflow: op costs and step work are bounded", "[limits]") {
  CHECK(ns_from_us(1e300) == kTimeNsSaturated);
  CHECK(ns_from_us(std::nan("")) == kTimeNsSaturated);
  CHECK(ns_from_us(-1e300) == -kTimeNsSaturated);
  CHECK(ns_from_us(1.0) == 1000);
  Config c = test::tiny_config(4);
  c.par.seq_length = 1 << 24;
  c.par.global_batch_size = 1 << 20;
  c.derive_and_check();
  const StepCosts costs = compute_step_costs(c);
  int code = 0;
  CHECK(contains(error_of([&] { check_step_work(c, costs); }, &code), "2^53 ns"));
  CHECK(code == 2);
  CHECK(contains(error_of([&] { fast_step(c, costs, false); }), "2^53 ns"));
  StepCosts bad = compute_step_costs(test::tiny_config(4));
  bad.moe_layer.ops.front().duration_ns = kTimeNsSaturated;
  CHECK(contains(error_of([&] { check_step_work(test::tiny_config(4), bad); }),
                 "not a finite time"));
}

TEST_CASE("the full simulation's size is bounded; above it the caller takes the fast path",
          "[limits]") {
  Config c = test::tiny_config(1);
  c.par.global_batch_size = 1 << 20;
  c.derive_and_check();
  CHECK(estimated_schedule_ops(c) > limits::kMaxSimulatedOps);
  int code = 0;
  CHECK(contains(error_of([&] { simulate_config(c); }, &code), "--fast"));
  CHECK(code == 2);
  CHECK_NOTHROW(predict(c, PredictMode::fast));
  // The estimate is an upper bound of what the simulator builds.
  Config small = test::tiny_config(4);
  small.par.pp = 2;
  small.par.ep = 2;
  small.par.global_batch_size = 16;
  small.opt.overlap_moe_expert_parallel_comm = true;
  small.opt.delay_wgrad_compute = true;
  small.derive_and_check();
  const SimResult r = simulate_config(small);
  CHECK(static_cast<long long>(r.schedule.num_ops()) <= estimated_schedule_ops(small));
}

TEST_CASE("interleaved schedule: Megatron's micro-batch rule, refused by the schedule (exit 3)",
          "[limits]") {
  CHECK(interleaved_microbatch_problem(8, 1, 12).empty());
  CHECK(interleaved_microbatch_problem(8, 2, 16).empty());
  CHECK(interleaved_microbatch_problem(8, 2, 24).empty());
  CHECK(contains(interleaved_microbatch_problem(8, 2, 12), "multiple of pp = 8"));
  CHECK(contains(interleaved_microbatch_problem(8, 2, 4), "at least pp = 8"));
  Config c = test::tiny_config(4);
  c.par.pp = 2;
  c.par.vpp = 2;
  c.par.ep = 2;
  c.par.global_batch_size = 6;  // dp 2: 3 micro-batches, not a multiple of pp = 2
  c.derive_and_check();
  int code = 0;
  const std::string e = error_of([&] { simulate_config(c); }, &code);
  CHECK(code == 3);
  CHECK(contains(e, kInterleavedMicrobatchRule));
  CHECK(contains(e, "fix:"));
  CHECK(error_of([&] { predict(c, PredictMode::fast); }, &code) == e);
  c.par.global_batch_size = 8;
  c.derive_and_check();
  CHECK_NOTHROW(simulate_config(c));
}

TEST_CASE("results that cannot be right are refused (exit 1)", "[limits]") {
  Config c = test::tiny_config(4);
  Prediction p = predict(c, PredictMode::fast);
  CHECK_NOTHROW(check_prediction(p));
  int code = 0;
  Prediction bad = p;
  bad.mfu = 1.5;
  CHECK(contains(error_of([&] { check_prediction(bad); }, &code), "MFU"));
  CHECK(code == 1);
  bad = p;
  bad.step_time_us = -9223372036.855;
  CHECK(contains(error_of([&] { check_prediction(bad); }), "step_time_us"));
  bad = p;
  bad.exposed_comm_us = std::nan("");
  CHECK(contains(error_of([&] { check_prediction(bad); }), "exposed_comm_us"));
  bad = p;
  bad.memory.total_bytes = -1;
  CHECK(contains(error_of([&] { check_prediction(bad); }), "peak_memory_bytes"));
}
