// epo validate: every rule Megatron-Core, Megatron-LM, Megatron-Bridge, DeepEP, HybridEP and TE
// apply to the configuration, all violations at once with id, fix and source. Exit 3 on any
// error, 0 otherwise (warnings only). --example prints a known-good configuration per dispatcher.
#include <cstdio>
#include <memory>

#include "cli/commands.hpp"
#include "cli/config_flags.hpp"
#include "cli/planner_flags.hpp"
#include "planner/emit.hpp"
#include "planner/examples.hpp"
#include "planner/validation.hpp"

namespace epo::cli {

namespace {

struct ValidateArgs {
  ConfigFlags cfg;
  ContextFlags ctx;
  std::string example;
};

int report(const model::Config& c, const planner::ValidationContext& ctx) {
  const auto v = planner::validate(c, ctx);
  int errors = 0, warnings = 0;
  for (const auto& x : v) (x.severity == planner::Severity::error ? errors : warnings)++;
  std::printf("%s", planner::format_violations(v).c_str());
  std::printf("%s%d error(s), %d warning(s) for %s on %d x %s (%s, Megatron %s, TE %s)\n",
              v.empty() ? "" : "\n", errors, warnings, c.model_name.c_str(), c.num_gpus,
              c.hardware_name.c_str(), planner::to_string(ctx.frontend),
              planner::to_string(ctx.megatron), planner::to_string(ctx.te).c_str());
  return errors > 0 ? 3 : 0;
}

int run_validate(ValidateArgs& a) {
  const auto ctx = build_context(a.ctx, a.cfg);
  if (!a.example.empty()) {
    const model::Config c = planner::example_config(a.example);
    std::printf("Example '%s': minimal working configuration with overlap on\n\n",
                a.example.c_str());
    std::printf("%s\n", planner::emit_bridge(c, ctx).c_str());
    std::printf("%s\n", emit_mlm_with_model(c, ctx).c_str());
    std::printf("%s\n", planner::emit_env(c, ctx).c_str());
    return report(c, ctx);
  }
  return report(build_config(a.cfg), ctx);
}

}  // namespace

void add_validate(CLI::App& app, Runner& run) {
  auto args = std::make_shared<ValidateArgs>();
  auto* sub = app.add_subcommand(
      "validate", "check a configuration against Megatron's rules (exit 3 when any error)");
  add_config_flags(*sub, args->cfg);
  add_context_flags(*sub, args->ctx);
  sub->add_option("--example", args->example,
                  "print the minimal working configuration: alltoall|flex-deepep|flex-hybridep");
  sub->callback([&run, args] { run = [args] { return run_validate(*args); }; });
}

}  // namespace epo::cli
