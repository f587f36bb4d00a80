// epo validate / epo plan as a user runs them: exit codes 0 (ok), 2 (bad input), 3 (rejected),
// and what they print and write.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <unistd.h>
#include <sys/wait.h>
#include <string>

#include "catch.hpp"
#include "model/config_io.hpp"
#include "planner/emit.hpp"
#include "planner/search.hpp"
#include "planner/validation.hpp"

namespace {

struct Run {
  int code = -1;
  std::string out;
};

Run run_epo(const std::string& args) {
  const char* bin = std::getenv("EPO_BIN");
  REQUIRE(bin != nullptr);
  const std::string cmd = std::string(bin) + " " + args + " 2>&1";
  Run r;
  FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string tmp_path(const std::string& name) {
  const char* d = std::getenv("TMPDIR");
  return std::string(d ? d : "/tmp") + "/epo_planner_test_" + std::to_string(::getpid()) + "_" + name;
}


bool has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

}  // namespace

TEST_CASE("epo validate: the examples pass, print Bridge overrides and Megatron-LM arguments") {
  for (const char* name : {"alltoall", "flex-deepep", "flex-hybridep"}) {
    INFO(name);
    const Run r = run_epo(std::string("validate --example ") + name);
    CHECK(r.code == 0);
    CHECK(has(r.out, "comm_overlap.overlap_moe_expert_parallel_comm=true"));
    CHECK(has(r.out, "--overlap-moe-expert-parallel-comm"));
    CHECK(has(r.out, "0 error(s)"));
  }
  CHECK(run_epo("validate --example ring").code == 2);
}

TEST_CASE("epo validate: every violation with id, fix and source; exit 3 on error") {
  const Run r = run_epo("validate --overlap --ep 1 --recompute full --cdmc 1");
  CHECK(r.code == 3);
  CHECK(has(r.out, "MCORE-OVL-EP"));
  CHECK(has(r.out, "MCORE-OVL-RECOMPUTE-FULL"));
  CHECK(has(r.out, "MCORE-OVL-CDMC1"));
  CHECK(has(r.out, "fix:"));
  CHECK(has(r.out, "source:"));
  // Warnings only: exit 0.
  const Run w = run_epo("validate --overlap --delay-wgrad --cdmc 1");
  CHECK(w.code == 0);
  CHECK(has(w.out, "warning MCORE-OVL-CDMC1"));
  // A version switch changes the verdict.
  CHECK(run_epo("validate --overlap --recompute selective --recompute-modules moe --megatron core_v0.16").code == 0);
  CHECK(run_epo("validate --overlap --recompute selective --recompute-modules moe --megatron core_v0.17").code == 3);
  // Bad input is exit 2: a layout that does not divide, an unknown version.
  CHECK(run_epo("validate --tp 3").code == 2);
  CHECK(run_epo("validate --megatron core_v0.13").code == 2);
  CHECK(run_epo("validate --te two").code == 2);
}

TEST_CASE("epo validate --mlm-args: Megatron-LM's rules unless --frontend says otherwise") {
  // TP 2 without EP overlap on Hopper: Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS=1, which
  // Bridge sets itself; the list's offloading names attn_proj without core_attn (both refuse it).
  const std::string path = tmp_path("args.sh");
  FILE* f = std::fopen(path.c_str(), "w");
  REQUIRE(f != nullptr);
  std::fputs("--num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 2048 "
             "--micro-batch-size 1 --global-batch-size 32 --bf16 --num-experts 16 "
             "--moe-router-topk 2 --moe-ffn-hidden-size 512 --expert-model-parallel-size 4 "
             "--tensor-model-parallel-size 2 --sequence-parallel --moe-grouped-gemm "
             "--moe-token-dispatcher-type alltoall --vocab-size 32000 "
             "--fine-grained-activation-offloading --offload-modules attn_proj\n",
             f);
  std::fclose(f);
  const Run mlm = run_epo("validate --mlm-args " + path + " --gpus 8 --cdmc 32");
  CHECK(mlm.code == 3);
  CHECK(has(mlm.out, "(mlm, Megatron main"));
  CHECK(has(mlm.out, "MCORE-OFFLOAD-ATTN-PROJ"));
  CHECK(has(mlm.out, "not modelled: fine_grained_activation_offloading"));
  const Run bridge =
      run_epo("validate --mlm-args " + path + " --gpus 8 --cdmc 32 --frontend bridge");
  CHECK(has(bridge.out, "(bridge, Megatron main"));
  CHECK(has(bridge.out, "MCORE-OFFLOAD-ATTN-PROJ"));
  std::remove(path.c_str());
}

TEST_CASE("epo plan: a readable report on a small space") {
  const Run r = run_epo("plan --model tiny --gpus 8 --gbs 64 --top 3");
  CHECK(r.code == 0);
  CHECK(has(r.out, "Top 3"));
  CHECK(has(r.out, "Pareto front"));
  CHECK(has(r.out, "Rejected"));
  CHECK(has(r.out, "Why the winner wins"));
}

TEST_CASE("epo plan --emit: files that epo predict and epo validate accept") {
  const std::string json = tmp_path("plan.json");
  const Run r = run_epo("plan --model tiny --gpus 8 --gbs 64 --emit json --out " + json);
  REQUIRE(r.code == 0);
  const auto j = epo::model::read_json_file(json);
  CHECK(j["kind"] == "plan");
  CHECK(j["schema_version"] == 1);
  CHECK(j.contains("prediction"));
  CHECK(j["search"]["rank"] == 1);
  CHECK(run_epo("predict --config " + json).code == 0);
  CHECK(run_epo("validate --config " + json).code == 0);

  const Run b = run_epo("plan --model tiny --gpus 8 --gbs 64 --emit bridge");
  REQUIRE(b.code == 0);
  CHECK(has(b.out, "comm_overlap.overlap_moe_expert_parallel_comm="));
  // The overrides on stdout read back into the plan in the JSON file.
  epo::model::Config plan = epo::model::config_from_json(j, json);
  plan.derive_and_check();
  epo::model::Config back = epo::planner::apply_bridge_overrides(plan, b.out);
  back.derive_and_check();
  CHECK(epo::planner::plan_key(plan) == epo::planner::plan_key(back));
  std::remove(json.c_str());

  const Run m = run_epo("plan --model tiny --gpus 8 --gbs 64 --emit mlm --frontend mlm");
  CHECK(m.code == 0);
  CHECK(has(m.out, "--expert-model-parallel-size"));
  // One continued command line: the model's architecture follows the plan's flags.
  CHECK(has(m.out, " \\\n--num-layers "));
  CHECK(has(m.out, "--hidden-size "));
  CHECK_FALSE(has(m.out, "\n\n"));
  const Run e = run_epo("plan --model tiny --gpus 8 --gbs 64 --emit env");
  CHECK(e.code == 0);
  CHECK(has(e.out, "export CUDA_DEVICE_MAX_CONNECTIONS="));
  CHECK(run_epo("plan --model tiny --gpus 8 --emit yaml").code == 2);
}

TEST_CASE("epo plan: --layout fixes the layout; an infeasible space exits 3 with advice") {
  const std::string json = tmp_path("layout.json");
  const Run r = run_epo("plan --layout tp=1,pp=1,ep=16 --emit json --out " + json);
  REQUIRE(r.code == 0);
  const auto j = epo::model::read_json_file(json);
  CHECK(j["config"]["parallel"]["ep"] == 16);
  CHECK(j["config"]["parallel"]["tp"] == 1);
  CHECK(j["search"]["fixed_layout"] == true);
  std::remove(json.c_str());
  CHECK(run_epo("plan --layout tp=1,xx=2").code == 2);
  const Run inf = run_epo("plan --model deepseek-v3 --gpus 8");
  CHECK(inf.code == 3);
  CHECK(has(inf.out, "relax"));
}

TEST_CASE("epo plan keeps --memory-headroom of the GPU free") {
  // The default model on 32 H100: its fastest plan without headroom fills the GPU beyond 95 %.
  auto top_memory = [](const std::string& extra) {
    const std::string json = tmp_path("headroom.json");
    const Run r = run_epo("plan --gpus 32 --top 1 --emit json --out " + json + " " + extra);
    REQUIRE(r.code == 0);
    const auto j = epo::model::read_json_file(json);
    std::remove(json.c_str());
    const auto& m = j["prediction"]["memory"];
    return std::make_pair(m["total_bytes"].get<double>() / m["capacity_bytes"].get<double>(),
                          j["search"]["memory_headroom"].get<double>());
  };
  const auto [full, none] = top_memory("--memory-headroom 0");
  const auto [kept, five] = top_memory("");
  CHECK(none == 0.0);
  CHECK(five == Approx(0.05));
  CHECK(full > 0.95);
  CHECK(kept <= 0.95);
  const Run r = run_epo("plan --top 1");
  CHECK(has(r.out, "plans keep 5 % of the 80 GiB per GPU free"));
  CHECK(run_epo("plan --memory-headroom 80").code == 2);
}

TEST_CASE("epo plan --layout: the pipeline split goes with the fixed layout") {
  // DeepSeek-V3's 61 layers on pp 8: Megatron refuses the plain split (exit 3 names the rule
  // and a layout); with Bridge's layout for pp 8 vpp 4 the fixed layout is planned.
  const std::string base = "plan --model deepseek-v3 --hardware dgx-h100 --gpus 1024 --gbs 16384 ";
  const Run plain = run_epo(base + "--layout tp=2,pp=8,vpp=4,ep=64");
  CHECK(plain.code != 0);
  const Run laid = run_epo(base + "--layout tp=2,pp=8,vpp=4,ep=64 --pipeline-layout 'Et|(tt|)*30mL' "
                                  "--recompute selective --recompute-modules mla_up_proj,mlp");
  CHECK(laid.code == 0);
  CHECK(laid.out.find("tp2 pp8 vpp4") != std::string::npos);
  CHECK(laid.out.find("uneven") != std::string::npos);
}

TEST_CASE("epo plan: a setting a flag names is fixed, never silently searched over") {
  const Run r = run_epo("plan --model tiny --gpus 8 --gbs 64 --hardware h100-sxm --dispatcher alltoall "
                        "--ep 4 --cdmc 1 --emit json --out " + tmp_path("fixed.json"));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("fixed by the flags given (the search varies the rest): ep 4, "
                   "CUDA_DEVICE_MAX_CONNECTIONS 1, dispatcher alltoall") != std::string::npos);
  const auto j = epo::model::read_json_file(tmp_path("fixed.json"));
  CHECK(j["config"]["options"]["dispatcher"] == "alltoall");
  CHECK(j["config"]["parallel"]["ep"] == 4);
  CHECK(j["config"]["options"]["cuda_device_max_connections"] == 1);
  std::remove(tmp_path("fixed.json").c_str());
  // A pipeline split without a layout to split: refused, with what to give.
  const Run split = run_epo("plan --model tiny --gpus 8 --gbs 64 --pipeline-layout 'Et|tL'");
  CHECK(split.code == 2);
  CHECK(split.out.find("--layout") != std::string::npos);
}

