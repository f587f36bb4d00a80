// Real training-log excerpts: every key figure each prints is read exactly, the steady state
// excludes the warm-up interval and outliers, and the formats' quirks (hard wraps, two ranks on
// one line, srun prefixes, NeMo's progress printer, 2022's line without timestamps) are handled.
#include <cmath>

#include "catch.hpp"
#include "ingest/log_summary.hpp"
#include "ingest/training_log.hpp"
#include "ingest_test_util.hpp"

using namespace epo::ingest;

namespace {
TrainingLog read(const std::string& name) { return read_training_log(epo::ingest::test::read_fixture("logs/" + name)); }
const IterationRecord& at(const TrainingLog& l, long long it) {
  for (const auto& r : l.iterations)
    if (r.iteration == it) return r;
  FAIL("iteration " << it << " not read");
  return l.iterations.front();
}
}  // namespace

TEST_CASE("01: dense A100 run, warm-up interval excluded, memory and theoretical memory") {
  const auto l = read("01_seo_dense_baseline_a100x8.log");
  REQUIRE(l.iterations.size() == 10);
  CHECK(at(l, 20).elapsed_ms == Approx(826.6));
  CHECK(at(l, 20).tflops_per_gpu == Approx(23.5));
  const auto st = steady_state(l);
  CHECK(st.used.front() == 40);
  CHECK(st.used.back() == 200);
  CHECK(st.min_step_time_ms == Approx(226.0));
  CHECK(st.max_step_time_ms == Approx(255.5));
  CHECK(st.min_tflops == Approx(76.1));
  CHECK(st.max_tflops == Approx(86.0));
  REQUIRE(l.memory.size() == 1);
  CHECK(l.memory[0].allocated_mb == Approx(1550.40).margin(0.005));
  CHECK(st.peak_max_allocated_mb == Approx(20561.49).margin(0.005));
  CHECK(l.memory[0].reserved_mb == Approx(28404.0));
  CHECK(l.theoretical_weight_optimizer_mb == Approx(1524.73));
}

TEST_CASE("02 and 03: MoE runs with capacity factor and dropless") {
  const auto a = read("02_seo_moe64_top1_ep4_capacity1.log");
  CHECK(at(a, 20).elapsed_ms == Approx(1639.0));
  CHECK(at(a, 20).tflops_per_gpu == Approx(11.9));
  auto st = steady_state(a);
  CHECK(st.used.size() == 14);
  CHECK(st.used.back() == 300);
  CHECK(st.min_step_time_ms == Approx(599.8));
  CHECK(st.max_step_time_ms == Approx(637.7));
  CHECK(st.min_tflops == Approx(30.5));
  CHECK(st.max_tflops == Approx(32.4));
  CHECK(a.memory.at(0).allocated_mb == Approx(13243.48).margin(0.005));
  CHECK(st.peak_max_allocated_mb == Approx(33279.59).margin(0.005));
  CHECK(st.peak_max_reserved_mb == Approx(37878.0));
  CHECK(a.theoretical_weight_optimizer_mb == Approx(31292.23));
  const auto b = read("03_seo_moe64_top1_ep4_dropless.log");
  REQUIRE(b.iterations.size() == 13);
  st = steady_state(b);
  CHECK(st.used.front() == 40);
  CHECK(st.used.back() == 1140);
  CHECK(st.min_step_time_ms == Approx(416.2));
  CHECK(st.max_step_time_ms == Approx(524.7));
  CHECK(st.min_tflops == Approx(37.1));
  CHECK(st.max_tflops == Approx(46.7));
  CHECK(b.memory.at(0).allocated_mb == Approx(13182.67).margin(0.005));
  CHECK(st.peak_max_allocated_mb == Approx(33742.08).margin(0.005));
  CHECK(st.peak_max_reserved_mb == Approx(37658.0));
  CHECK(b.params_per_model_parallel_rank == 1204838912LL);
  CHECK(b.world_size == 8);
}

