// One HDU header read record by record with the card rules CFITSIO applies: the name of a
// card is its first 8 columns, a value follows "= " in columns 9-10, the first card of a
// name gives its value, and the data size follows from BITPIX, NAXIS, NAXISn (exact names),
// PCOUNT and GCOUNT as CFITSIO sizes an HDU. Shared by the walk made before CFITSIO opens a
// file (fits_layout.cc) and the check of a .fits.gz as it inflates (fits_stream_check.cc),
// so that a .fits.gz is read exactly as its plain twin.
#ifndef SPEXD_CORE_IO_INTERNAL_FITS_HEADER_H_
#define SPEXD_CORE_IO_INTERNAL_FITS_HEADER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spexd::core::internal {

inline constexpr std::int64_t kFitsRecordBytes = 2880;  // FITS standard §3.1
inline constexpr std::size_t kFitsCardBytes = 80;

// The most records one header may take: 80 (2880 cards, 230,400 bytes). DESI's largest
// headers hold a few hundred cards (a preproc IMAGE header, which carries the raw
// exposure's; a FIBERMAP's column cards; a PSF table's, ~150), so a real file never comes
// near it; a header whose END never comes (a gigabyte of COMMENT cards compresses to a few
// MB) is refused after 230 KB instead of being read or inflated to the file limit.
inline constexpr std::int64_t kMaxHeaderRecords = 80;
inline constexpr std::int64_t kMaxHeaderCards =
    kMaxHeaderRecords * kFitsRecordBytes / static_cast<std::int64_t>(kFitsCardBytes);

class FitsHeader {
 public:
  explicit FitsHeader(std::int64_t start = 0) : start_(start) {}

  // Adds the header's next record (kFitsRecordBytes bytes at byte `at` of the file); true
  // once the header holds its END card (the cards after it are padding). INVALID_ARGUMENT,
  // with a message that names neither file nor HDU, for a byte that is not printable ASCII,
  // a card that CFITSIO would name or value otherwise than these rules when that card
  // decides the layout, or a header without END in its first kMaxHeaderRecords records.
  absl::StatusOr<bool> AddRecord(absl::string_view record, std::int64_t at);

  std::int64_t start() const { return start_; }
  // Where the data begin (once END has been added).
  std::int64_t data_start() const { return data_start_; }

  // The value field (columns 11-80) of the first "KEY = " card of `key`; null when none.
  const std::string* Find(const std::string& key) const;
  // `key`'s first card as an integer in [lo, hi]; INVALID_ARGUMENT when absent or not.
  absl::StatusOr<std::int64_t> Int(const std::string& key, std::int64_t lo, std::int64_t hi) const;
  // The last card of `key` as an integer in [lo, hi]; `absent` when there is none.
  absl::StatusOr<std::int64_t> LastInt(const std::string& key, std::int64_t absent, std::int64_t lo,
                                       std::int64_t hi) const;
  // A string value without its quotes and trailing blanks ("" when absent).
  std::string String(const std::string& key) const;
  // Whether `key`'s value is the logical T.
  bool Logical(const std::string& key) const;

  const std::map<std::string, std::string>& values() const { return values_; }
  // Names of "KEY = " cards seen more than once, in order.
  const std::vector<std::string>& repeated() const { return repeated_; }

 private:
  std::int64_t start_ = 0, data_start_ = 0;
  std::int64_t records_ = 0;
  std::map<std::string, std::string> values_;  // first card of a name
  std::map<std::string, std::string> last_;    // last card of a name
  std::vector<std::string> repeated_;
};

// `value` (a card's value field) as an integer in [lo, hi]; INVALID_ARGUMENT naming `key`.
absl::StatusOr<std::int64_t> CardIntIn(const std::string& key, absl::string_view value,
                                       std::int64_t lo, std::int64_t hi);

// The size of an HDU's data as CFITSIO computes it (FITS 4.0 §4.4.1.1: |BITPIX|/8 x
// GCOUNT x (PCOUNT + NAXIS1 x ... x NAXISn); random groups skip NAXIS1 = 0; a primary or
// image HDU takes the last PCOUNT and GCOUNT cards wherever they stand, 0 and 1 when absent).
struct HduSize {
  std::string xtension;  // "" for the primary HDU
  bool table = false;    // TABLE, BINTABLE (and A3DTABLE, 3DTABLE): CFITSIO's tables
  std::int64_t naxis = 0;
  std::int64_t bytes = 0;  // over `limit`: limit + 1
};
// INVALID_ARGUMENT (no file or HDU named) for a missing or malformed structural keyword.
absl::StatusOr<HduSize> HduDataSize(const FitsHeader& h, bool primary, std::int64_t limit);

// The product of `key`first..`key`n (each a non-negative integer), saturated at limit + 1;
// 0 when n is 0.
absl::StatusOr<std::int64_t> AxesProduct(const FitsHeader& h, const std::string& key,
                                         std::int64_t n, std::int64_t limit, std::int64_t first = 1);

}  // namespace spexd::core::internal

#endif  // SPEXD_CORE_IO_INTERNAL_FITS_HEADER_H_
