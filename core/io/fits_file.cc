// FitsFile's handle: opening (on disk, in memory), creating, closing, moving between HDUs,
// and the errors that name the file and HDU. Reading keywords, pixels and cards is in
// fits_file_read.cc, writing them in fits_file_write.cc.
#include "core/io/fits_file.h"

#include <fcntl.h>
#include <fitsio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/io/internal/fits_file_internal.h"
#include "core/io/internal/fits_layout.h"
#include "core/base/status_macros.h"

namespace spexd::core {
namespace internal {

std::string CfitsioText(int status) {
  char text[FLEN_STATUS] = {0};
  fits_get_errstatus(status, text);
  // Drain CFITSIO's message stack so stale messages do not leak into later errors.
  char msg[FLEN_ERRMSG];
  std::string detail;
  while (fits_read_errmsg(msg) != 0) {
    if (detail.empty()) detail = msg;
  }
  if (!detail.empty() && detail != text) return absl::StrCat(text, " (", detail, ")");
  return text;
}

namespace {

bool IsCompressionKey(absl::string_view key) {
  static constexpr const char* kZ[] = {
      "ZIMAGE",  "ZBITPIX", "ZNAXIS",  "ZTILE",   "ZCMPTYPE", "ZNAME",    "ZVAL",
      "ZQUANTIZ", "ZDITHER", "ZSIMPLE", "ZEXTEND", "ZPCOUNT",  "ZGCOUNT",  "ZHECKSUM",
      "ZDATASUM", "ZBLANK",  "ZSCALE",  "ZZERO",   "ZTENSION"};
  for (const char* z : kZ) {
    if (absl::StartsWith(key, z)) return true;
  }
  return false;
}

}  // namespace

bool IsStructuralKey(absl::string_view key) {
  static constexpr const char* kExact[] = {"SIMPLE", "XTENSION", "BITPIX", "EXTEND", "PCOUNT",
                                           "GCOUNT", "TFIELDS", "CHECKSUM", "DATASUM", "END",
                                           "EXTNAME", "THEAP", "BSCALE", "BZERO", "BLANK"};
  for (const char* k : kExact) {
    if (key == k) return true;
  }
  static constexpr const char* kPrefix[] = {"NAXIS", "TTYPE", "TFORM", "TDIM", "TUNIT",
                                            "TSCAL", "TZERO", "TNULL", "TDISP", "Z"};
  for (const char* p : kPrefix) {
    if (absl::StartsWith(key, p)) {
      // Z* only for tile-compression cards (ZIMAGE, ZBITPIX, ZNAXISn, ZTILEn, ZCMPTYPE, ...).
      if (absl::string_view(p) == "Z") return IsCompressionKey(key);
      return true;
    }
  }
  return false;
}

}  // namespace internal

namespace {

using internal::CfitsioText;

// CheckFitsLayout (fits_layout.h) on a plain FITS file on disk, reading only its headers.
// A file that does not start as FITS does (a compressed one, or not FITS at all) is left
// to CFITSIO, as is one that cannot be opened: it reports those itself.
// Hands over the descriptor in *raw_fd when the file starts as FITS does (so its bytes
// are the FITS file) and its layout is sound; closes it otherwise.
absl::Status CheckLayoutOnDisk(const std::string& path, int* raw_fd) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::OkStatus();
  struct stat st {};
  char magic[6] = {0};
  absl::Status result;
  bool plain = false;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      ::pread(fd, magic, sizeof magic, 0) == static_cast<ssize_t>(sizeof magic) &&
      std::memcmp(magic, "SIMPLE", sizeof magic) == 0) {
    plain = true;
    result = CheckFitsLayout(
        [fd](std::int64_t offset, std::size_t n, char* out) {
          return ::pread(fd, out, n, offset) == static_cast<ssize_t>(n);
        },
        static_cast<std::int64_t>(st.st_size), path);
  }
  if (plain && result.ok()) {
    *raw_fd = fd;
  } else {
    ::close(fd);
  }
  return result;
}

}  // namespace

struct FitsFile::MemBuffer {
  void* ptr = nullptr;
  std::size_t size = 0;
  std::string owned;  // when set, ptr points into it (read-only files: never realloc()ed)
  // The same; shared, so that parts of it (SharedBytes) may outlive the file.
  std::shared_ptr<PlaneBuffer<char>> block;
  bool borrowed() const { return !owned.empty() || block != nullptr; }
};

FitsFile::FitsFile(fitsfile* fptr, std::string name) : fptr_(fptr), name_(std::move(name)) {}

FitsFile::FitsFile(FitsFile&& other) noexcept
    : fptr_(std::exchange(other.fptr_, nullptr)),
      name_(std::move(other.name_)),
      opened_size_(other.opened_size_),
      raw_fd_(std::exchange(other.raw_fd_, -1)),
      mem_(std::exchange(other.mem_, nullptr)) {}

