// Whether a FITS file already on disk is the file about to be written again (a retried
// request whose first reply was lost, docs/service.md "A retry gets the same answer"),
// the checksum dates aside: CFITSIO stamps the comment of every CHECKSUM and DATASUM card
// with the time of writing, and CHECKSUM's value covers its header, so two writes of the
// same frame differ in those cards and nowhere else (scripts/frames_identical.py). For a
// gzip-compressed file (a .gz name) the inflated contents are compared: the compressed
// bytes differ with those dates.
//
// The comparison streams: the stored file is fed in pieces as it is read, inflated
// piece by piece, and never held whole, so an existing file of any size (or a gzip bomb)
// costs at most the expected file's length in reading before it is found different.
#ifndef SPEXD_CORE_IO_FITS_SAME_CONTENT_H_
#define SPEXD_CORE_IO_FITS_SAME_CONTENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace spexd::core {

class StoredFitsComparer {
 public:
  // `expected`: the uncompressed FITS file about to be written, in order (borrowed: the
  // pieces outlive this object). Its headers locate the CHECKSUM and DATASUM cards:
  // CHECKSUM's value and comment, and DATASUM's comment, are not compared (the keywords
  // and DATASUM's value are). `gzip`: the stored file is gzip-compressed. `name` is for
  // messages. INVALID_ARGUMENT when `expected`'s headers cannot be walked (not FITS).
  static absl::StatusOr<std::unique_ptr<StoredFitsComparer>> Create(
      std::vector<absl::string_view> expected, bool gzip, std::string name);
  ~StoredFitsComparer();
  StoredFitsComparer(const StoredFitsComparer&) = delete;
  StoredFitsComparer& operator=(const StoredFitsComparer&) = delete;

  // Whether a stored file of `bytes` can hold the expected file at all: a plain file must
  // have its length; a gzip file may not be much larger (deflate's worst case adds about
  // 0.03 %, and gzip's framing a few bytes). False settles it before any read.
  bool SizeCanMatch(int64_t bytes) const;
  // The stored file's next bytes, as read from disk. False once the file is known to
  // differ (a byte outside the skipped card parts, more bytes than expected, corrupt
  // gzip data); every later call then returns false too.
  bool Feed(absl::string_view stored);
  // After the last Feed: true when the stored file is the expected one, whole.
  bool Finish();
  // Why the file differs, for logs ("" while it does not).
  const std::string& difference() const { return difference_; }
  int64_t expected_size() const { return size_; }

 private:
  struct Inflate;
  StoredFitsComparer() = default;
  // Compares the next uncompressed bytes.
  bool Compare(absl::string_view bytes);
  bool Differ(std::string why);

  std::vector<absl::string_view> pieces_;
  std::vector<int64_t> piece_start_;
  struct Skip {
    int64_t begin = 0, end = 0;
  };
  std::vector<Skip> skips_;  // ascending, disjoint
  int64_t size_ = 0;
  int64_t pos_ = 0;        // uncompressed bytes compared so far
  std::size_t piece_ = 0;  // the piece holding pos_
  std::size_t skip_ = 0;   // the first skip not wholly before pos_
  std::unique_ptr<Inflate> inflate_;  // null for a plain file
  bool differs_ = false;
  std::string difference_;
  std::string name_;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_IO_FITS_SAME_CONTENT_H_
