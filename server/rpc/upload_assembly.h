// Assembles an upload (an image in ExtractFrame, a PSF in LoadPsf) from its stream of
// chunks against the size its header announced. Beyond an optional reservation, the
// buffer grows with the bytes that arrive, not with the announcement (a header may
// announce a gigabyte and send nothing).
#ifndef SPEXD_SERVER_UPLOAD_ASSEMBLY_H_
#define SPEXD_SERVER_UPLOAD_ASSEMBLY_H_

#include <chrono>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace spexd::server {

class UploadAssembly {
 public:
  // A DESI preproc file is 140-170 MB: an image upload reserves this much at most.
  static constexpr int64_t kImageReserve = int64_t{256} << 20;

  UploadAssembly() = default;
  // `announced` > 0: the caller has checked it against its limits. min(announced,
  // `reserve`) bytes are reserved up front.
  explicit UploadAssembly(int64_t announced, int64_t reserve = 0);

  // Appends `chunk` unless it would run past the announced size; then nothing is
  // appended and the result is false (the caller fails the call).
  bool Append(absl::string_view chunk);
  bool complete() const { return received() == announced_; }
  int64_t received() const { return static_cast<int64_t>(bytes_.size()); }
  int64_t announced() const { return announced_; }
  // The assembled bytes (the assembly is empty afterwards).
  std::string Take();

 private:
  int64_t announced_ = 0;
  std::string bytes_;
};

// The minimum rate of an upload. --upload_idle_seconds alone lets a
// client hold an upload slot for ever by sending a byte (or an empty chunk) now and then.
// Each span of at least `window` since the last passed check must bring
// rate x span bytes, or what is left of the upload if that is less. Checked when a
// message arrives (a client that sends nothing is the idle timeout's). Empty chunks
// bring nothing, so they are no progress.
class UploadRateFloor {
 public:
  using Clock = std::chrono::steady_clock;
  UploadRateFloor() = default;
  // `min_bytes_per_second` or `window_seconds` <= 0: no floor.
  UploadRateFloor(double min_bytes_per_second, double window_seconds, Clock::time_point start);

  // After `received` of `announced` bytes at `now`: OK, or DEADLINE_EXCEEDED (the
  // server's time bound for the upload ran out) naming the flag and the rate seen.
  absl::Status Check(int64_t received, int64_t announced, Clock::time_point now);

 private:
  double rate_ = 0;
  double window_ = 0;
  Clock::time_point span_start_{};
  int64_t span_bytes_ = 0;  // received when the span started
};

}  // namespace spexd::server

#endif  // SPEXD_SERVER_UPLOAD_ASSEMBLY_H_
