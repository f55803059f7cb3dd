#include "core/base/error_text.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace spexd::core {

std::string EchoValue(absl::string_view value, std::size_t max_chars) {
  const bool cut = value.size() > max_chars;
  std::string out = absl::CHexEscape(value.substr(0, max_chars));
  if (cut) absl::StrAppend(&out, "...(", value.size(), " bytes)");
  return out;
}

}  // namespace spexd::core
