// RAII wrapper around a CFITSIO handle. Every error names the file (and HDU where
// relevant) so that a malformed input is reported, never crashed on.
#ifndef SPEXD_CORE_FITS_FILE_H_
#define SPEXD_CORE_FITS_FILE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include <fitsio.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/io/plane_buffer.h"


namespace spexd::core {

class FitsFile {
 public:
  // Opens an existing file read-only. CFITSIO decompresses .gz transparently.
  static absl::StatusOr<FitsFile> OpenRead(const std::string& path);
  // Opens a FITS image held in memory (e.g. an uploaded file). The bytes are copied,
  // so `data` need not outlive the FitsFile. `display_name` is used in error messages.
  static absl::StatusOr<FitsFile> OpenMemory(const void* data, std::size_t size,
                                             std::string display_name);
  // The same, taking ownership of the bytes (no copy: CFITSIO reads them in place).
  static absl::StatusOr<FitsFile> OpenMemory(std::string bytes, std::string display_name);
  // The same with the bytes in a block (e.g. a pooled one, given back when the file closes):
  // its size() bytes are the file; the block's spare capacity, when it has that of the
  // padding to whole 2880-byte records, saves a copy.
  static absl::StatusOr<FitsFile> OpenMemory(PlaneBuffer<char> bytes, std::string display_name);
  // Creates a new file at `path`, replacing any existing file.
  static absl::StatusOr<FitsFile> Create(const std::string& path);
  // Creates a new, empty FITS file in memory; see TakeMemory().
  static absl::StatusOr<FitsFile> CreateMemory(std::string display_name);

  FitsFile(FitsFile&& other) noexcept;
  FitsFile& operator=(FitsFile&& other) noexcept;
  FitsFile(const FitsFile&) = delete;
  FitsFile& operator=(const FitsFile&) = delete;
  ~FitsFile();

  // Flushes and closes; reports a write error that the destructor would swallow.
  absl::Status Close();

  fitsfile* get() const { return fptr_; }
  const std::string& name() const { return name_; }

  // Moves to the HDU with this EXTNAME (any HDU type). NOT_FOUND if absent.
  absl::Status MoveToHdu(absl::string_view extname);
  bool HasHdu(absl::string_view extname);
  // Number of HDUs in the file.
  absl::StatusOr<int> NumHdus();
  absl::Status MoveToHduIndex(int index0);

  // For a file opened for reading (OpenRead, OpenMemory): INVALID_ARGUMENT
  // ("truncated file") when the file ends before the data of the current HDU does.
  // CFITSIO does not always notice this itself: a read that runs into a partial last
  // record of an in-memory file can return stale buffer bytes.
  absl::Status CheckHduComplete();

  // Keywords of the current HDU. ReadX return NOT_FOUND for a missing key,
  // INVALID_ARGUMENT when present but not convertible.
  absl::StatusOr<double> ReadDouble(const char* key);
  absl::StatusOr<long> ReadLong(const char* key);
  absl::StatusOr<std::string> ReadString(const char* key);
  std::optional<double> ReadOptionalDouble(const char* key);
  std::optional<std::string> ReadOptionalString(const char* key);

  // Image of the current HDU: axis lengths in FITS order (NAXIS1 first) and the
  // equivalent BITPIX (after BSCALE/BZERO), e.g. USHORT_IMG for int16 + BZERO 32768.
  struct ImageInfo {
    std::vector<long> naxes;
    int equiv_bitpix = 0;
  };
  absl::StatusOr<ImageInfo> GetImageInfo();
  // Reads the whole image of the current HDU converted to T (double, float, int32_t,
  // uint16_t, int16_t, uint8_t). Row-major with NAXIS1 fastest.
  template <typename T>
  absl::StatusOr<std::vector<T>> ReadImage();

  // Where the current HDU's pixels lie, for a reader that converts them itself (in
  // parallel, core/io/internal/plane_decode.h): set only when all CFITSIO would do is byte-swap them,
  // i.e. a plain (not tile-compressed) 2-D image HDU of float32 or float64 pixels without
  // BSCALE/BZERO scaling, whose data lie within the file. nullopt for anything else (read
  // that with ReadImage).
  struct RawFloatImage {
    int bitpix = 0;           // -32 or -64 (big-endian IEEE, FITS 4.0 §5.3)
    int64_t data_offset = 0;  // of the first pixel, in the file as opened
    int64_t pixels = 0;
  };
  absl::StatusOr<std::optional<RawFloatImage>> GetRawFloatImage();

  // Thread-safe reads of the file's bytes (decompressed content for memory files),
  // independent of the CFITSIO handle, so that they may run on other threads while this
  // FitsFile is used: pread on a descriptor of its own for files on disk, the buffer
  // itself for memory files (which must outlive the RawBytes).
  class RawBytes {
   public:
    RawBytes(RawBytes&& other) noexcept;
    RawBytes& operator=(RawBytes&&) = delete;
    ~RawBytes();
    // `n` bytes at `offset`: a pointer into the memory file, or nullptr for a file on disk
    // (use Read).
    const char* Direct(int64_t offset, std::size_t n) const;
    // Copies `n` bytes at `offset` into `out`; INVALID_ARGUMENT ("truncated") when the
    // file ends first.
    absl::Status Read(int64_t offset, std::size_t n, char* out) const;

