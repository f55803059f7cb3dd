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
#include <memory>
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
  // Waits for the chunks being deflated (they read the image); those still queued on a
  // pool are then skipped.
  ~GzipImage();

  // Declares image bytes [offset, offset + n) final: they no longer change. Each byte once;
  // INTERNAL for a range outside the image or declared again.
  absl::Status Final(int64_t offset, int64_t n);
  // Starts deflating the chunks made final since the last call, each a task of its own on
  // `pool` (here, at once, without one), and returns: the caller that fills the image
  // goes on while the chunks deflate on whatever threads are free. Their errors come
  // from Seal. Never beside Final or another call.
  void CompressReady(TaskPool* pool);
  // Once every byte of the image is final: deflates what is left and `tail` (bytes that
  // follow the image in the file: copied), writes the member to `fd` from offset 0
  // (`name` in errors). The member's final block ends the tail's last chunk (an empty one
  // when there is no tail), so that every image chunk can be deflated before.
  absl::Status Finish(absl::string_view tail, TaskPool* pool, int workers, int fd,
                      absl::string_view name);
  // Finish in two steps: the member made whole in memory (pieces() complete), then written
  // (once, after Seal), so that a caller can read the pieces beside the write. Seal
  // deflates, on up to `workers` threads of `pool` (ParallelFor's rules), every chunk whose
  // task has not started yet, and waits for those that have.
  absl::Status Seal(absl::string_view tail, TaskPool* pool, int workers, absl::string_view name);
  absl::Status Write(int fd, absl::string_view name) const;

  // The member's bytes in order (header, chunks, trailer), after Seal: as written.
  std::vector<absl::string_view> pieces() const;
  int64_t size() const;
  // Chunks deflated before Seal, and by it (how much of the work the filling hid), and the
  // uncompressed bytes Seal deflated. After Seal.
  int early_chunks() const { return early_; }
  int late_chunks() const { return late_; }
  int64_t late_bytes() const { return late_bytes_; }

  GzipImage(const GzipImage&) = delete;
  GzipImage& operator=(const GzipImage&) = delete;

 private:
  // What the chunks' tasks share with this object: a task outlives it when it was still
  // queued at the destructor (it finds its chunk claimed and does nothing).
  struct Work;
  // Deflates chunk i of `w` into it (a failure: w.status, the first one kept).
  static void DeflateInto(Work& w, std::size_t i, bool last);
  // A task's: DeflateInto an image chunk unless another has claimed it.
  static void DeflateClaimed(Work& w, std::size_t i);

  absl::string_view image_;
  std::size_t chunk_bytes_;
  std::vector<int64_t> starts_;       // per image chunk: its first byte; then the image's end
  std::vector<int64_t> pending_;      // per image chunk: bytes not yet final
  std::vector<std::size_t> ready_;    // final, not yet handed to CompressReady
  std::shared_ptr<Work> work_;
  GzipMemberEnds ends_{};
  bool finished_ = false;  // Seal has begun: no more Final
  bool sealed_ = false;    // the member is whole
  int early_ = 0, late_ = 0;
  int64_t late_bytes_ = 0;
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_IO_INTERNAL_GZIP_IMAGE_H_
