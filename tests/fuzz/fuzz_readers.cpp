// Seeded mutation fuzzing of the readers EPO's users feed it: configurations, hardware profiles,
// microbenchmark samples, measurements and training logs (records, steady state, arguments
// block). Each input is a committed file or a written
// configuration with one to three mutations (bytes flipped, spans deleted or repeated, numbers
// swapped for extremes, structure broken, a JSON leaf replaced by a value of another type); it
// goes through the reader and what the commands do next (derive, predict, fit, read back). The
// only failures allowed are EPO's own errors (input, rule, runtime); any other exception, a
// non-finite or negative result, an MFU above 1 that is not refused, or a fitted profile that
// does not read back fails the test. EPO_FUZZ_ITERATIONS sets the count (default: a CI-sized
// run); EPO_FUZZ_SEED the seed. A failing input is written to fuzz_failure_<reader>.json.
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "calibration/measurement.hpp"
#include "calibration/profile_fit.hpp"
#include "calibration/samples.hpp"
#include "catch.hpp"
#include "ingest/log_summary.hpp"
#include "ingest/mlm_args_block.hpp"
#include "ingest/mlm_table.hpp"
#include "ingest/training_log.hpp"
#include "model/config_io.hpp"
#include "model/error.hpp"
#include "model/json_file.hpp"
#include "model/limits.hpp"
#include "model/prediction.hpp"
#include "model/result_bounds.hpp"

using namespace epo;