TEST_CASE("05 and 06: DeepEP run with MTP, Mixtral with log interval 1") {
  const auto a = read("05_ling_mini2_moe256_deepep_flex_zloss_mtp.log");
  REQUIRE(a.iterations.size() == 10);
  CHECK(at(a, 1).elapsed_ms == Approx(79489.9));
  auto st = steady_state(a);
  CHECK(st.used.size() == 9);
  CHECK(st.min_step_time_ms == Approx(10720.6));
  CHECK(st.max_step_time_ms == Approx(11182.0));
  CHECK(st.min_tflops == Approx(128.2));
  CHECK(st.max_tflops == Approx(133.7));
  CHECK(a.memory.at(0).allocated_mb == Approx(26222.72).margin(0.005));
  CHECK(st.peak_max_allocated_mb == Approx(63359.77).margin(0.005));
  CHECK(st.peak_max_reserved_mb == Approx(66802.0));
  const auto b = read("06_mlm756_mixtral8x7b_h100x16_run1_2024-03-30.log");
  st = steady_state(b);
  CHECK(st.used == std::vector<long long>{10, 11, 12});  // iteration 10 is not the first interval
  CHECK(st.step_time_ms == Approx(10036.9));
  CHECK(st.tflops_per_gpu == Approx(130.1));
  CHECK(at(b, 12).elapsed_ms == Approx(10198.4));
  CHECK(at(b, 10).tflops_per_gpu == Approx(137.5));
  CHECK(at(b, 12).lm_loss == Approx(0.7243721));
}

TEST_CASE("10: Bridge log hard-wrapped at 86 columns, Step Time lines") {
  const auto l = read("10_bridge841_dense_profiling_wrapped_stepTime_MBmem.log");
  REQUIRE(l.iterations.size() == 2);
  CHECK(at(l, 10).elapsed_ms == Approx(13212.7));
  CHECK(at(l, 20).elapsed_ms == Approx(14260.3));
  CHECK(at(l, 20).global_batch_size == 512);
  CHECK(at(l, 10).skipped_iterations == 0);
  CHECK(at(l, 20).tflops_per_gpu == Approx(58.2));  // from the Step Time line of iteration 20
  REQUIRE(l.bridge_steps.size() == 2);
  CHECK(l.bridge_steps[1].step_s == Approx(16.85));
  CHECK(l.bridge_steps[1].tflops_per_gpu == Approx(49.3));
  REQUIRE(l.memory.size() == 1);
  CHECK(l.memory[0].allocated_mb == Approx(11908.05).margin(0.005));
  CHECK(l.memory[0].max_allocated_mb == Approx(12712.44).margin(0.005));
  CHECK(l.memory[0].reserved_mb == Approx(12954.0));
  const auto st = steady_state(l);
  CHECK(st.used == std::vector<long long>{20});
}

TEST_CASE("11: NeMo 2 progress printer behind srun prefixes") {
  const auto l = read("11_nemo14850_nemo2_qwen3_30b_a3b_perf_script.log");
  REQUIRE(l.iterations.size() == 6);
  CHECK(at(l, 8).tflops_per_gpu == Approx(48.58));
  CHECK(at(l, 9).elapsed_ms == Approx(27880.0));
  CHECK(at(l, 29).lm_loss == Approx(9.426));
  const auto st = steady_state(l);
  CHECK(st.min_step_time_ms == Approx(26630.0));
  CHECK(st.max_step_time_ms == Approx(27880.0));
  CHECK(st.min_tflops == Approx(85.31));
  CHECK(st.max_tflops == Approx(85.8));
  CHECK(st.global_batch_size == 512);
  CHECK(st.peak_max_allocated_mb * 1024 * 1024 == Approx(53930270720.0));
  CHECK(st.peak_max_reserved_mb * 1024 * 1024 == Approx(57675874304.0));
}

