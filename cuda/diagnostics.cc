#include "cuda/diagnostics.h"

#include <cstdlib>
#include <string>

namespace spexd::cuda {
namespace {

bool Off(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == "0";
}

}  // namespace

Diagnostics DiagnosticsFromEnvironment() {
  Diagnostics d;
  d.timeline = std::getenv("SPEXD_CUDA_TIMELINE") != nullptr;
  d.upload_split = !Off("SPEXD_CUDA_UPLOAD_SPLIT");
  d.prefault = !Off("SPEXD_CUDA_PREFAULT");
  if (const char* e = std::getenv("SPEXD_CUDA_BATCH_PLAN")) {
    for (const char* p = e; *p != 0;) {
      char* end = nullptr;
      const long v = std::strtol(p, &end, 10);
      if (end == p) break;
      d.batch_plan.push_back(static_cast<int>(v));
      p = *end == ',' ? end + 1 : end;
    }
  }
  return d;
}

}  // namespace spexd::cuda
