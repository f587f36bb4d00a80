// The rule cases: for each rule, a change to the alltoall example that violates it and a close
// one that does not. The cases live per rule family (rule_cases_*.cpp); the config edits they
// share are here.
#include "rule_cases_detail.hpp"

using namespace epo;
using namespace epo::planner;
using model::Config;
using model::CudaGraphImpl;
using model::Dispatcher;
using model::FlexBackend;

namespace epo::planner::test {

void flex(Config& c, FlexBackend b) {
  c.opt.dispatcher = Dispatcher::flex;
  c.opt.flex_backend = b;
}
void relayout(Config& c, int gpus, int tp, int pp, int vpp, int ep, int gbs) {
  c.num_gpus = gpus;
  c.par.tp = tp;
  c.par.pp = pp;
  c.par.vpp = vpp;
  c.par.ep = ep;
  c.par.sequence_parallel = tp > 1;
  c.par.global_batch_size = gbs;
  c.derive_and_check();
}
void graphs(Config& c, std::vector<std::string> modules) {
  c.opt.cuda_graph_impl = CudaGraphImpl::transformer_engine;
  c.opt.cuda_graph_modules = std::move(modules);
}
void no_overlap(Config& c) {
  c.opt.overlap_moe_expert_parallel_comm = false;
  c.opt.delay_wgrad_compute = false;
}
void hardware(Config& c, const char* name) {
  c.hardware_name = name;
  c.hw = model::load_hardware_preset(name);
}

std::vector<RuleCase> rule_cases() {
  std::vector<RuleCase> cases = mcore_rule_cases();
  for (auto family : {frontend_rule_cases, backend_rule_cases, layer_rule_cases}) {
    std::vector<RuleCase> more = family();
    cases.insert(cases.end(), more.begin(), more.end());
  }
  return cases;
}

}  // namespace epo::planner::test
