#include "core/io/internal/fits_card_value.h"

#include "absl/strings/ascii.h"

namespace spexd::core::internal {

std::optional<std::int64_t> CardInteger(absl::string_view field) {
  absl::string_view v = absl::StripLeadingAsciiWhitespace(field);
  const std::size_t slash = v.find('/');
  if (slash != absl::string_view::npos) v = v.substr(0, slash);
  v = absl::StripTrailingAsciiWhitespace(v);
  bool negative = false;
  if (!v.empty() && (v[0] == '+' || v[0] == '-')) {
    negative = v[0] == '-';
    v.remove_prefix(1);
  }
  if (v.empty() || v.size() > 18) return std::nullopt;
  std::int64_t n = 0;
  for (char c : v) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return negative ? -n : n;
}

std::string CardString(absl::string_view field) {
  absl::string_view v = absl::StripLeadingAsciiWhitespace(field);
  if (v.empty() || v[0] != '\'') return "";
  v.remove_prefix(1);
  const std::size_t end = v.find('\'');
  return std::string(absl::StripTrailingAsciiWhitespace(v.substr(0, end)));
}

bool CardIsTrue(absl::string_view field) {
  absl::string_view v = absl::StripLeadingAsciiWhitespace(field);
  return !v.empty() && v[0] == 'T';
}

}  // namespace spexd::core::internal
