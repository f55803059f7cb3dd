// A one-line progress bar on stderr, drawn only when stderr is a terminal.
#ifndef SPEXD_CLIENT_PROGRESS_BAR_H_
#define SPEXD_CLIENT_PROGRESS_BAR_H_

#include <string>

namespace spexd::client {

class ProgressBar {
 public:
  ProgressBar(std::string label, int total, bool enabled);
  ~ProgressBar();
  void Update(int done);
  void Finish();

 private:
  std::string label_;
  int total_;
  bool enabled_;
  bool finished_ = false;
};

}  // namespace spexd::client

#endif  // SPEXD_CLIENT_PROGRESS_BAR_H_
