#include "test_helpers.hpp"

#include "model/config_io.hpp"

namespace epo::test {

model::Config tiny_config(int gpus) {
  model::Config c;
  c.model_name = "tiny";
  c.model = model::load_model_preset("tiny");
  c.hardware_name = "h100-sxm";
  c.hw = model::load_hardware_preset("h100-sxm");
  c.num_gpus = gpus;
  c.par.ep = gpus;
  c.par.seq_length = 1024;
  c.par.micro_batch_size = 1;
  c.par.global_batch_size = gpus;
  c.opt.routing.kind = model::RoutingKind::balanced;
  c.derive_and_check();
  return c;
}

model::Config qwen(int gpus, int tp, int cp, int ep, int mbs) {
  model::Config c;
  c.model_name = "qwen3-30b-a3b";
  c.model = model::load_model_preset("qwen3-30b-a3b");
  c.hardware_name = "h100-sxm";
  c.hw = model::load_hardware_preset("h100-sxm");
  c.num_gpus = gpus;
  c.par.tp = tp;
  c.par.cp = cp;
  c.par.ep = ep;
  c.par.sequence_parallel = tp > 1;
  c.par.micro_batch_size = mbs;
  c.par.global_batch_size = 64;
  c.par.seq_length = 4096;
  c.opt.routing.kind = model::RoutingKind::balanced;
  c.derive_and_check();
  return c;
}

}  // namespace epo::test