namespace {

std::string data_file(const std::string& name) {
  const char* dir = std::getenv("EPO_TEST_DATA");
  std::ifstream in(std::string(dir ? dir : "tests/data") + "/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

long long env_int(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoll(v) : fallback;
}

class Mutator {
 public:
  explicit Mutator(unsigned seed) : rng_(seed) {}

  std::string mutate(const std::string& seed_text) {
    std::string s = seed_text;
    const int n = 1 + uniform(3);
    for (int i = 0; i < n; ++i) s = uniform(2) ? mutate_text(s) : mutate_tree(s);
    return s;
  }

 private:
  int uniform(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::size_t pos(const std::string& s) {
    return s.empty() ? 0 : std::uniform_int_distribution<std::size_t>(0, s.size() - 1)(rng_);
  }

  const char* extreme_number() {
    static const char* kNumbers[] = {"0",          "-1",         "1e400",     "-1e400",
                                     "2147483647", "2147483648", "4294967296", "1e308",
                                     "1e-400",     "65536",      "1048577",   "-0",
                                     "3.5",        "16777217",   "1e18",      "-2147483649",
                                     "9223372036854775807", "18446744073709551616"};
    return kNumbers[uniform(static_cast<int>(sizeof kNumbers / sizeof kNumbers[0]))];
  }

  std::string mutate_text(std::string s) {
    switch (uniform(7)) {
      case 0:  // flip a byte
        if (!s.empty()) s[pos(s)] = static_cast<char>(uniform(256));
        break;
      case 1: {  // delete a span
        const std::size_t a = pos(s);
        s.erase(a, static_cast<std::size_t>(uniform(16)));
        break;
      }
      case 2: {  // repeat a span
        const std::size_t a = pos(s);
        s.insert(a, s.substr(a, static_cast<std::size_t>(uniform(64))));
        break;
      }
      case 3: {  // a number becomes an extreme
        for (int tries = 0; tries < 8; ++tries) {
          const std::size_t a = pos(s);
          if (a < s.size() && (std::isdigit(static_cast<unsigned char>(s[a])) || s[a] == '-')) {
            std::size_t b = a;
            while (b < s.size() && std::strchr("0123456789.eE+-", s[b])) ++b;
            std::size_t start = a;
            while (start > 0 && std::strchr("0123456789.eE+-", s[start - 1])) --start;
            s.replace(start, b - start, extreme_number());
            break;
          }
        }
        break;
      }
      case 4:  // structure
        s.insert(pos(s), 1, "{}[]:,\"\\"[uniform(8)]);
        break;
      case 5:  // truncate
        s.resize(pos(s));
        break;
      default:  // a NUL or a deep nest
        if (uniform(2)) s.insert(pos(s), 1, '\0');
        else s.insert(pos(s), std::string(static_cast<std::size_t>(50 + uniform(100)), '['));
        break;
    }
    return s;
  }

  nlohmann::json random_value() {
    switch (uniform(9)) {
      case 0: return nullptr;
      case 1: return uniform(2) == 1;
      case 2: return uniform(2) ? 2147483647LL : -2147483648LL;
      case 3: return uniform(100) - 10;
      case 4: return std::pow(10.0, uniform(40) - 20) * (uniform(2) ? 1 : -1);
      case 5: return "bogus";
      case 6: return nlohmann::json::array({1, "x"});
      case 7: return nlohmann::json::object({{"value", uniform(5)}, {"source", "fuzz"}});
      default: return 4294967296LL;
    }
  }

  std::string mutate_tree(const std::string& s) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(s);
    } catch (const std::exception&) {
      return mutate_text(s);
    }
    // Walk to a random node; replace, delete or duplicate-key it.
    nlohmann::json* at = &j;
    for (int depth = 0; depth < 6; ++depth) {
      if (at->is_object() && !at->empty()) {
        auto it = at->begin();
        std::advance(it, uniform(static_cast<int>(at->size())));
        if (uniform(3) == 0) {
          switch (uniform(3)) {
            case 0: it.value() = random_value(); break;
            case 1: at->erase(it); break;
            default: (*at)["fuzz_unknown_key"] = random_value(); break;
          }
          return j.dump();
        }
        at = &it.value();
      } else if (at->is_array() && !at->empty()) {
        at = &(*at)[static_cast<std::size_t>(uniform(static_cast<int>(at->size())))];
      } else {
        *at = random_value();
        return j.dump();
      }
    }
    *at = random_value();
    return j.dump();
  }

  std::mt19937 rng_;
};

/// What a command does with a configuration after reading it.
void use_config(model::Config c) {
  c.derive_and_check();
  // Keep the fuzz loop fast: the slot and op bounds have their own tests.
  if (model::pipeline_slots(c) > 4096) return;
  const model::Prediction p = model::predict(c, model::PredictMode::fast);
  model::check_prediction(p);  // refused results end as runtime errors, as in epo predict
  REQUIRE(std::isfinite(p.step_time_us));
  REQUIRE(p.step_time_us > 0);
  REQUIRE(p.mfu <= 1.0);
}

model::Config small_config(const model::HardwareProfile& hw) {
  model::Config c;
  c.model_name = "tiny";
  c.model = model::load_model_preset("tiny");
  c.hardware_name = hw.name;
  c.hw = hw;
  c.num_gpus = 4;
  c.par.ep = 4;
  c.par.seq_length = 1024;
  c.par.global_batch_size = 16;
  return c;
}

constexpr int kReaders = 5;  ///< config, profile, samples, measurement, training log

struct Outcome {
  long long inputs = 0, accepted = 0, input_errors = 0, rejected = 0, runtime_errors = 0;
};

/// Runs `body` on one input; fails the test (and keeps the input) on anything but EPO's own
/// errors.
template <typename Body>
void run_guarded(const char* name, const std::string& text, Body&& body, Outcome& out) {
  ++out.inputs;
  try {
    body();
    ++out.accepted;
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::input) ++out.input_errors;
    else if (e.kind() == ErrorKind::rejected) ++out.rejected;
    else ++out.runtime_errors;
  } catch (const std::exception& e) {
    std::ofstream(std::string("fuzz_failure_") + name + ".json", std::ios::binary) << text;
    FAIL_CHECK(name << ": an exception that is not EPO's own error: " << e.what());
  }
}

/// Parses one input as JSON (with the project's checks) and runs it through `reader`.
template <typename Reader>
void run_one(const char* name, const std::string& text, Reader&& reader, Outcome& out) {
  run_guarded(
      name, text, [&] { reader(model::parse_json_text(text, std::string("fuzz ") + name)); }, out);
}

/// What epo check-log reads of a training log: its records, steady state and arguments block.
void use_log(const std::string& text, const model::Config& base) {
  const ingest::TrainingLog log = ingest::read_training_log(text);
  const ingest::SteadyState st = ingest::steady_state(log);
  // A figure is either not printed (NaN) or finite and not negative.
  for (const double x : {st.step_time_ms, st.tflops_per_gpu, st.peak_max_allocated_mb})
    REQUIRE((std::isnan(x) || (std::isfinite(x) && x >= 0)));
  const auto args = ingest::read_arguments_block(text, "fuzz log");
  ingest::ReadReport report;
  if (!args.empty())
    ingest::apply_megatron_args(base, args, ingest::Unset::megatron_defaults, report);
}

}  // namespace

