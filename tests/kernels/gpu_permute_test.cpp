// Permute / unpermute against the references: bit-exact (same fma order, one rounding).
// SwiGLU: within one bf16 ulp of the reference (2^-7 relative; device and host expf may differ in
// the last fp32 bit, which can move a bf16 rounding by one step).
#include <vector>

#include "catch.hpp"
#include "gpu_test_utils.hpp"
#include "kernels/launchers.hpp"

using namespace epo::kernels;
using epo::kernels::test::DeviceBuffer;
using epo::kernels::test::random_bf16;
using epo::kernels::test::random_routing;
using epo::kernels::test::worst_excess;

TEST_CASE("permute and unpermute match the references", "[kernels][gpu]") {
  struct Case {
    int num_tokens, num_topk, num_experts, hidden, align, active;
  };
  const std::vector<Case> cases = {
      {512, 8, 256, 7168, 16, 200},  // DeepSeek-V3 hidden, 56 empty experts
      {1024, 8, 128, 2048, 1, 128},  // Qwen3 hidden
      {100, 2, 8, 16, 16, 3},        // hidden smaller than a warp's vector sweep
      {33, 4, 16, 264, 4, 16},       // hidden not a multiple of 256
  };
  uint32_t seed = 100;
  for (const auto& c : cases) {
    INFO("tokens " << c.num_tokens << " hidden " << c.hidden << " align " << c.align);
    auto routing = random_routing(c.num_tokens, c.num_topk, c.num_experts, seed++, c.active, 0.7);
    const int64_t max_rows =
        alltoall_layout_max_rows(c.num_tokens, c.num_topk, c.num_experts, c.align);
    std::vector<int> permuted_row(routing.topk_idx.size()), row_src(max_rows),
        offsets(c.num_experts + 1), counts(c.num_experts);
    ref::alltoall_layout(routing.topk_idx.data(), nullptr, 0, c.num_tokens, c.num_topk,
                         c.num_experts, c.align, max_rows, permuted_row.data(), row_src.data(),
                         offsets.data(), counts.data());
    auto x = random_bf16(static_cast<size_t>(c.num_tokens) * c.hidden, seed++);
    std::vector<uint16_t> ref_permuted(max_rows * c.hidden);
    ref::permute(x.data(), c.num_tokens, c.hidden, row_src.data(), max_rows, ref_permuted.data());

    DeviceBuffer<uint16_t> d_x(x), d_permuted(ref_permuted.size());
    DeviceBuffer<int> d_row_src(row_src), d_permuted_row(permuted_row);
    DeviceBuffer<float> d_w(routing.topk_weights);
    d_permuted.fill_bytes(0x7f);  // garbage where padding must become zeros
    launch_permute(reinterpret_cast<const bf16*>(d_x.get()), c.num_tokens, c.hidden,
                   d_row_src.get(), max_rows, reinterpret_cast<bf16*>(d_permuted.get()), nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(d_permuted.download() == ref_permuted);

    // Expert outputs: a different random matrix, so the reduction is not a plain rescaling.
    auto y = random_bf16(ref_permuted.size(), seed++);
    for (int with_weights = 0; with_weights < 2; ++with_weights) {
      const float* w_host = with_weights ? routing.topk_weights.data() : nullptr;
      std::vector<uint16_t> ref_out(static_cast<size_t>(c.num_tokens) * c.hidden);
      ref::unpermute(y.data(), max_rows, c.hidden, permuted_row.data(), w_host, c.num_tokens,
                     c.num_topk, ref_out.data());
      DeviceBuffer<uint16_t> d_y(y), d_out(ref_out.size());
      launch_unpermute(reinterpret_cast<const bf16*>(d_y.get()), max_rows, c.hidden,
                       d_permuted_row.get(), with_weights ? d_w.get() : nullptr, c.num_tokens,
                       c.num_topk, reinterpret_cast<bf16*>(d_out.get()), nullptr);
      REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
      CHECK(d_out.download() == ref_out);
    }
  }
}

TEST_CASE("permute launchers check sizes and alignment", "[kernels][gpu]") {
  DeviceBuffer<uint16_t> buf(1024);
  DeviceBuffer<int> rows(8);
  try {
    launch_permute(reinterpret_cast<const bf16*>(buf.get()), 8, 12, rows.get(), 8,
                   reinterpret_cast<bf16*>(buf.get()), nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("hidden") != std::string::npos);
  }
  try {
    launch_permute(reinterpret_cast<const bf16*>(buf.get()), 8, 16, rows.get(), 8,
                   reinterpret_cast<bf16*>(buf.get() + 1), nullptr);
    FAIL("no exception");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).find("out") != std::string::npos);
  }
}

TEST_CASE("SwiGLU forward and backward match the references", "[kernels][gpu]") {
  for (auto [rows, ffn] :
       std::vector<std::pair<int, int>>{{4096, 2048}, {777, 768}, {3, 8}, {0, 64}}) {
    INFO("rows " << rows << " ffn " << ffn);
    auto fc1 = random_bf16(static_cast<size_t>(rows) * 2 * ffn, rows + 1, 4.f);
    auto d_out = random_bf16(static_cast<size_t>(rows) * ffn, rows + 2);
    std::vector<uint16_t> ref_out(d_out.size()), ref_d_fc1(fc1.size());
    ref::swiglu_fwd(fc1.data(), rows, ffn, ref_out.data());
    ref::swiglu_bwd(fc1.data(), d_out.data(), rows, ffn, ref_d_fc1.data());
    DeviceBuffer<uint16_t> d_fc1(fc1), d_dout(d_out), d_o(ref_out.size()), d_dfc1(fc1.size());
    launch_swiglu_fwd(reinterpret_cast<const bf16*>(d_fc1.get()), rows, ffn,
                      reinterpret_cast<bf16*>(d_o.get()), nullptr);
    launch_swiglu_bwd(reinterpret_cast<const bf16*>(d_fc1.get()),
                      reinterpret_cast<const bf16*>(d_dout.get()), rows, ffn,
                      reinterpret_cast<bf16*>(d_dfc1.get()), nullptr);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(worst_excess(d_o.download(), ref_out, 1.0 / 128, 1e-30) <= 0);
    CHECK(worst_excess(d_dfc1.download(), ref_d_fc1, 1.0 / 128, 1e-30) <= 0);
  }
}
