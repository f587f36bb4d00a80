#pragma once
// Progress of long work on stderr: one line rewritten in place, shown only when stderr is a
// terminal (or when asked for with --progress), only once the work has run for a while, and
// cleared when it ends, so that piped and JSON output never carry it. Library code takes a
// callback; only the command line prints.
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace epo::report {

/// Whether progress goes to stderr: `forced` (--progress), else when stderr is a terminal.
bool progress_enabled(bool forced);

/// A counted progress line: "what [=====     ] 42 % 420/1000 (note)".
class ProgressLine {
 public:
  /// Nothing is printed before `delay_s` seconds have passed, or at all when not `enabled`.
  ProgressLine(bool enabled, std::string what, double delay_s = 1.0);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;
  /// Redraws at most ten times a second; done >= total clears the line.
  void update(long long done, long long total, const std::string& note = {});
  /// Clears the line if one was drawn.
  void finish();

 private:
  bool enabled_;
  std::string what_;
  double delay_s_;
  std::chrono::steady_clock::time_point t0_, last_;
  bool shown_ = false;
};

/// The same as a callback (planner::SearchSpec::progress); empty when progress is off.
std::function<void(long long, long long)> progress_callback(bool forced, const std::string& what);

/// Work without a count (one long simulation): "what: 3.2 s" redrawn from a thread four times a
/// second until destroyed, after `delay_s`.
class ProgressTicker {
 public:
  ProgressTicker(bool enabled, std::string what, double delay_s = 1.0);
  ~ProgressTicker();
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace epo::report
