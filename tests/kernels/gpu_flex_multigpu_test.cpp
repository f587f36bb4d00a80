// Flex dispatch, unpermute and combine between two GPUs through peer pointers (NVLink where
// present), against the reference pipeline. Skips when fewer than two GPUs or no peer access.
#include <vector>

#include "catch.hpp"
#include "gpu_flex_common.hpp"

using namespace epo::kernels;

TEST_CASE("flex between two GPUs matches the reference pipeline", "[kernels][multigpu]") {
  if (test::device_count() < 2) {
    WARN("fewer than two GPUs: skipped");
    return;
  }
  int can01 = 0, can10 = 0;
  REQUIRE(cudaDeviceCanAccessPeer(&can01, 0, 1) == cudaSuccess);
  REQUIRE(cudaDeviceCanAccessPeer(&can10, 1, 0) == cudaSuccess);
  if (!can01 || !can10) {
    WARN("GPUs 0 and 1 have no peer access: skipped");
    return;
  }
  for (int d : {0, 1}) {
    REQUIRE(cudaSetDevice(d) == cudaSuccess);
    cudaError_t status = cudaDeviceEnablePeerAccess(1 - d, 0);
    if (status == cudaErrorPeerAccessAlreadyEnabled)
      cudaGetLastError();
    else
      REQUIRE(status == cudaSuccess);
  }
  test::FlexCase c{512, 7168, 8, 256, {0, 1}, {8, 16, 1}};
  test::run_flex_case(c, 4242);
  // Two virtual ranks per GPU: same-device and peer destinations in one table.
  test::FlexCase mixed{200, 2048, 8, 128, {0, 0, 1, 1}, {4, 12}};
  test::run_flex_case(mixed, 77);
  // The bulk-copy sends over the same links, one GPU per rank and mixed.
  test::FlexCase bulk{512, 7168, 8, 256, {0, 1}, {8, 16, 1}, kFlexSendBulk};
  test::run_flex_case(bulk, 4343);
  test::FlexCase bulk_mixed{200, 2048, 8, 128, {0, 0, 1, 1}, {4, 12}, kFlexSendBulk};
  test::run_flex_case(bulk_mixed, 78);
}