FitsFile& FitsFile::operator=(FitsFile&& other) noexcept {
  if (this != &other) {
    (void)Close();
    fptr_ = std::exchange(other.fptr_, nullptr);
    name_ = std::move(other.name_);
    opened_size_ = other.opened_size_;
    raw_fd_ = std::exchange(other.raw_fd_, -1);
    mem_ = std::exchange(other.mem_, nullptr);
  }
  return *this;
}

FitsFile::~FitsFile() { (void)Close(); }

absl::Status FitsFile::Close() {
  absl::Status result;
  if (raw_fd_ >= 0) {
    ::close(raw_fd_);
    raw_fd_ = -1;
  }
  if (fptr_ != nullptr) {
    int status = 0;
    fits_close_file(fptr_, &status);
    fptr_ = nullptr;
    if (status != 0) result = Error(status, "closing file");
  }
  if (mem_ != nullptr) {
    if (!mem_->borrowed()) std::free(mem_->ptr);
    delete mem_;
    mem_ = nullptr;
  }
  return result;
}

absl::StatusOr<FitsFile> FitsFile::OpenRead(const std::string& path) {
  int raw_fd = -1;
  SPEXD_RETURN_IF_ERROR(CheckLayoutOnDisk(path, &raw_fd));
  fitsfile* fptr = nullptr;
  int status = 0;
  // The "[...]" suffix syntax of CFITSIO would let a path select HDUs or filter rows;
  // open the file literally instead (fits_open_diskfile does not parse extended syntax).
  fits_open_diskfile(&fptr, path.c_str(), READONLY, &status);
  if (status != 0) {
    if (raw_fd >= 0) ::close(raw_fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot open as FITS: ", CfitsioText(status)));
  }
  FitsFile file(fptr, path);
  file.opened_size_ = fptr->Fptr->filesize;
  file.raw_fd_ = raw_fd;
  return file;
}

absl::StatusOr<FitsFile> FitsFile::OpenMemory(const void* data, std::size_t size,
                                              std::string display_name) {
  if (size < 2880) {
    return absl::InvalidArgumentError(absl::StrCat(
        display_name, ": not a FITS file (", size, " bytes; a FITS file has at least 2880)"));
  }
  SPEXD_RETURN_IF_ERROR(CheckFitsLayout(data, size, display_name));
  // CFITSIO's memory driver reads whole 2880-byte records: a file whose last record is
  // cut short (an upload without its trailing padding, or truncated) made it read past
  // the buffer (found by fuzzing: tests/fuzz/regressions/preproc/). The copy is rounded up
  // to whole records with zeros, which is what FITS padding holds; opened_size_ keeps
  // the true size, so CheckHduComplete still reports data that is really missing.
  const std::size_t padded = (size + 2879) / 2880 * 2880;
  auto* mem = new MemBuffer;
  mem->ptr = std::malloc(padded);
  if (mem->ptr == nullptr) {
    delete mem;
    return absl::ResourceExhaustedError(absl::StrCat(display_name, ": out of memory"));
  }
  std::memcpy(mem->ptr, data, size);
  std::memset(static_cast<char*>(mem->ptr) + size, 0, padded - size);
  mem->size = padded;
  return OpenMemBuffer(mem, size, std::move(display_name));
}

absl::StatusOr<FitsFile> FitsFile::OpenMemory(std::string bytes, std::string display_name) {
  if (bytes.size() < 2880) return OpenMemory(bytes.data(), bytes.size(), std::move(display_name));
  SPEXD_RETURN_IF_ERROR(CheckFitsLayout(bytes.data(), bytes.size(), display_name));
  // Whole records, as in the copying overload above (CFITSIO reads past a short last record).
  const std::size_t true_size = bytes.size();
  bytes.resize((true_size + 2879) / 2880 * 2880, '\0');
  auto* mem = new MemBuffer;
  mem->owned = std::move(bytes);
  mem->ptr = mem->owned.data();
  mem->size = mem->owned.size();
  return OpenMemBuffer(mem, true_size, std::move(display_name));
}

absl::StatusOr<FitsFile> FitsFile::OpenMemory(PlaneBuffer<char> bytes, std::string display_name) {
  const std::size_t true_size = bytes.size();
  const std::size_t padded = (true_size + 2879) / 2880 * 2880;
  if (true_size < 2880 || padded > bytes.capacity_bytes()) {
    return OpenMemory(bytes.data(), true_size, std::move(display_name));  // copies
  }
  SPEXD_RETURN_IF_ERROR(CheckFitsLayout(bytes.data(), true_size, display_name));
  // Whole records, as in the copying overload (CFITSIO reads past a short last record).
  std::memset(bytes.data() + true_size, 0, padded - true_size);
  auto* mem = new MemBuffer;
  mem->block = std::make_shared<PlaneBuffer<char>>(std::move(bytes));
  mem->ptr = mem->block->data();
  mem->size = padded;
  return OpenMemBuffer(mem, true_size, std::move(display_name));
}

absl::StatusOr<FitsFile> FitsFile::OpenMemBuffer(MemBuffer* mem, std::size_t true_size,
                                                 std::string display_name) {
  fitsfile* fptr = nullptr;
  int status = 0;
  // No realloc function: CFITSIO never grows (or frees) a READONLY memory file.
  fits_open_memfile(&fptr, display_name.c_str(), READONLY, &mem->ptr, &mem->size, 0, nullptr,
                    &status);
  if (status != 0) {
    if (!mem->borrowed()) std::free(mem->ptr);
    delete mem;
    return absl::InvalidArgumentError(
        absl::StrCat(display_name, ": cannot open as FITS: ", CfitsioText(status)));
  }
  FitsFile file(fptr, std::move(display_name));
  file.opened_size_ = static_cast<long long>(true_size);
  file.mem_ = mem;
  return file;
}

absl::StatusOr<FitsFile> FitsFile::Create(const std::string& path) {
  fitsfile* fptr = nullptr;
  int status = 0;
  std::remove(path.c_str());
  fits_create_diskfile(&fptr, path.c_str(), &status);
  if (status != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot create: ", CfitsioText(status)));
  }
  return FitsFile(fptr, path);
}

absl::StatusOr<FitsFile> FitsFile::CreateMemory(std::string display_name) {
  // Start from an empty buffer (CFITSIO grows it with realloc): CFITSIO takes the initial
  // buffer size as existing file content, so stale bytes of a freed FITS buffer in a
  // pre-allocated one were scanned by fits_get_num_hdus as phantom HDUs (TakeMemory).
  auto* mem = new MemBuffer;
  fitsfile* fptr = nullptr;
  int status = 0;
  fits_create_memfile(&fptr, &mem->ptr, &mem->size, 2880 * 16, std::realloc, &status);
  if (status != 0) {
    std::free(mem->ptr);
    delete mem;
    return absl::InternalError(
        absl::StrCat(display_name, ": cannot create in memory: ", CfitsioText(status)));
  }
  FitsFile file(fptr, std::move(display_name));
  file.mem_ = mem;
  return file;
}

absl::StatusOr<std::string> FitsFile::TakeMemory() {
  if (mem_ == nullptr || fptr_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(name_, ": not an open in-memory file"));
  }
  int status = 0;
  fits_flush_file(fptr_, &status);
  if (status != 0) return Error(status, "flushing memory file");
  LONGLONG filesize = 0;
  // The memory driver may over-allocate; the logical size is the end of the last HDU.
  int nhdu = 0;
  fits_get_num_hdus(fptr_, &nhdu, &status);
  LONGLONG headstart = 0, datastart = 0, dataend = 0;
  if (nhdu > 0) {
    fits_movabs_hdu(fptr_, nhdu, nullptr, &status);
    fits_get_hduaddrll(fptr_, &headstart, &datastart, &dataend, &status);
    filesize = dataend;
  }
  if (status != 0) return Error(status, "sizing memory file");
  // Close first: CFITSIO may realloc the buffer while closing.
  fits_close_file(fptr_, &status);
  fptr_ = nullptr;
  if (status != 0) return Error(status, "closing memory file");
  std::string bytes(static_cast<const char*>(mem_->ptr), static_cast<std::size_t>(filesize));
  std::free(mem_->ptr);
  delete mem_;
  mem_ = nullptr;
  return bytes;
}

