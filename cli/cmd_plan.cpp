// epo plan (lands with its issue).
#include <cstdio>

#include "cli/commands.hpp"

namespace epo::cli {

void add_plan(CLI::App& app, Runner& run) {
  auto* sub = app.add_subcommand("plan", "not built yet");
  sub->callback([&run] {
    run = [] {
      std::fprintf(stderr, "epo: 'plan' is not available in this build yet\n");
      return 1;
    };
  });
}

}  // namespace epo::cli
