#pragma once
// Microbenchmark samples as `epo calibrate bench` writes them:
// {"schema_version":1,"kind":"samples","context":{...},"unmeasured":[...],"samples":[...]}.
// What each sample means (the fitters' models rely on it):
//  - gemm {m,n,k,time_us}: one bf16 GEMM [m x k] x [k x n], time per kernel.
//  - grouped_gemm {tokens_per_expert,num_experts,hidden,ffn,time_us}: one grouped GEMM of
//    num_experts SwiGLU fc1 products [tokens_per_expert x hidden] x [hidden x 2*ffn]; with
//    "product":"fc2" the fc2 products [tokens_per_expert x ffn] x [ffn x hidden]; "pass":"dgrad" or
//    "wgrad" times the product's data or weight gradient, read with the forward's triple (the
//    cost model times all three passes of a product with it). A wgrad sums into the gradient
//    (beta 1, as Megatron's gradient accumulation does); "accumulate":false marks a fresh product
//    (beta 0), timed beside it for comparison with libraries that write a fresh product, never
//    fitted on.
//  - copy {bytes,sms,time_us}: a copy kernel holding `sms` SMs moving `bytes` of payload (each byte
//    read once and written once).
//  - hbm {bytes,time_us}: a device-to-device cudaMemcpyAsync of `bytes` with the whole GPU, time
//    per copy of a back-to-back run (the streaming rate of HBM).
//  - transport {kind,ep,bytes_per_rank,sms,time_us}: one all-to-all of bytes_per_rank per rank,
//    bytes_per_rank/ep to each rank; `local` = ep virtual ranks on one GPU, every rank's copy
//    kernel holding `sms` SMs and copying all ep parts (its own too: ep * bytes_per_rank move);
//    `flex` = peer store kernels over NVLink holding `sms` SMs and `nccl` = ncclAlltoAll, where
//    (ep-1)/ep of bytes_per_rank crosses NVLink (sms ignored for nccl).
//  - contention {comm_sms,link,gemm_alone_us,comm_alone_us,together_us}: GEMMs and a
//    communication kernel holding comm_sms SMs (launched first) alone and together.
//  - launch {time_us}: one empty kernel on the GPU timeline; host_sync {time_us}: one
//    device-to-host synchronisation round trip.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/hardware.hpp"

namespace epo::calib {

struct GemmSample {
  double m = 0, n = 0, k = 0;
  double count = 1;  ///< products in one (grouped) kernel
  bool grouped = false;
  /// Grouped samples: issued as grouped cuBLAS launches (one per batch of experts) rather than
  /// one GEMM per expert ("launch": "grouped" in the file; absent = per expert).
  bool grouped_launch = false;
  bool strided_launch = false;  ///< one strided-batched GEMM over equal experts: not fitted on
  bool fc2 = false;             ///< grouped: the fc2 product (else fc1)
  std::string pass = "fwd";     ///< grouped: fwd, dgrad or wgrad
  bool accumulate = true;       ///< wgrad: summed into the gradient (false: a fresh product)
  /// A configuration's own expert shape (calibrate bench --for: the sample names its product);
  /// fitted profiles keep these as measured times (HardwareProfile::expert_gemm_times).
  bool for_shape = false;
  double time_us = 0;
};

struct CopySample {
  double bytes = 0;
  int sms = 0;
  double time_us = 0;
};

struct HbmSample {
  double bytes = 0;
  double time_us = 0;
};

enum class TransportKind { local, nccl, flex };
const char* to_string(TransportKind k);

struct TransportSample {
  TransportKind kind = TransportKind::local;
  int ep = 2;
  double bytes_per_rank = 0;
  int sms = 0;
  double time_us = 0;
};

enum class ContentionLink { local, nvlink };

struct ContentionSample {
  int comm_sms = 0;
  ContentionLink link = ContentionLink::local;
  double gemm_alone_us = 0, comm_alone_us = 0, together_us = 0;
  /// Rate at which the GEMMs progress while the communication runs (epo calibrate bench: contention samples):
  /// (gemm_alone - (together - comm_alone)) / comm_alone.
  double compute_rate() const {
    return (gemm_alone_us - (together_us - comm_alone_us)) / comm_alone_us;
  }
};

struct Samples {
  static constexpr int kSchemaVersion = 1;
  std::string file;  ///< where they were read from ("" if built in memory)
  nlohmann::json context = nlohmann::json::object();
  std::vector<std::string> unmeasured;
  std::vector<GemmSample> gemm;
  std::vector<CopySample> copy;
  std::vector<HbmSample> hbm;
  std::vector<TransportSample> transport;
  std::vector<ContentionSample> contention;
  std::vector<double> launch_us;
  std::vector<double> host_sync_us;
};

/// The configuration-shaped expert GEMMs of `s` as a profile's measured times (accumulating
/// weight gradients only; the fastest sample where one shape, pass and launch repeats).
std::vector<model::MeasuredExpertGemm> measured_expert_gemms(const Samples& s);

/// Strict reading: unknown keys, wrong types and out-of-range values name the file and the
/// sample's index.
Samples samples_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json to_json(const Samples& s);
Samples load_samples_file(const std::string& path);

}  // namespace epo::calib
