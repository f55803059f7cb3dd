#include "core/io/gzip_name.h"

#include "absl/strings/match.h"

namespace spexd::core {

bool IsGzipName(absl::string_view name) { return absl::EndsWith(name, ".gz"); }

}  // namespace spexd::core
