// FitsFile's direct access to image bytes (GetRawFloatImage, OpenRawBytes): the parallel
// plane decoder (core/io/internal/plane_decode.h) reads them without going through CFITSIO's
// single-threaded buffers.
#include <fcntl.h>
#include <fitsio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/io/fits_file.h"

namespace spexd::core {

absl::StatusOr<std::optional<FitsFile::RawFloatImage>> FitsFile::GetRawFloatImage() {
  int status = 0, hdutype = 0, bitpix = 0, naxis = 0;
  fits_get_hdu_type(fptr_, &hdutype, &status);
  if (status != 0) return Error(status, "reading HDU type");
  // A tile-compressed image is a BINTABLE to CFITSIO's HDU type, and is decompressed.
  if (hdutype != IMAGE_HDU || fits_is_compressed_image(fptr_, &status) != 0) return std::nullopt;
  fits_get_img_type(fptr_, &bitpix, &status);
  fits_get_img_dim(fptr_, &naxis, &status);
  if (status != 0) return Error(status, "reading image type");
  if ((bitpix != FLOAT_IMG && bitpix != DOUBLE_IMG) || naxis != 2) return std::nullopt;
  // BSCALE/BZERO other than 1/0 make CFITSIO scale the values: leave those to it.
  for (const char* key : {"BSCALE", "BZERO"}) {
    double v = 0;
    int kst = 0;
    fits_read_key(fptr_, TDOUBLE, key, &v, nullptr, &kst);
    if (kst == KEY_NO_EXIST) {
      fits_clear_errmsg();
      continue;
    }
    if (kst != 0 || v != (key[1] == 'S' ? 1.0 : 0.0)) {
      fits_clear_errmsg();
      return std::nullopt;
    }
  }
  long naxes[2] = {0, 0};
  LONGLONG headstart = 0, datastart = 0, dataend = 0;
  fits_get_img_size(fptr_, 2, naxes, &status);
  fits_get_hduaddrll(fptr_, &headstart, &datastart, &dataend, &status);
  if (status != 0) return Error(status, "reading image layout");
  RawFloatImage raw;
  raw.bitpix = bitpix;
  raw.data_offset = datastart;
  raw.pixels = static_cast<int64_t>(naxes[0]) * naxes[1];
  const int64_t end = raw.data_offset + raw.pixels * (bitpix == FLOAT_IMG ? 4 : 8);
  if (opened_size_ < 0 || end > opened_size_) return std::nullopt;  // CheckHduComplete reports it
  return raw;
}

absl::StatusOr<FitsFile::RawBytes> FitsFile::OpenRawBytes() const {
  if (opened_size_ < 0) {
    return absl::FailedPreconditionError(absl::StrCat(name_, ": not opened for reading"));
  }
  if (const char* mem = MemoryData(); mem != nullptr) {
    return RawBytes(name_, -1, mem, opened_size_);
  }
  if (raw_fd_ < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(name_, ": decompressed by CFITSIO, its bytes on disk are not the FITS file"));
  }
  const int fd = ::fcntl(raw_fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat(name_, ": dup: ", std::strerror(errno)));
  }
  return RawBytes(name_, fd, nullptr, opened_size_);
}

FitsFile::RawBytes::RawBytes(RawBytes&& other) noexcept
    : name_(std::move(other.name_)),
      fd_(std::exchange(other.fd_, -1)),
      mem_(other.mem_),
      size_(other.size_) {}

FitsFile::RawBytes::~RawBytes() {
  if (fd_ >= 0) ::close(fd_);
}

const char* FitsFile::RawBytes::Direct(int64_t offset, std::size_t n) const {
  if (mem_ == nullptr || offset < 0 || offset + static_cast<int64_t>(n) > size_) return nullptr;
  return mem_ + offset;
}

absl::Status FitsFile::RawBytes::Read(int64_t offset, std::size_t n, char* out) const {
  if (offset < 0 || offset + static_cast<int64_t>(n) > size_) {
    return absl::InvalidArgumentError(absl::StrCat(name_, ": truncated file: ", n,
                                                   " bytes wanted at byte ", offset, " of ", size_));
  }
  if (mem_ != nullptr) {
    std::memcpy(out, mem_ + offset, n);
    return absl::OkStatus();
  }
  while (n > 0) {
    const ssize_t got = ::pread(fd_, out, n, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          name_, ": truncated file: read at byte ", offset, " failed: ",
          got < 0 ? std::strerror(errno) : "end of file"));
    }
    out += got;
    offset += got;
    n -= static_cast<std::size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace spexd::core
