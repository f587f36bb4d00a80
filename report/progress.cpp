#include "report/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace epo::report {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void clear_line() {
  std::fprintf(stderr, "\r%79s\r", "");
  std::fflush(stderr);
}

}  // namespace

bool progress_enabled(bool forced) {
  return forced || isatty(fileno(stderr)) == 1;
}

ProgressLine::ProgressLine(bool enabled, std::string what, double delay_s)
    : enabled_(enabled),
      what_(std::move(what)),
      delay_s_(delay_s),
      t0_(std::chrono::steady_clock::now()),
      last_(t0_) {}

ProgressLine::~ProgressLine() {
  finish();
}

void ProgressLine::update(long long done, long long total, const std::string& note) {
  if (!enabled_) return;
  if (total > 0 && done >= total) {
    finish();
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  if (seconds_since(t0_) < delay_s_) return;
  if (shown_ && std::chrono::duration<double>(now - last_).count() < 0.1) return;
  last_ = now;
  shown_ = true;
  constexpr int kWidth = 30;
  const double f = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0.0;
  std::string bar(static_cast<size_t>(kWidth * f), '=');
  bar.resize(kWidth, ' ');
  std::string tail = note.size() > 30 ? note.substr(0, 29) + "~" : note;
  std::fprintf(stderr, "\r%s [%s] %3d %% %lld/%lld %-30s", what_.c_str(), bar.c_str(),
               static_cast<int>(100 * f), done, total, tail.c_str());
  std::fflush(stderr);
}

void ProgressLine::finish() {
  if (shown_) clear_line();
  shown_ = false;
}

std::function<void(long long, long long)> progress_callback(bool forced, const std::string& what) {
  if (!progress_enabled(forced)) return {};
  auto line = std::make_shared<ProgressLine>(true, what);
  return [line](long long done, long long total) { line->update(done, total); };
}

ProgressTicker::ProgressTicker(bool enabled, std::string what, double delay_s) {
  if (!enabled) return;
  thread_ = std::thread([this, what = std::move(what), delay_s] {
    const auto t0 = std::chrono::steady_clock::now();
    bool shown = false;
    while (!stop_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const double s = seconds_since(t0);
      if (s < delay_s || stop_.load()) continue;
      if (shown && static_cast<int>(s * 20) % 5 != 0) continue;  // four redraws a second
      shown = true;
      std::fprintf(stderr, "\r%s: %.1f s", what.c_str(), s);
      std::fflush(stderr);
    }
    if (shown) clear_line();
  });
}

ProgressTicker::~ProgressTicker() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

}  // namespace epo::report
