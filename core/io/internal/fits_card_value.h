// The value field of a FITS header card (columns 11-80 of a "KEY = " card), read as the
// FITS standard's fixed-format values (4.0 §4.2). Shared by the checks that walk headers
// before CFITSIO sees them (fits_layout.cc, compressed_hdu_check.cc), so that both read a
// card the same way.
#ifndef SPEXD_CORE_FITS_CARD_VALUE_H_
#define SPEXD_CORE_FITS_CARD_VALUE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace spexd::core::internal {

// An integer: an optional sign and 1 to 18 digits (which cannot overflow), then blanks or
// a comment ("/ ..."); nullopt for anything else (a real, a string, an empty field).
std::optional<std::int64_t> CardInteger(absl::string_view field);

// A quoted string's text, without its quotes and trailing blanks; "" when the field is not
// a quoted string.
std::string CardString(absl::string_view field);

// Whether the field is the logical T.
bool CardIsTrue(absl::string_view field);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_FITS_CARD_VALUE_H_
