#pragma once
// What one process of a multi-process `epo run` sends to world rank 0 after the measured steps:
// its ranks' op records, allocated bytes and (--check) captures, as one byte string. Fixed-width
// little-endian host layout: sender and receiver are the same program on the same kind of host.
// Pure C++ so the CPU tests cover the round trip.
#include <cstdint>
#include <string>
#include <vector>

#include "executor/check.hpp"
#include "executor/measurement.hpp"

namespace epo::exec {

/// One process's share of the results; every vector indexed by EP rank covers only the ranks of
/// `ranks` (the others stay empty / zero).
struct RankResults {
  std::vector<int> ranks;                   ///< EP ranks this process drove
  std::vector<OpRecord> records;            ///< their op records
  std::vector<std::int64_t> memory_bytes;   ///< per EP rank (size = all ranks)
  std::vector<Capture> cap_cfg, cap_other;  ///< per EP rank (size = all ranks; --check only)
};

/// Bytes of `r`, only its own ranks' memory and captures.
std::string pack_results(const RankResults& r);

/// Adds what pack_results wrote into `into` (records appended, the sender's ranks' memory and
/// captures set; `into`'s vectors must already have every rank's size). Throws a runtime error
/// when the bytes are cut short or name a rank outside those vectors.
void unpack_results(const std::string& bytes, RankResults& into);

}  // namespace epo::exec
