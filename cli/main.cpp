// epo: plan, check, predict, run and calibrate expert-parallel communication overlap for MoE
// training. Exit codes: 0 ok, 1 runtime failure, 2 bad usage or input, 3 config rejected.
#include <cstdio>
#include <exception>

#include "cli/commands.hpp"
#include "model/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"epo: plan, validate, predict, run and calibrate MoE expert-parallel overlap"};
  app.require_subcommand(1);
  epo::cli::Runner run;
  epo::cli::add_plan(app, run);
  epo::cli::add_predict(app, run);
  epo::cli::add_validate(app, run);
  epo::cli::add_run(app, run);
  epo::cli::add_calibrate(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return e.get_exit_code() == 0 ? 0 : 2;
  }
  try {
    return run ? run() : 0;
  } catch (const epo::Error& e) {
    std::fprintf(stderr, "epo: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epo: error: %s\n", e.what());
    return 1;
  }
}
