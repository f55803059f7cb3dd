#include "core/backend/module_identity.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/boundary_checksum.h"  // generated: SPEXD_BOUNDARY_CHECKSUM

#ifndef SPEXD_BUILD_ID
#error "SPEXD_BUILD_ID must be defined by the build (core/CMakeLists.txt)"
#endif

namespace spexd::core {

const BuildIdentity& ThisBuild() {
  static const BuildIdentity* identity =
      new BuildIdentity{SPEXD_BUILD_ID, SPEXD_BOUNDARY_CHECKSUM};
  return *identity;
}

absl::Status CheckSameBuild(const BuildIdentity& mine, const BuildIdentity& other,
                            absl::string_view other_name) {
  if (mine.build_id == other.build_id && mine.boundary_checksum == other.boundary_checksum) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the CUDA module and the ", other_name, " are not the same build (module: build '",
      mine.build_id, "', boundary checksum ", mine.boundary_checksum, "; ", other_name,
      ": build '", other.build_id, "', boundary checksum ", other.boundary_checksum,
      "); rebuild both, or install both with the same `cmake --install`"));
}

void CopyMessage(absl::string_view message, char* buffer, std::size_t size) {
  if (buffer == nullptr || size == 0) return;
  const std::size_t n = std::min(message.size(), size - 1);
  std::memcpy(buffer, message.data(), n);
  buffer[n] = '\0';
}

}  // namespace spexd::core