TEST_CASE("14 and 16: two ranks on one line; 2022's line during loss-scale warm-up") {
  const auto a = read("14_slurmonaws_gpt70b_dense_32gpu_core016plus_theoretical_mem.log");
  CHECK(a.iterations.empty());
  CHECK(a.memory.size() == 16);  // 15 lines and one holding two ranks
  CHECK(a.theoretical_weight_optimizer_mb == Approx(35695.42));
  CHECK(a.theoretical_activation_mb == Approx(86554.12));
  CHECK(a.theoretical_total_mb == Approx(122249.54));
  int first_stage = 0;
  for (const auto& m : a.memory) {
    if (m.rank <= 3) {
      ++first_stage;
      CHECK(m.allocated_mb == Approx(38921.15));
      CHECK(m.max_allocated_mb == Approx(47104.31));
      CHECK(m.max_reserved_mb == Approx(48934.00));
    } else {
      CHECK(m.allocated_mb == Approx(36891.15));
      CHECK(m.max_allocated_mb == Approx(44566.31));
    }
  }
  CHECK(first_stage == 4);
  const auto st = steady_state(a);
  CHECK(st.memory_ranks == 16);
  const auto b = read("16_nccl743_megatron_bert_2022_old_format_dense.log");
  REQUIRE(b.iterations.size() == 1);
  CHECK(b.iterations[0].elapsed_ms == Approx(356.2));
  CHECK(b.iterations[0].loss_scale == Approx(8388608.0));
  CHECK(b.iterations[0].skipped_iterations == 10);
  CHECK(std::isnan(b.iterations[0].lm_loss));
}

TEST_CASE("synthetic: truncated line, NaN loss, restart, text that is no log") {
  const std::string text =
      " iteration       10/     100 | consumed samples:          640 | elapsed time per iteration (ms): 900.0 | global batch size:    64 | lm loss: 1.0E+01 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
      " iteration       20/     100 | consumed samples:         1280 | elapsed time per iteration (ms): 500.0 | global batch size:    64 | lm loss: nan | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   3 |\n"
      " iteration       30/     100 | consumed samples:         1920 | elapsed time per iteration (ms): 510.0 | global batch size:    64 | lm loss: 9.0E+00 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
      " iteration       20/     100 | consumed samples:         1280 | elapsed time per iteration (ms): 1500.0 | global batch size:    64 | lm loss: 9.5E+00 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
      " iteration       30/     100 | consumed samples:         1920 | elapsed time per iteration (ms): 520.0 | global batch size:    64 | lm loss: 9.0E+00 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
      " iteration       40/     100 | consumed samples:         2560 | elapsed time per iteration (ms): 5300.0 | global batch size:    64 | lm loss: 9.0E+00 | loss scale: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
      " iteration       50/     100 | consumed samples:         3200 | elapsed time per itera";
  const auto l = read_training_log(text);
  CHECK(l.iterations.size() == 7);
  const auto st = steady_state(l);
  // 10 warm-up; 20 NaN; the second 20 and 30 repeat iterations already read; 40 an outlier;
  // 50 is cut before its time.
  CHECK(st.used == std::vector<long long>{30});
  CHECK(st.step_time_ms == Approx(510.0));
  CHECK(read_training_log("hello\nworld\n").empty());
}

TEST_CASE("counts beyond 2^53 or negative read as not printed, never as arithmetic") {
  const std::string text =
      " iteration       10/     100 | consumed samples:          640 | elapsed time per iteration (ms): 900.0 | global batch size:    64 |\n"
      " iteration 99999999999999999999/ 100 | consumed samples: -5 | elapsed time per iteration (ms): 500.0 | global batch size: 9223372036854775807 |\n"
      " iteration       30/     100 | consumed samples:         1920 | elapsed time per iteration (ms): 510.0 | global batch size:    64 |\n";
  const auto l = read_training_log(text);
  REQUIRE(l.iterations.size() == 3);
  CHECK(l.iterations[1].iteration == -1);
  CHECK(l.iterations[1].consumed_samples == -1);
  CHECK(l.iterations[1].global_batch_size == -1);
  const auto st = steady_state(l);
  CHECK(st.global_batch_size == 64);
  CHECK_FALSE(st.used.empty());
  // NeMo's progress bar: a global step past 2^53.
  const auto bar = read_training_log(
      "Epoch 0: : 10%|#  | 10/100 [01:00<11:00, reduced_train_loss=5.17, "
      "global_step=99999999999999999999.0, consumed_samples=5120.0, train_step_timing in s=14.02]\n");
  REQUIRE(bar.iterations.size() == 1);
  CHECK(bar.iterations[0].iteration == -1);
  (void)steady_state(bar);
}
