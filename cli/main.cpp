// epo: plan, check, predict, run and calibrate expert-parallel communication overlap for MoE
// training. Exit codes: 0 ok, 1 runtime failure, 2 bad usage or input, 3 config rejected.
#include <cstdio>
#include <exception>
#include <new>

#include "cli/commands.hpp"
#include "model/error.hpp"

int main(int argc, char** argv) {
  CLI::App app{"epo: plan, validate, predict, run and calibrate MoE expert-parallel overlap"};
  app.require_subcommand(1);
  epo::cli::Runner run;
  epo::cli::add_plan(app, run);
  epo::cli::add_predict(app, run);
  epo::cli::add_validate(app, run);
  epo::cli::add_check_log(app, run);
  epo::cli::add_diff(app, run);
  epo::cli::add_run(app, run);
  epo::cli::add_calibrate(app, run);
  epo::cli::add_report(app, run);
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
  // Every exception ends here as an error line and an exit code, never std::terminate: input
  // errors 2, rule rejections 3, everything else (out of memory included) a runtime failure, 1.
  try {
    return run ? run() : 0;
  } catch (const epo::Error& e) {
    std::fprintf(stderr, "epo: error: %s\n", e.what());
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "epo: error: out of memory (the inputs ask for more memory than this "
                         "machine has)\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epo: error: %s\n", e.what());
    return 1;
  } catch (...) {
    std::fprintf(stderr, "epo: error: unknown failure\n");
    return 1;
  }
}
