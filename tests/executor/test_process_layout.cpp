// Multi-process epo run without MPI running: the launcher's environment, the rank and GPU of each
// process, every refusal (with the setting it names), the results each process sends to world
// rank 0 and the threads' barrier that meets the other processes.
#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "catch.hpp"
#include "executor/process_layout.hpp"
#include "executor/rank_pack.hpp"
#include "executor/thread_barrier.hpp"
#include "model/error.hpp"

using namespace epo;
using namespace epo::exec;

namespace {

LaunchEnv env_of(const std::map<std::string, std::string>& vars) {
  return read_launch_env([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

/// The message of the input error `f` throws ("" if it throws none).
template <typename F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::input);
    return e.what();
  }
  return "";
}

ProcessPlace place(int world_rank, int world_size, int local_rank, int local_size, int nodes) {
  ProcessPlace p;
  p.world_rank = world_rank;
  p.world_size = world_size;
  p.local_rank = local_rank;
  p.local_size = local_size;
  p.num_nodes = nodes;
  return p;
}

}  // namespace

TEST_CASE("the launcher's environment gives the process count and rank") {
  const LaunchEnv none = env_of({});
  CHECK(none.world_size == 1);
  CHECK(none.world_rank == 0);
  CHECK(none.source.empty());
  const LaunchEnv ompi = env_of({{"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_RANK", "3"}});
  CHECK(ompi.world_size == 4);
  CHECK(ompi.world_rank == 3);
  CHECK(ompi.source == "OMPI_COMM_WORLD_SIZE");
  const LaunchEnv pmi = env_of({{"PMI_SIZE", "2"}, {"PMI_RANK", "1"}});
  CHECK(pmi.world_size == 2);
  CHECK(pmi.world_rank == 1);
  // A rank outside the size, or text that is not a count, is not believed.
  CHECK(env_of({{"PMI_SIZE", "2"}, {"PMI_RANK", "2"}}).world_size == 1);
  CHECK(env_of({{"OMPI_COMM_WORLD_SIZE", "two"}, {"OMPI_COMM_WORLD_RANK", "0"}}).world_size == 1);
  // srun: the rank alone (the size comes from MPI once started with --mpi).
  const LaunchEnv srun = env_of({{"SLURM_PROCID", "5"}});
  CHECK(srun.world_size == 1);
  CHECK(srun.world_rank == 5);
  CHECK_FALSE(reports_run(srun));
  CHECK(reports_run(ompi) == false);
  CHECK(reports_run(none));
}

