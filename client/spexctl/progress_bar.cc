#include "client/spexctl/progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace spexd::client {

ProgressBar::ProgressBar(std::string label, int total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled && isatty(STDERR_FILENO)) {
  Update(0);
}

ProgressBar::~ProgressBar() { Finish(); }

void ProgressBar::Update(int done) {
  if (!enabled_ || total_ <= 0) return;
  constexpr int kWidth = 30;
  int filled = done * kWidth / total_;
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(kWidth, ' ');
  std::fprintf(stderr, "\r%s [%s] %d/%d", label_.c_str(), bar.c_str(), done, total_);
  std::fflush(stderr);
}

void ProgressBar::Finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  std::fprintf(stderr, "\n");
}

}  // namespace spexd::client