   private:
    friend class FitsFile;
    RawBytes(const std::string& name, int fd, const char* mem, int64_t size)
        : name_(name), fd_(fd), mem_(mem), size_(size) {}
    std::string name_;
    int fd_ = -1;
    const char* mem_ = nullptr;
    int64_t size_ = 0;
  };
  // FAILED_PRECONDITION for a file CFITSIO decompressed itself (OpenRead of a .gz: its
  // bytes on disk are not the FITS file) or one being written.
  absl::StatusOr<RawBytes> OpenRawBytes() const;
  // For a file opened on a block (OpenMemory of a PlaneBuffer): what keeps the block, and
  // so every pointer RawBytes::Direct gives, alive after the file closes
  // (PlaneBuffer::Part). Null for other files.
  std::shared_ptr<const void> SharedBytes() const;

  // The header cards of the current HDU (80-character records), without the
  // structural ones (SIMPLE, XTENSION, BITPIX, NAXISn, EXTEND, PCOUNT, GCOUNT,
  // TFIELDS, TTYPEn/TFORMn/TDIMn..., ZIMAGE/Z* compression cards, CHECKSUM, DATASUM, END).
  absl::StatusOr<std::vector<std::string>> ReadUserCards();

  // Appends a new image HDU with EXTNAME (the primary HDU if the file is empty).
  // T is double, float, int32_t, uint32_t, int16_t, int64_t or uint8_t.
  template <typename T>
  absl::Status WriteImage(absl::string_view extname, const std::vector<long>& naxes,
                          const T* data);
  // The same without writing the pixels: the header as WriteImage makes it, for a writer
  // that produces the data unit itself (core/frame/internal/fits_hdu_assembly.h).
  template <typename T>
  absl::Status CreateImage(absl::string_view extname, const std::vector<long>& naxes);
  // Writes raw header cards into the current HDU (skipping any that conflict with
  // structural keywords or EXTNAME).
  absl::Status WriteCards(const std::vector<std::string>& cards);
  absl::Status WriteKey(const char* key, const std::string& value, const char* comment);
  absl::Status WriteKey(const char* key, double value, const char* comment);
  absl::Status WriteKey(const char* key, long value, const char* comment);

  // Appends a copy of this file's current HDU (header and data, compressed or not) to
  // `dest`. When `dest` is empty and the current HDU is a table (tile-compressed
  // images included), `dest` first gets an empty primary HDU (NAXIS = 0) so that the
  // table lands in an extension; an image copied into an empty file becomes its primary.
  // `dest` is left positioned on the new HDU.
  absl::Status CopyCurrentHduTo(FitsFile& dest);

  // For files made by CreateMemory: closes the file and returns its bytes.
  absl::StatusOr<std::string> TakeMemory();
  // For files made by CreateMemory, left open: bytes [offset, offset + n) as written so
  // far (CFITSIO's buffers flushed first). OUT_OF_RANGE past the end of its buffer.
  absl::StatusOr<std::string> WrittenBytes(int64_t offset, int64_t n);

  // A status for a failing CFITSIO call: "<file>[<hdu>]: <what>: <cfitsio text>".
  absl::Status Error(int cfitsio_status, absl::string_view what) const;
  // A status with a message that names the file and current HDU.
  absl::Status Invalid(absl::string_view what) const;

 private:
  FitsFile(fitsfile* fptr, std::string name);
  std::string CurrentHduName() const;
  // The bytes of a memory file (nullptr for a file on disk).
  const char* MemoryData() const;
  absl::Status ReadKeyInto(int type, const char* key, void* value, absl::string_view problem);

  fitsfile* fptr_ = nullptr;
  std::string name_;
  // Size in bytes of a file opened for reading, as CFITSIO saw it at open time (after
  // decompression); CFITSIO later grows its own notion of the size when a read runs
  // past the end. -1 for files being written.
  long long opened_size_ = -1;
  // OpenRead of a file that is FITS on disk (not compressed): a descriptor of the file
  // opened with it (the path may be a /proc/self/fd link that is gone by the time the
  // pixels are read), for OpenRawBytes. -1 otherwise.
  int raw_fd_ = -1;
  // Memory files: CFITSIO owns a realloc()able buffer through these, or reads a string
  // that the MemBuffer owns.
  struct MemBuffer;
  MemBuffer* mem_ = nullptr;
  // Opens `mem` (taking it; freed on failure) as a read-only memory file of `true_size`
  // bytes before its padding to whole records.
  static absl::StatusOr<FitsFile> OpenMemBuffer(MemBuffer* mem, std::size_t true_size,
                                                std::string display_name);
};

}  // namespace spexd::core

#endif  // SPEXD_CORE_FITS_FILE_H_
