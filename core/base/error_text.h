// Bounded echo of request-supplied text in error messages and logs (a
// 1 MB psf_id echoed back made the status too large for gRPC's metadata limit).
#ifndef SPEXD_CORE_ERROR_TEXT_H_
#define SPEXD_CORE_ERROR_TEXT_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace spexd::core {

inline constexpr std::size_t kMaxEchoChars = 120;

// `value` with non-printable bytes escaped, cut to about `max_chars` characters; a cut
// value ends with "...(N bytes)" giving the original length.
std::string EchoValue(absl::string_view value, std::size_t max_chars = kMaxEchoChars);

}  // namespace spexd::core

#endif  // SPEXD_CORE_ERROR_TEXT_H_
