// A file's bytes laid out in memory ahead and filled in any order (a frame file written
// bundle by bundle), compressed into one standard gzip member while they are filled: the
// image is cut into chunks of at most kGzipChunkBytes, also at the given cuts (where bytes
// final at different times meet, such as a FITS header written last before its data
// written early), and a chunk is deflated (DeflateGzipChunk) as soon as every byte of it
// is final, so that after the last byte only the chunks that were not, the tail, the
// CRC-32 combine and the write are left.
#ifndef SPEXD_CORE_IO_INTERNAL_GZIP_IMAGE_H_
#define SPEXD_CORE_IO_INTERNAL_GZIP_IMAGE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "core/base/task_pool.h"
#include "core/io/internal/gzip.h"

namespace spexd::core {

class GzipImage {
 public:
  // `image` (borrowed, its size fixed) is read only once its bytes are declared final.
  // `cuts`: offsets where a chunk must start (any order; 0, the image's end and offsets
  // outside it are ignored).
  explicit GzipImage(absl::string_view image, std::size_t chunk_bytes = kGzipChunkBytes,
                     std::vector<int64_t> cuts = {});

  // Declares image bytes [offset, offset + n) final: they no longer change. Each byte once;
  // INTERNAL for a range outside the image or declared again.
  absl::Status Final(int64_t offset, int64_t n);
  // Deflates the chunks made final since the last call, on up to `workers` threads of
  // `pool` (ParallelFor's rules). One call at a time, never beside Final.
  absl::Status CompressReady(TaskPool* pool, int workers);
  // Once every byte of the image is final: deflates what is left and `tail` (bytes that
  // follow the image in the file: copied), writes the member to `fd` from offset 0
  // (`name` in errors). The member's final block ends the tail's last chunk (an empty one
  // when there is no tail), so that every image chunk can be deflated before.
  absl::Status Finish(absl::string_view tail, TaskPool* pool, int workers, int fd,
                      absl::string_view name);
  // Finish in two steps: the member made whole in memory (pieces() complete), then written
  // (once, after Seal), so that a caller can read the pieces beside the write.
  absl::Status Seal(absl::string_view tail, TaskPool* pool, int workers, absl::string_view name);
  absl::Status Write(int fd, absl::string_view name) const;

  // The member's bytes in order (header, chunks, trailer), after Seal: as written.
  std::vector<absl::string_view> pieces() const;
  int64_t size() const;
  // Chunks deflated before Finish, and by it (how much of the work the filling hid).
  int early_chunks() const { return early_; }
  int late_chunks() const { return late_; }
  int64_t late_bytes() const { return late_bytes_; }  // what Finish deflated, uncompressed

  GzipImage(const GzipImage&) = delete;
  GzipImage& operator=(const GzipImage&) = delete;

 private:
  absl::Status Deflate(const std::vector<std::size_t>& which, TaskPool* pool, int workers);

  absl::string_view image_;
  std::size_t chunk_bytes_;
  std::vector<int64_t> starts_;       // per image chunk: its first byte; then the image's end
  std::vector<GzipChunk> chunks_;     // the image's, then the tail's
  std::vector<int64_t> pending_;      // per image chunk: bytes not yet final
  std::vector<std::size_t> ready_;    // final, not yet deflated
  std::string tail_;
  GzipMemberEnds ends_{};
  bool finished_ = false;  // Seal has begun: no more Final
  bool sealed_ = false;    // the member is whole
  int early_ = 0, late_ = 0;
  int64_t late_bytes_ = 0;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_IO_INTERNAL_GZIP_IMAGE_H_
