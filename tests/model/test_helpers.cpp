#include "test_helpers.hpp"

#include "model/config_io.hpp"

namespace epo::test {

model::Config on_hardware(const char* model_name, int gpus, const char* hardware) {
  model::Config c;
  c.model_name = model_name;
  c.model = model::load_model_preset(model_name);
  c.hardware_name = hardware;
  c.hw = model::load_hardware_preset(hardware);
  c.num_gpus = gpus;
  c.opt.routing.kind = model::RoutingKind::balanced;
  return c;
}

namespace {
model::Config on_h100(const char* model_name, int gpus) { return on_hardware(model_name, gpus, "h100-sxm"); }
}  // namespace

model::Config tiny_config(int gpus) {
  model::Config c = on_h100("tiny", gpus);
  c.par.ep = gpus;
  c.par.seq_length = 1024;
  c.par.micro_batch_size = 1;
  c.par.global_batch_size = gpus;
  c.derive_and_check();
  return c;
}

model::Config qwen(int gpus, int tp, int cp, int ep, int mbs) {
  model::Config c = on_h100("qwen3-30b-a3b", gpus);
  c.par.tp = tp;
  c.par.cp = cp;
  c.par.ep = ep;
  c.par.sequence_parallel = tp > 1;
  c.par.micro_batch_size = mbs;
  c.par.global_batch_size = 64;
  c.par.seq_length = 4096;
  c.derive_and_check();
  return c;
}

const model::Component* component(const model::OpCost& op, const std::string& full_name) {
  for (const auto& c : op.parts)
    if (c.full_name() == full_name) return &c;
  return nullptr;
}

}  // namespace epo::test