TEST_CASE("MPI mode: detected from the launcher or --mpi, refused when not built") {
  const LaunchEnv one = env_of({});
  const LaunchEnv two = env_of({{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_RANK", "0"}});
  CHECK_FALSE(use_mpi(one, false, false, true));
  CHECK(use_mpi(two, false, false, true));
  CHECK(use_mpi(one, true, false, true));
  CHECK(use_mpi(one, true, true, true));
  const std::string unbuilt = input_error([&] { use_mpi(two, false, false, false); });
  CHECK(unbuilt.find("one of 2 processes (OMPI_COMM_WORLD_SIZE)") != std::string::npos);
  CHECK(unbuilt.find("-DEPO_WITH_MPI=ON") != std::string::npos);
  CHECK(input_error([&] { use_mpi(one, true, false, false); }).find("--mpi") != std::string::npos);
  CHECK(input_error([&] { use_mpi(one, false, true, true); }).find("--gpus-per-process") !=
        std::string::npos);
}

TEST_CASE("the job must run exactly the plan's EP ranks, flex only on one node") {
  // 2 processes x 1 GPU = 2 ranks.
  CHECK(input_error([] { check_process_plan(place(0, 2, 0, 2, 1), 1, 2, true, false); }).empty());
  const std::string fewer =
      input_error([] { check_process_plan(place(0, 2, 0, 2, 1), 1, 8, false, false); });
  CHECK(fewer.find("EP = 8") != std::string::npos);
  CHECK(fewer.find("2 processes x 1 GPU(s) per process = 2") != std::string::npos);
  CHECK(fewer.find("--gpus-per-process 4") != std::string::npos);
  CHECK(fewer.find("mpirun -np 8") != std::string::npos);
  // EP 6 over 4 processes of 4 GPUs: neither fix divides; say what must.
  const std::string odd =
      input_error([] { check_process_plan(place(0, 4, 0, 4, 1), 4, 6, false, false); });
  CHECK(odd.find("divides EP") != std::string::npos);
  CHECK(input_error([] {
          check_process_plan(place(0, 2, 0, 2, 1), 0, 2, false, false);
        }).find("--gpus-per-process = 0") != std::string::npos);
  CHECK(input_error([] {
          check_process_plan(place(0, 2, 0, 2, 1), 1, 2, false, true);
        }).find("--virtual-ranks") != std::string::npos);
  // Two nodes: alltoall (NCCL) is fine, flex is refused with the reason.
  CHECK(input_error([] { check_process_plan(place(1, 4, 1, 2, 2), 2, 8, false, false); }).empty());
  const std::string flex =
      input_error([] { check_process_plan(place(1, 4, 1, 2, 2), 2, 8, true, false); });
  CHECK(flex.find("span 2 nodes") != std::string::npos);
  CHECK(flex.find("NVLink") != std::string::npos);
  CHECK(flex.find("--dispatcher alltoall") != std::string::npos);
}

TEST_CASE("EP ranks and GPUs of each process") {
  // 2 nodes x 2 processes x 4 GPUs: world rank 3 is the second process of node 1.
  const ProcessPlace p = place(3, 4, 1, 2, 2);
  CHECK(first_ep_rank(p, 4) == 12);
  CHECK(process_devices(p, 4, 8) == std::vector<int>{4, 5, 6, 7});
  // One GPU per process (the default), 8 processes on an 8-GPU node.
  CHECK(process_devices(place(5, 8, 5, 8, 1), 1, 8) == std::vector<int>{5});
  CHECK(first_ep_rank(place(5, 8, 5, 8, 1), 1) == 5);
  // The launcher gave each process exactly its own GPUs (CUDA_VISIBLE_DEVICES per process).
  CHECK(process_devices(place(1, 2, 1, 2, 1), 2, 2) == std::vector<int>{0, 1});
  // Too few GPUs on the node for its processes.
  const std::string few = input_error([] { process_devices(place(1, 2, 1, 2, 1), 2, 3); });
  CHECK(few.find("sees 3 GPU(s)") != std::string::npos);
  CHECK(few.find("2 processes x 2 GPU(s) per process = 4") != std::string::npos);
  CHECK_FALSE(input_error([] { process_devices(place(0, 1, 0, 1, 1), 2, 0); }).empty());
}

TEST_CASE("two EP ranks of a node on one GPU are named") {
  CHECK(shared_gpus({{0, "0000:18:00.0"}, {1, "0000:2A:00.0"}}).empty());
  const auto dup = shared_gpus({{0, "0000:18:00.0"}, {1, "0000:2A:00.0"}, {2, "0000:18:00.0"}});
  REQUIRE(dup.size() == 1);
  CHECK(dup[0].find("EP ranks 0 and 2") != std::string::npos);
  CHECK(dup[0].find("0000:18:00.0") != std::string::npos);
}

TEST_CASE("a process's results reach world rank 0 whole") {
  const int ranks = 4;
  auto make = [&](int first) {
    RankResults r;
    r.memory_bytes.assign(ranks, 0);
    r.cap_cfg.resize(ranks);
    r.cap_other.resize(ranks);
    for (int rank = first; rank < first + 2; ++rank) {
      r.ranks.push_back(rank);
      r.memory_bytes[rank] = 1000 + rank;
      OpRecord o;
      o.rank = rank;
      o.step = 1;
      o.overlapped = rank % 2 == 0;
      o.kind = model::OpKind::combine;
      o.dir = model::Direction::backward;
      o.lane = model::Lane::comm;
      o.name = "combine.bwd";
      o.microbatch = 3;
      o.layer = 1;
      o.start_us = 10.5 + rank;
      o.end_us = 20.25 + rank;
      r.records.push_back(o);
      r.cap_cfg[rank].outputs = {{static_cast<std::uint16_t>(rank), 7}, {}};
      r.cap_cfg[rank].dense_reduced = true;
      r.cap_other[rank].expert_w2 = {{9, 9, static_cast<std::uint16_t>(rank)}};
    }
    return r;
  };
  RankResults all;
  all.memory_bytes.assign(ranks, 0);
  all.cap_cfg.resize(ranks);
  all.cap_other.resize(ranks);
  unpack_results(pack_results(make(0)), all);
  unpack_results(pack_results(make(2)), all);
  CHECK(all.ranks == std::vector<int>{0, 1, 2, 3});
  REQUIRE(all.records.size() == 4);
  for (int rank = 0; rank < ranks; ++rank) {
    const OpRecord& o = all.records[rank];
    CHECK(o.rank == rank);
    CHECK(o.overlapped == (rank % 2 == 0));
    CHECK(o.kind == model::OpKind::combine);
    CHECK(o.dir == model::Direction::backward);
    CHECK(o.lane == model::Lane::comm);
    CHECK(o.name == "combine.bwd");
    CHECK(o.microbatch == 3);
    CHECK(o.start_us == 10.5 + rank);
    CHECK(o.end_us == 20.25 + rank);
    CHECK(all.memory_bytes[rank] == 1000 + rank);
    CHECK(all.cap_cfg[rank].outputs ==
          std::vector<std::vector<std::uint16_t>>{{static_cast<std::uint16_t>(rank), 7}, {}});
    CHECK(all.cap_cfg[rank].dense_reduced);
    CHECK_FALSE(all.cap_other[rank].dense_reduced);
    CHECK(all.cap_other[rank].expert_w2[0][2] == rank);
  }
  // Without --check no captures travel; cut bytes and foreign ranks are errors.
  RankResults plain = make(0);
  plain.cap_cfg.clear();
  plain.cap_other.clear();
  const std::string bytes = pack_results(plain);
  RankResults into;
  into.memory_bytes.assign(ranks, 0);
  unpack_results(bytes, into);
  CHECK(into.records.size() == 2);
  RankResults cut;
  cut.memory_bytes.assign(ranks, 0);
  CHECK_THROWS_AS(unpack_results(bytes.substr(0, bytes.size() - 3), cut), Error);
  RankResults small;
  small.memory_bytes.assign(1, 0);
  CHECK_THROWS_AS(unpack_results(bytes, small), Error);
}

TEST_CASE("the threads' barrier: the last to arrive meets the other processes, once per meeting") {
  std::atomic<int> across{0}, flex{0};
  Barrier b(3, [&] { ++across; });
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i)
    threads.emplace_back([&] {
      b.wait();
      b.wait([&] { ++flex; });  // the flex exchange replaces the plain meeting
      b.wait();
    });
  for (auto& t : threads) t.join();
  CHECK(across == 2);
  CHECK(flex == 1);
  // A failing thread frees the one waiting for it, with an error.
  Barrier f(2);
  std::atomic<bool> threw{false};
  std::thread waiter([&] {
    try {
      f.wait();
    } catch (const Error& e) {
      threw = std::string(e.what()).find("another rank failed") != std::string::npos;
    }
  });
  f.fail();
  waiter.join();
  CHECK(threw);
  CHECK_THROWS_AS(f.wait(), Error);
}
