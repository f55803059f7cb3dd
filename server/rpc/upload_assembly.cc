#include "server/rpc/upload_assembly.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"

namespace spexd::server {

UploadAssembly::UploadAssembly(int64_t announced, int64_t reserve) : announced_(announced) {
  bytes_.reserve(static_cast<std::size_t>(std::max<int64_t>(0, std::min(announced, reserve))));
}

bool UploadAssembly::Append(absl::string_view chunk) {
  if (static_cast<int64_t>(chunk.size()) > announced_ - received()) return false;
  bytes_.append(chunk.data(), chunk.size());
  return true;
}

std::string UploadAssembly::Take() {
  std::string out = std::move(bytes_);
  bytes_.clear();
  announced_ = 0;
  return out;
}

UploadRateFloor::UploadRateFloor(double min_bytes_per_second, double window_seconds,
                                 Clock::time_point start)
    : rate_(min_bytes_per_second), window_(window_seconds), span_start_(start) {}

absl::Status UploadRateFloor::Check(int64_t received, int64_t announced, Clock::time_point now) {
  if (rate_ <= 0 || window_ <= 0) return absl::OkStatus();
  const double span = std::chrono::duration<double>(now - span_start_).count();
  if (span < window_) return absl::OkStatus();
  const int64_t got = received - span_bytes_;
  const double need = std::min(rate_ * span, static_cast<double>(announced - span_bytes_));
  if (static_cast<double>(got) < need) {
    return absl::DeadlineExceededError(absl::StrFormat(
        "upload too slow: %d bytes in the last %.1f s (%.0f bytes/s), under the server's "
        "floor of %.0f bytes/s (--upload_min_bytes_per_second); %d of %d bytes received",
        got, span, static_cast<double>(got) / span, rate_, received, announced));
  }
  span_start_ = now;
  span_bytes_ = received;
  return absl::OkStatus();
}

}  // namespace spexd::server
