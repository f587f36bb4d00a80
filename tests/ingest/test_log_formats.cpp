// Log formats beside Megatron-LM's own iteration line: forks that insert fields or widen them
// behind a launcher prefix (ms-swift, FlagScale with torchrun --tee), Bridge v0.2+'s memory line
// in GB, and Lightning's progress bar (NeMo 2 without its ProgressPrinter), whose updates a
// terminal overwrites with carriage returns.
#include "catch.hpp"
#include "ingest/log_summary.hpp"
#include "ingest/training_log.hpp"

using namespace epo::ingest;

namespace {
std::string megatron_line(const std::string& prefix, long long it, const std::string& inserted,
                          double ms) {
  return prefix + "[2025-06-01 10:00:00] iteration " + std::to_string(it) +
         "/     100 | consumed samples: " + std::to_string(it * 64) +
         " | elapsed time per iteration (ms): " + std::to_string(ms) + " |" + inserted +
         " throughput per GPU (TFLOP/s/GPU): 160.0 | learning rate: 1.000000E-05 | global batch "
         "size:   64 | lm loss: 2.0E+00 | loss scale: 1.0 | grad norm: 1.0 | number of skipped "
         "iterations:   0 | number of nan iterations:   0 |\n";
}
}  // namespace

TEST_CASE("forks: fields inserted after the elapsed time, launcher prefixes, wider counters") {
  const std::string swift =  // the leading blank lost as in a Markdown paste
      megatron_line("", 5, " memory(GiB): 61.2 | elapsed time: 45s | remaining time: 14m |", 9000) +
      megatron_line("", 10, " memory(GiB): 61.2 | elapsed time: 1m | remaining time: 7m |", 4500) +
      megatron_line("", 15, " memory(GiB): 61.2 | elapsed time: 2m | remaining time: 6m |", 4510);
  const auto s = read_training_log(swift);
  REQUIRE(s.iterations.size() == 3);
  const auto st = steady_state(s);
  CHECK(st.used == std::vector<long long>{10, 15});
  CHECK(st.step_time_ms == Approx(4505.0));
  CHECK(st.global_batch_size == 64);
  const std::string flagscale = megatron_line("[default0]: ", 10, "", 12000.5) +
                                megatron_line("[default0]: ", 20, "", 11000.5);
  const auto f = read_training_log(flagscale);
  REQUIRE(f.iterations.size() == 2);
  CHECK(f.iterations[1].iteration == 20);
  CHECK(f.iterations[1].elapsed_ms == Approx(11000.5));
  CHECK(f.iterations[1].tflops_per_gpu == Approx(160.0));
}

TEST_CASE("Bridge v0.2+ memory in GB and a dispatcher's fallback warning") {
  const std::string text =
      "[Rank 0] (after 10 iterations) memory (GB) | mem-allocated-gigabytes: 60.123 | "
      "mem-reserved-gigabytes: 70.5 | mem-max-allocated-gigabytes: 65.432 | "
      "mem-max-reserved-gigabytes: 72.1 | mem-alloc-retires: 0 | mem-allocated-count: 12345\n"
      "HybridEP is only applicable for GB200, GB300 with NVL72 and for Ampere, Hopper, B200 and "
      "B300 GPUs. Current GPU: NVIDIA L40S. Falling back to alltoall.\n";
  const auto l = read_training_log(text);
  REQUIRE(l.memory.size() == 1);
  CHECK(l.memory[0].max_allocated_mb == Approx(65.432e9 / (1024.0 * 1024.0)));
  CHECK(l.memory[0].max_reserved_mb == Approx(72.1e9 / (1024.0 * 1024.0)));
  REQUIRE(l.overlap_warnings.size() == 1);
  CHECK(l.overlap_warnings[0].find("Falling back to alltoall") != std::string::npos);
}

TEST_CASE("Lightning's progress bar: carriage-return updates, global_step as the iteration") {
  auto bar = [](int pct, int n, double step, double s) {
    return "Epoch 0: : " + std::to_string(pct) + "%|##| " + std::to_string(n) +
           "/100 [01:48<16:12, reduced_train_loss=5.17, global_step=" + std::to_string(step) +
           ", consumed_samples=" + std::to_string(n * 512) +
           ".0, train_step_timing in s=" + std::to_string(s) + "]";
  };
  const std::string text = bar(10, 10, 9.0, 14.0) + "\r" + bar(20, 20, 19.0, 10.8) + "\r" +
                           bar(30, 30, 29.0, 10.7) + "\n" + bar(40, 40, 39.0, 10.9) + "\n";
  const auto l = read_training_log(text);
  REQUIRE(l.iterations.size() == 4);
  CHECK(l.iterations[1].iteration == 20);
  CHECK(l.iterations[1].elapsed_ms == Approx(10800.0));
  CHECK(l.iterations[3].consumed_samples == 40 * 512);
  const auto st = steady_state(l);
  CHECK(st.used == std::vector<long long>{20, 30, 40});
  CHECK(st.step_time_ms == Approx(10800.0));
}