absl::StatusOr<std::string> FitsFile::WrittenBytes(int64_t offset, int64_t n) {
  if (mem_ == nullptr || fptr_ == nullptr || mem_->borrowed()) {
    return absl::FailedPreconditionError(absl::StrCat(name_, ": not a memory file being written"));
  }
  int status = 0;
  fits_flush_buffer(fptr_, 0, &status);
  if (status != 0) return Error(status, "flushing memory file");
  if (offset < 0 || n < 0 || static_cast<uint64_t>(offset + n) > mem_->size) {
    return absl::OutOfRangeError(absl::StrCat(name_, ": bytes ", offset, "+", n,
                                              " beyond the memory file's ", mem_->size));
  }
  return std::string(static_cast<const char*>(mem_->ptr) + offset, static_cast<std::size_t>(n));
}

const char* FitsFile::MemoryData() const {
  return mem_ != nullptr ? static_cast<const char*>(mem_->ptr) : nullptr;
}

std::shared_ptr<const void> FitsFile::SharedBytes() const {
  if (mem_ == nullptr || mem_->block == nullptr) return nullptr;
  return mem_->block;
}

std::string FitsFile::CurrentHduName() const {
  if (fptr_ == nullptr) return "";
  int status = 0;
  char value[FLEN_VALUE] = {0};
  fits_read_key(fptr_, TSTRING, "EXTNAME", value, nullptr, &status);
  if (status == 0) return value;
  int hdunum = 0;
  fits_get_hdu_num(fptr_, &hdunum);
  return absl::StrCat("HDU ", hdunum - 1);
}