TEST_CASE("mutation fuzz of the config, profile, samples, measurement and training-log readers",
          "[fuzz]") {
  const long long iterations = env_int("EPO_FUZZ_ITERATIONS", 2000);
  const unsigned seed = static_cast<unsigned>(env_int("EPO_FUZZ_SEED", 19));
  Mutator mut(seed);
  const model::HardwareProfile h100 = model::load_hardware_preset("h100-sxm");
  const model::Config base_cfg = [&] {
    model::Config c = small_config(h100);
    c.derive_and_check();
    return c;
  }();
  const std::string seeds[kReaders] = {
      model::to_json(base_cfg).dump(1), data_file("example_profile.json"),
      data_file("example_samples.json"), data_file("example_measurement_base.json"),
      data_file("logs/03_seo_moe64_top1_ep4_dropless.log")};
  const std::string wrapped_log =
      data_file("logs/10_bridge841_dense_profiling_wrapped_stepTime_MBmem.log");
  const std::string bar_log = data_file("logs/synthetic_lightning_progress_bar.log");
  for (const auto& s : seeds) REQUIRE(!s.empty());
  REQUIRE(!bar_log.empty());
  const std::string short_config =
      R"({"schema_version":1,"model":"tiny","hardware":"h100-sxm","gpus":4,)"
      R"("parallel":{"ep":4,"pp":2,"vpp":2,"global_batch_size":32,"seq_length":1024},)"
      R"("options":{"overlap_moe_expert_parallel_comm":true,"delay_wgrad_compute":true}})";

  Outcome outcome[kReaders];
  const auto t0 = std::chrono::steady_clock::now();
  for (long long i = 0; i < iterations; ++i) {
    const int which = static_cast<int>(i % kReaders);
    const std::string& from = which == 0 && i % 2 == 1   ? short_config
                              : which == 4 && i % 3 == 1 ? wrapped_log
                              : which == 4 && i % 3 == 2 ? bar_log
                                                         : seeds[which];
    const std::string text = mut.mutate(from);
    switch (which) {
      case 0:
        run_one("config", text,
                [](const nlohmann::json& j) { use_config(model::config_from_json(j, "fuzz")); },
                outcome[0]);
        break;
      case 1:
        run_one("profile", text,
                [](const nlohmann::json& j) {
                  const model::HardwareProfile hw = model::hardware_from_json(j, "fuzz");
                  // What EPO writes reads back, and the profile predicts sanely.
                  model::hardware_from_json(model::to_json(hw), "written profile");
                  use_config(small_config(hw));
                },
                outcome[1]);
        break;
      case 2:
        run_one("samples", text,
                [&](const nlohmann::json& j) {
                  const calib::Samples s = calib::samples_from_json(j, "fuzz");
                  // Every time read is finite and positive (model/limits.hpp).
                  std::vector<double> times = s.launch_us;
                  times.insert(times.end(), s.host_sync_us.begin(), s.host_sync_us.end());
                  for (const auto& g : s.gemm) times.push_back(g.time_us);
                  for (const auto& c : s.copy) times.push_back(c.time_us);
                  for (const auto& h : s.hbm) times.push_back(h.time_us);
                  for (const auto& t : s.transport) times.push_back(t.time_us);
                  for (const auto& c : s.contention)
                    times.insert(times.end(), {c.gemm_alone_us, c.comm_alone_us, c.together_us});
                  for (const double t : times) REQUIRE((std::isfinite(t) && t > 0));
                  const calib::ProfileFit pf = calib::fit_profile(h100, s, {}, "2026-01-01");
                  const model::HardwareProfile back =
                      model::hardware_from_json(model::to_json(pf.profile), "fitted profile");
                  use_config(small_config(back));
                },
                outcome[2]);
        break;
      case 4:
        run_guarded(
            "log", text, [&] { use_log(text, base_cfg); }, outcome[4]);
        break;
      default:
        run_one("measurement", text,
                [&](const nlohmann::json& j) {
                  const calib::MeasuredRun m = calib::measurement_from_json(j, "fuzz");
                  // Every time and size read is finite and not negative (model/limits.hpp).
                  REQUIRE((std::isfinite(m.step_time_us) && m.step_time_us >= 0));
                  REQUIRE((std::isfinite(m.exposed_comm_us) && m.exposed_comm_us >= 0));
                  REQUIRE((std::isfinite(m.peak_memory_bytes) && m.peak_memory_bytes >= 0));
                  for (const auto& op : m.op_mean_us)
                    REQUIRE((std::isfinite(op.second) && op.second >= 0));
                  const model::Config c = calib::measured_config(m, h100);
                  if (model::estimated_schedule_ops(c) > 20000) return;
                  const calib::RunPrediction p = calib::predict_measured(m, h100);
                  REQUIRE(std::isfinite(p.step_time_us));
                  REQUIRE(p.step_time_us >= 0);
                },
                outcome[3]);
        break;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const char* names[kReaders] = {"config", "profile", "samples", "measurement", "log"};
  long long total = 0;
  for (int k = 0; k < kReaders; ++k) {
    const Outcome& o = outcome[k];
    total += o.inputs;
    std::printf("# fuzz %-12s %8lld inputs: %7lld accepted, %7lld input errors, %6lld rejected, "
                "%6lld runtime errors\n",
                names[k], o.inputs, o.accepted, o.input_errors, o.rejected, o.runtime_errors);
    CHECK(o.accepted > 0);
  }
  std::printf("# fuzz %lld inputs in %.1f s (seed %u)\n", total, seconds, seed);
  CHECK(total == iterations);
}
