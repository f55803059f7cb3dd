// Assembles an upload (an image in ExtractFrame, a PSF in LoadPsf) from its stream of
// chunks against the size its header announced. Beyond an optional reservation, the
// buffer grows with the bytes that arrive, not with the announcement (a header may
// announce a gigabyte and send nothing).
#ifndef SPEXD_SERVER_UPLOAD_ASSEMBLY_H_
#define SPEXD_SERVER_UPLOAD_ASSEMBLY_H_

#include <cstdint>
#include <string>

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

}  // namespace spexd::server

#endif  // SPEXD_SERVER_UPLOAD_ASSEMBLY_H_