absl::Status FitsFile::Error(int cfitsio_status, absl::string_view what) const {
  std::string text = CfitsioText(cfitsio_status);
  return absl::InvalidArgumentError(
      absl::StrCat(name_, "[", CurrentHduName(), "]: ", what, ": ", text));
}

absl::Status FitsFile::Invalid(absl::string_view what) const {
  return absl::InvalidArgumentError(absl::StrCat(name_, "[", CurrentHduName(), "]: ", what));
}

absl::StatusOr<int> FitsFile::NumHdus() {
  int status = 0, n = 0;
  fits_get_num_hdus(fptr_, &n, &status);
  if (status != 0) return Error(status, "counting HDUs");
  return n;
}

absl::Status FitsFile::MoveToHduIndex(int index0) {
  int status = 0;
  fits_movabs_hdu(fptr_, index0 + 1, nullptr, &status);
  if (status != 0) return Error(status, absl::StrCat("moving to HDU ", index0));
  return absl::OkStatus();
}

absl::Status FitsFile::MoveToHdu(absl::string_view extname) {
  // Scan by EXTNAME ourselves: fits_movnam_hdu also matches HDUNAME and needs a type.
  int status = 0, nhdu = 0;
  fits_get_num_hdus(fptr_, &nhdu, &status);
  if (status != 0) return Error(status, "counting HDUs");
  for (int i = 1; i <= nhdu; ++i) {
    fits_movabs_hdu(fptr_, i, nullptr, &status);
    if (status != 0) return Error(status, absl::StrCat("reading HDU ", i - 1));
    char value[FLEN_VALUE] = {0};
    int kst = 0;
    fits_read_key(fptr_, TSTRING, "EXTNAME", value, nullptr, &kst);
    if (kst == 0 && absl::string_view(value) == extname) return absl::OkStatus();
  }
  return absl::NotFoundError(absl::StrCat(name_, ": no HDU with EXTNAME '", extname, "'"));
}

bool FitsFile::HasHdu(absl::string_view extname) { return MoveToHdu(extname).ok(); }

absl::Status FitsFile::CheckHduComplete() {
  if (opened_size_ < 0) return absl::OkStatus();  // a file being written
  // Data size from the raw header keywords (FITS standard §4.4.1.1):
  // |BITPIX|/8 * GCOUNT * (PCOUNT + NAXIS1 * ... * NAXISn), so a tile-compressed image
  // is measured as the table it is stored as. Missing padding after the data is
  // tolerated, as CFITSIO does.
  int status = 0, bitpix = 0, naxis = 0;
  LONGLONG headstart = 0, datastart = 0, dataend = 0, pcount = 0, gcount = 1;
  fits_get_hduaddrll(fptr_, &headstart, &datastart, &dataend, &status);
  fits_read_key(fptr_, TINT, "BITPIX", &bitpix, nullptr, &status);
  fits_read_key(fptr_, TINT, "NAXIS", &naxis, nullptr, &status);
  LONGLONG pixels = naxis > 0 ? 1 : 0;
  for (int i = 1; i <= naxis; ++i) {
    LONGLONG len = 0;
    fits_read_key(fptr_, TLONGLONG, absl::StrCat("NAXIS", i).c_str(), &len, nullptr, &status);
    pixels *= len;
  }
  if (status != 0) return Error(status, "reading HDU size");
  int kst = 0;  // PCOUNT and GCOUNT are absent from a primary HDU
  fits_read_key(fptr_, TLONGLONG, "PCOUNT", &pcount, nullptr, &kst);
  kst = 0;
  fits_read_key(fptr_, TLONGLONG, "GCOUNT", &gcount, nullptr, &kst);
  fits_clear_errmsg();
  const LONGLONG bytes_per_value = (bitpix < 0 ? -bitpix : bitpix) / 8;
  const LONGLONG end = datastart + bytes_per_value * gcount * (pcount + pixels);
  if (end > opened_size_) {
    return Invalid(absl::StrCat("truncated file: the HDU's data end at byte ", end,
                                " but the file has ", opened_size_, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace spexd::core
