// Compares two FITS files' bytes record by record (80-byte cards); only CHECKSUM and
// DATASUM cards may differ (they may carry a time stamp in their comment).
#ifndef SPEXD_TESTS_LOAD_FITS_RECORDS_H_
#define SPEXD_TESTS_LOAD_FITS_RECORDS_H_

#include <string>

namespace spexd::testing {

inline bool SameFitsRecords(const std::string& a, const std::string& b) {
  if (a.empty() || a.size() != b.size() || a.size() % 2880 != 0) return false;
  for (std::size_t off = 0; off < a.size(); off += 80) {
    if (a.compare(off, 80, b, off, 80) == 0) continue;
    const std::string key = a.substr(off, 8);
    if ((key != "CHECKSUM" && key != "DATASUM ") || key != b.substr(off, 8)) return false;
  }
  return true;
}

}  // namespace spexd::testing

#endif  // SPEXD_TESTS_LOAD_FITS_RECORDS_H_
