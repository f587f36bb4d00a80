// Byte strings of one process's results (see rank_pack.hpp).
#include "executor/rank_pack.hpp"

#include <cstring>
#include <type_traits>

#include "model/error.hpp"

namespace epo::exec {

namespace {

class Writer {
 public:
  template <typename T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>, "plain values only");
    out_.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  void str(const std::string& s) {
    pod<std::uint64_t>(s.size());
    out_.append(s);
  }
  void bits(const std::vector<std::uint16_t>& v) {
    pod<std::uint64_t>(v.size());
    out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(std::uint16_t));
  }
  void tensors(const std::vector<std::vector<std::uint16_t>>& v) {
    pod<std::uint64_t>(v.size());
    for (const auto& t : v) bits(t);
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  template <typename T>
  T pod() {
    T v;
    need(sizeof(T));
    std::memcpy(&v, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return v;
  }
  std::string str() {
    const auto n = pod<std::uint64_t>();
    need(n);
    std::string s = in_.substr(at_, n);
    at_ += n;
    return s;
  }
  std::vector<std::uint16_t> bits() {
    const auto n = pod<std::uint64_t>();
    need(n * sizeof(std::uint16_t));
    std::vector<std::uint16_t> v(n);
    if (n) std::memcpy(v.data(), in_.data() + at_, n * sizeof(std::uint16_t));
    at_ += n * sizeof(std::uint16_t);
    return v;
  }
  std::vector<std::vector<std::uint16_t>> tensors() {
    const auto n = pod<std::uint64_t>();
    need(n * sizeof(std::uint64_t));  // every tensor has at least its length
    std::vector<std::vector<std::uint16_t>> v;
    for (std::uint64_t i = 0; i < n; ++i) v.push_back(bits());
    return v;
  }

 private:
  void need(std::uint64_t n) const {
    if (n > in_.size() - at_)
      throw EPO_RUNTIME_ERROR("a process's results are cut short (", in_.size(), " bytes; reading ",
                              n, " at ", at_, ")");
  }
  const std::string& in_;
  std::size_t at_ = 0;
};

void put_capture(Writer& w, const Capture& c) {
  w.tensors(c.outputs);
  w.tensors(c.input_grads);
  w.tensors(c.dense_grads);
  w.tensors(c.expert_w1);
  w.tensors(c.expert_w2);
  w.pod<std::uint8_t>(c.dense_reduced ? 1 : 0);
}

Capture get_capture(Reader& r) {
  Capture c;
  c.outputs = r.tensors();
  c.input_grads = r.tensors();
  c.dense_grads = r.tensors();
  c.expert_w1 = r.tensors();
  c.expert_w2 = r.tensors();
  c.dense_reduced = r.pod<std::uint8_t>() != 0;
  return c;
}

}  // namespace

std::string pack_results(const RankResults& r) {
  Writer w;
  w.pod<std::uint64_t>(r.ranks.size());
  for (int rank : r.ranks) w.pod<std::int32_t>(rank);
  w.pod<std::uint64_t>(r.records.size());
  for (const OpRecord& o : r.records) {
    w.pod<std::int32_t>(o.rank);
    w.pod<std::int32_t>(o.step);
    w.pod<std::uint8_t>(o.overlapped ? 1 : 0);
    w.pod<std::int32_t>(static_cast<std::int32_t>(o.kind));
    w.pod<std::int32_t>(static_cast<std::int32_t>(o.dir));
    w.pod<std::int32_t>(static_cast<std::int32_t>(o.lane));
    w.str(o.name);
    w.pod<std::int32_t>(o.microbatch);
    w.pod<std::int32_t>(o.layer);
    w.pod<double>(o.start_us);
    w.pod<double>(o.end_us);
  }
  const bool captures = !r.cap_cfg.empty();
  w.pod<std::uint8_t>(captures ? 1 : 0);
  for (int rank : r.ranks) {
    w.pod<std::int64_t>(r.memory_bytes.at(rank));
    if (!captures) continue;
    put_capture(w, r.cap_cfg.at(rank));
    put_capture(w, r.cap_other.at(rank));
  }
  return w.take();
}

void unpack_results(const std::string& bytes, RankResults& into) {
  Reader rd(bytes);
  const auto num_ranks = rd.pod<std::uint64_t>();
  std::vector<int> ranks;
  for (std::uint64_t i = 0; i < num_ranks; ++i) {
    const int rank = rd.pod<std::int32_t>();
    if (rank < 0 || rank >= static_cast<int>(into.memory_bytes.size()))
      throw EPO_RUNTIME_ERROR("a process sent results of EP rank ", rank, " (the run has ",
                              into.memory_bytes.size(), ")");
    ranks.push_back(rank);
  }
  const auto num_records = rd.pod<std::uint64_t>();
  for (std::uint64_t i = 0; i < num_records; ++i) {
    OpRecord o;
    o.rank = rd.pod<std::int32_t>();
    o.step = rd.pod<std::int32_t>();
    o.overlapped = rd.pod<std::uint8_t>() != 0;
    o.kind = static_cast<model::OpKind>(rd.pod<std::int32_t>());
    o.dir = static_cast<model::Direction>(rd.pod<std::int32_t>());
    o.lane = static_cast<model::Lane>(rd.pod<std::int32_t>());
    o.name = rd.str();
    o.microbatch = rd.pod<std::int32_t>();
    o.layer = rd.pod<std::int32_t>();
    o.start_us = rd.pod<double>();
    o.end_us = rd.pod<double>();
    into.records.push_back(std::move(o));
  }
  const bool captures = rd.pod<std::uint8_t>() != 0;
  if (captures && (into.cap_cfg.size() != into.memory_bytes.size() ||
                   into.cap_other.size() != into.memory_bytes.size()))
    throw EPO_RUNTIME_ERROR("a process sent --check captures the receiver has no room for");
  for (int rank : ranks) {
    into.memory_bytes[rank] = rd.pod<std::int64_t>();
    if (!captures) continue;
    into.cap_cfg[rank] = get_capture(rd);
    into.cap_other[rank] = get_capture(rd);
  }
  into.ranks.insert(into.ranks.end(), ranks.begin(), ranks.end());
}

}  // namespace epo::exec
