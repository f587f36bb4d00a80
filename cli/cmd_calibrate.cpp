// epo calibrate (lands with its issue).
#include <cstdio>

#include "cli/commands.hpp"

namespace epo::cli {

void add_calibrate(CLI::App& app, Runner& run) {
  auto* sub = app.add_subcommand("calibrate", "not built yet");
  sub->callback([&run] {
    run = [] {
      std::fprintf(stderr, "epo: 'calibrate' is not available in this build yet\n");
      return 1;
    };
  });
}

}  // namespace epo::cli
