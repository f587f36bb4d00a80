// Flex dispatch / permute / unpermute / combine over 2, 4 and 8 virtual ranks on one GPU against
// the reference pipeline, the timeout report and the launchers' argument checks.
#include <string>
#include <vector>

#include "catch.hpp"
#include "gpu_flex_common.hpp"

using namespace epo::kernels;
using epo::kernels::test::DeviceBuffer;

TEST_CASE("flex over virtual ranks matches the reference pipeline", "[kernels][gpu]") {
  REQUIRE(epo::kernels::test::device_count() >= 1);
  uint32_t seed = 1000;
  for (int num_ranks : {2, 4, 8}) {
    test::FlexCase c;
    c.num_tokens = 300;
    c.hidden = 7168 / 4;
    c.num_topk = 8;
    c.num_experts = 64;
    c.devices.assign(num_ranks, 0);
    c.num_sms_per_step = {1, 5, 32};  // three steps, flags never reset
    test::run_flex_case(c, seed);
    seed += 100;
  }
  // A small hidden size (a warp sweeps less than one row) and top-k spread over every rank.
  test::FlexCase c{40, 16, 4, 8, {0, 0, 0, 0}, {3, 1}};
  test::run_flex_case(c, 7);
}

TEST_CASE("flex bulk-copy sends match the reference pipeline", "[kernels][gpu]") {
  REQUIRE(epo::kernels::test::device_count() >= 1);
  uint32_t seed = 3000;
  // Rows of one chunk (3.5 KB, 14 KB) and of several (20 KB: two chunks of 10 KB); more tokens
  // than one block's batches; 1 block (every task through one ring) up to more blocks than
  // batches.
  const int cases[][2] = {{1792, 8}, {7168, 2}, {10240, 4}};  // {hidden, ranks}
  for (const auto& hidden_ranks : cases) {
    test::FlexCase c{300,        hidden_ranks[0], 8, 64, std::vector<int>(hidden_ranks[1], 0),
                     {1, 3, 40}, kFlexSendBulk};
    test::run_flex_case(c, seed);
    seed += 100;
  }
  // Top-1 over two ranks: about half the rows stay on their rank, among them rows a block loads
  // before it has read their routing (the first kAhead of its first batch), with one chunk and
  // with two.
  for (const int hidden : {2048, 10240}) {
    test::FlexCase c{200, hidden, 1, 16, {0, 0}, {1, 3}, kFlexSendBulk};
    test::run_flex_case(c, seed);
    seed += 100;
  }
  // Tiny rows (32 bytes) and every rank a destination of most tokens.
  test::FlexCase c{70, 16, 4, 8, {0, 0, 0, 0}, {2, 1}, kFlexSendBulk};
  test::run_flex_case(c, 9);
  // A block size that is neither a register kernel's nor kFlexSendBulk is named.
  const FlexBufferBytes bytes = flex_buffer_bytes(2, 4, 64, 2);
  DeviceBuffer<char> storage(bytes.total());
  const FlexBuffers own = flex_buffers_from(storage.get(), 2, 4, 64, 2);
  try {
    launch_flex_combine_send(0, 2, 64, 4, nullptr, own, 1, 4, nullptr, 256);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("threads_per_block") != std::string::npos);
  }
}

TEST_CASE("flex wait times out with rank, source and what it waited for", "[kernels][gpu]") {
  const int num_ranks = 2, T = 8, H = 64, K = 2;
  const FlexBufferBytes bytes = flex_buffer_bytes(num_ranks, T, H, K);
  DeviceBuffer<char> storage(bytes.total());
  storage.fill_bytes(0);
  FlexBuffers own = flex_buffers_from(storage.get(), num_ranks, T, H, K);
  FlexError* error = nullptr;
  REQUIRE(cudaHostAlloc(reinterpret_cast<void**>(&error), sizeof(FlexError),
                        cudaHostAllocMapped | cudaHostAllocPortable) == cudaSuccess);
  *error = FlexError{};
  // Rank 1 already holds seq 5 from itself, nobody else sends it: rank 1 must give up waiting for
  // rank 0 after about a million cycles and say so.
  const uint64_t seq = 5;
  REQUIRE(cudaMemcpy(own.recv_flag + 1, &seq, sizeof seq, cudaMemcpyHostToDevice) == cudaSuccess);
  launch_flex_dispatch_wait(1, num_ranks, own, seq, 1'000'000, error, nullptr);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(error->status == 1);
  CHECK(error->rank == 1);
  CHECK(error->src_rank == 0);
  CHECK(error->what == 1);
  CHECK(error->expected_seq == seq);
  CHECK(error->seen_seq == 0);
  try {
    check_flex_error(error);
    FAIL("no exception");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find("rank 1 timed out waiting for dispatch data from rank 0") != std::string::npos);
  }
  // The next launch reports the pending error instead of running on stale data.
  CHECK_THROWS_AS(launch_flex_combine_wait(1, num_ranks, own, 5, 1000, error, nullptr),
                  std::runtime_error);
  cudaFreeHost(error);
}

TEST_CASE("flex launchers name bad arguments", "[kernels][gpu]") {
  FlexBuffers own;
  try {
    launch_flex_dispatch_wait(0, 2, own, 0, 1000, nullptr, nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("seq") != std::string::npos);
  }
  try {
    launch_flex_dispatch_send(0, 2, nullptr, nullptr, nullptr, nullptr, nullptr, 0, 64, 8, 8, 0,
                              nullptr, own, 1, 4, nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("own.recv_x") != std::string::npos);
  }
  try {
    launch_flex_unpermute(0, 2, nullptr, 0, nullptr, nullptr, 64, 8, 4, own, 0, nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("own.recv_x") != std::string::npos);
  }
  try {
    launch_flex_unpermute(0, 2, nullptr, 0, nullptr, nullptr, 64, 33, 4, own, 0, nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("num_topk") != std::string::npos);
  }
  try {
    launch_flex_own_row_src(0, 2, nullptr, 4, nullptr, 8, 4, nullptr, nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("token_slot_in_rank") != std::string::npos);
  }
  try {
    launch_flex_own_row_src(0, 2, nullptr, 5, nullptr, 8, 4, nullptr, nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("num_tokens") != std::string::npos);
  }
  try {
    launch_flex_permute(2, 4, nullptr, nullptr, 4, 64, nullptr, nullptr, 8, nullptr, nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("recv_x") != std::string::npos);
  }
  try {
    launch_flex_permute(2, 4, nullptr, nullptr, 4, 60, nullptr, nullptr, 8, nullptr, nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("hidden") != std::string::npos);
  }
  try {
    launch_flex_combine_send(0, 2, 64, 4, nullptr, own, 1, 0, nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("own.recv_x") != std::string::npos);
  }
}