TEST_CASE("epo plan: the warnings `epo validate` gives on the winner are printed beside it") {
  // HybridEP across two 8-GPU NVLink domains draws HYBRIDEP-NVL8-LARGE-EP; within one it does not.
  const std::string base = "plan --model qwen3-30b-a3b --gpus 16 --gbs 512 --hardware dgx-h100 "
                           "--dispatcher flex --flex-backend hybridep ";
  const Run wide = run_epo(base + "--ep 16");
  REQUIRE(wide.code == 0);
  const size_t at = wide.out.find("Warnings on plan #1");
  REQUIRE(at != std::string::npos);
  CHECK(wide.out.find("HYBRIDEP-NVL8-LARGE-EP", at) != std::string::npos);
  // The plan JSON carries them, and its HTML report shows them.
  REQUIRE(run_epo(base + "--ep 16 --emit json --out " + tmp_path("warned.json")).code == 0);
  const auto j = epo::model::read_json_file(tmp_path("warned.json"));
  REQUIRE(j["search"]["warnings"].size() == 1);
  CHECK(j["search"]["warnings"][0]["id"] == "HYBRIDEP-NVL8-LARGE-EP");
  REQUIRE(run_epo("report " + tmp_path("warned.json") + " --html " + tmp_path("warned.html"))
              .code == 0);
  std::ifstream html(tmp_path("warned.html"));
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  CHECK(page.find("Warnings on the winner") != std::string::npos);
  std::remove(tmp_path("warned.json").c_str());
  std::remove(tmp_path("warned.html").c_str());
  const Run narrow = run_epo(base + "--ep 8");
  REQUIRE(narrow.code == 0);
  CHECK(narrow.out.find("HYBRIDEP-NVL8-LARGE-EP") == std::string::npos);
}
