// Which build a binary comes from, so that the dlopen()ed CUDA module and the executable
// that loads it can refuse to pair unless they are the same build: C++ objects (Backend,
// BackendOptions, ExtractionJob, Geometry, ...) cross that boundary as they are.
#ifndef SPEXD_CORE_MODULE_IDENTITY_H_
#define SPEXD_CORE_MODULE_IDENTITY_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace spexd::core {

struct BuildIdentity {
  // Version, git commit, compiler and a token drawn once per build directory at
  // configure time: two build directories never share it.
  std::string build_id;
  // SHA-256 of the core headers that cuda/ includes, directly or not (every type that
  // crosses the boundary is declared there; cmake/BoundaryChecksum.cmake), recomputed at
  // build time whenever one changes: a module left over from before a layout change no
  // longer matches.
  std::string boundary_checksum;
};

// The identity compiled into this binary (the executable's, or the module's own copy of
// spexd_core).
const BuildIdentity& ThisBuild();

// OK when `other` (described as `other_name`, e.g. "host spexd") is the same build as
// `mine`; otherwise FAILED_PRECONDITION naming both identities and what to do.
absl::Status CheckSameBuild(const BuildIdentity& mine, const BuildIdentity& other,
                            absl::string_view other_name);

// Copies `message` into a C buffer of `size` bytes, always terminated (module C ABI).
void CopyMessage(absl::string_view message, char* buffer, std::size_t size);

}  // namespace spexd::core

#endif  // SPEXD_CORE_MODULE_IDENTITY_H_
