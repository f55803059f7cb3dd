#include "core/frame/internal/fits_checksum.h"

#include <fitsio.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/float_convert.h"
#include "core/base/status_macros.h"

namespace spexd::core::internal {
namespace {

constexpr char kZeroChecksum[] = "0000000000000000";

// A 64-bit sum of 32-bit words folded to 32-bit ones' complement (end-around carry).
uint32_t Fold(uint64_t s) {
  while ((s >> 32) != 0) s = (s & 0xFFFFFFFFu) + (s >> 32);
  return static_cast<uint32_t>(s);
}

// Chunks of at most 2^31 words keep the 64-bit accumulators below overflow.
constexpr std::size_t kMaxWordsPerFold = std::size_t{1} << 31;

}  // namespace

uint32_t OnesComplementAdd(uint32_t a, uint32_t b) {
  return Fold(static_cast<uint64_t>(a) + b);
}

uint32_t FoldWordSum(uint64_t sum) { return Fold(sum); }

uint32_t OnesComplementSum(const char* bytes, std::size_t n, uint32_t start) {
  uint32_t sum = start;
  for (std::size_t done = 0; done < n / 4;) {
    const std::size_t words = std::min(n / 4 - done, kMaxWordsPerFold);
    sum = OnesComplementAdd(sum, Fold(BigEndianWordSum(bytes + 4 * done, 4 * words)));
    done += words;
  }
  return sum;
}

uint32_t EncodeFloat32(const double* values, std::size_t n, char* out) {
  // n < 2^31 per call (the callers' chunks): the 64-bit sum cannot overflow.
  return Fold(NarrowToBigEndianFloat32(values, n, out));
}

uint32_t EncodeFloat32Bytes(const char* little_endian, std::size_t n, char* out) {
  // n < 2^31 per call: the 64-bit sum cannot overflow. A word read big-endian from the
  // file is the word as it was in memory.
  return Fold(ToBigEndianWords(little_endian, n, out));
}

uint32_t EncodeUint32WithZero(const uint32_t* values, std::size_t n, char* out) {
  uint64_t s = 0;
  for (std::size_t i = 0; i < n; ++i) {
    uint32_t u = values[i] ^ 0x80000000u;  // value - 2^31 as a two's complement int32
    s += u;
    u = __builtin_bswap32(u);
    std::memcpy(out + 4 * i, &u, 4);
  }
  return Fold(s);
}

uint32_t EncodeFloat64(const double* values, std::size_t n, char* out) {
  uint64_t s = 0;  // two words per value, n < 2^30 per call
  for (std::size_t i = 0; i < n; ++i) {
    uint64_t u;
    std::memcpy(&u, values + i, 8);
    s += (u >> 32) + (u & 0xFFFFFFFFu);  // the high word comes first in the file
    u = __builtin_bswap64(u);
    std::memcpy(out + 8 * i, &u, 8);
  }
  return Fold(s);
}

std::string ChecksumTimeNow() {
  char datestr[20] = {0};
  int timeref = 0, status = 0;
  fits_get_system_time(datestr, &timeref, &status);
  return datestr;
}

// The steps below are CFITSIO's ffpcks (checksum.c) in its order, with the same cards and
// comments, so that the header bytes match fits_write_chksum's.
absl::Status ChecksumCards::Begin(FitsFile& f, const std::string& time) {
  chkcomm_ = absl::StrCat("HDU checksum updated ", time);
  datacomm_ = absl::StrCat("data unit checksum updated ", time);
  char value[FLEN_VALUE] = {0}, comment[FLEN_COMMENT] = {0};
  int status = 0;
  if (fits_read_key_str(f.get(), "CHECKSUM", value, comment, &status) == KEY_NO_EXIST) {
    status = 0;
    checksum_ = kZeroChecksum;
    wrote_chkcomm_ = true;
    fits_write_key_str(f.get(), "CHECKSUM", kZeroChecksum, chkcomm_.c_str(), &status);
  } else {
    checksum_ = value;
  }
  if (status != 0) return f.Error(status, "writing CHECKSUM");
  if (fits_read_key_str(f.get(), "DATASUM", value, comment, &status) == KEY_NO_EXIST) {
    status = 0;
    old_datasum_ = 0;
    wrote_datacomm_ = true;
    fits_write_key_str(f.get(), "DATASUM", "         0", datacomm_.c_str(), &status);
    if (checksum_ != kZeroChecksum) {
      checksum_ = kZeroChecksum;
      wrote_chkcomm_ = true;
      fits_modify_key_str(f.get(), "CHECKSUM", kZeroChecksum, chkcomm_.c_str(), &status);
    }
  } else {
    // ffpcks reads the old value with atof; one out of range never equals a sum.
    const double old = std::atof(value);
    old_datasum_ = old >= 0 && old < 4294967296.0 ? static_cast<uint64_t>(old) : ~uint64_t{0};
  }
  fits_set_hdustruc(f.get(), &status);  // ffrdef: END and the header's final size
  if (status != 0) return f.Error(status, "writing DATASUM");
  return absl::OkStatus();
}

absl::Status ChecksumCards::Restamp(FitsFile& f, const std::string& time) {
  chkcomm_ = absl::StrCat("HDU checksum updated ", time);
  datacomm_ = absl::StrCat("data unit checksum updated ", time);
  int status = 0;
  if (wrote_chkcomm_) fits_modify_comment(f.get(), "CHECKSUM", chkcomm_.c_str(), &status);
  if (wrote_datacomm_) fits_modify_comment(f.get(), "DATASUM", datacomm_.c_str(), &status);
  if (status != 0) return f.Error(status, "restamping CHECKSUM/DATASUM");
  return absl::OkStatus();
}

absl::StatusOr<std::string> ChecksumCards::HeaderBytes(FitsFile& f) {
  LONGLONG headstart = 0, datastart = 0, dataend = 0;
  int status = 0;
  fits_get_hduaddrll(f.get(), &headstart, &datastart, &dataend, &status);
  if (status != 0) return f.Error(status, "locating the header");
  SPEXD_ASSIGN_OR_RETURN(std::string header, f.WrittenBytes(headstart, datastart - headstart));
  if (replacement_.empty()) return header;
  const std::string key = replacement_.substr(0, 8);
  for (std::size_t at = 0; at + 80 <= header.size(); at += 80) {
    if (header.compare(at, 8, key) == 0) return header.replace(at, 80, replacement_);
  }
  return absl::InternalError(absl::StrCat(f.name(), ": no ", key, " card to replace"));
}

absl::Status ChecksumCards::SetChecksum(FitsFile& f, const char* value, const char* comment) {
  int status = 0;
  fits_modify_key_str(f.get(), "CHECKSUM", value, comment, &status);
  if (status != 0) return f.Error(status, "writing CHECKSUM");
  checksum_ = value;
  return absl::OkStatus();
}

absl::StatusOr<std::string> ChecksumCards::Finish(FitsFile& f, uint32_t datasum) {
  if (datasum != old_datasum_) {
    int status = 0;
    const std::string value = std::to_string(datasum);  // ffpcks: sprintf("%lu")
    fits_modify_key_str(f.get(), "DATASUM", value.c_str(), datacomm_.c_str(), &status);
    if (status != 0) return f.Error(status, "writing DATASUM");
    if (checksum_ != kZeroChecksum) {
      SPEXD_RETURN_IF_ERROR(SetChecksum(f, kZeroChecksum, chkcomm_.c_str()));
    }
  }
  if (checksum_ != kZeroChecksum) {
    // A CHECKSUM that is still right (a copied HDU, unchanged) stays with its comment.
    SPEXD_ASSIGN_OR_RETURN(std::string header, HeaderBytes(f));
    const uint32_t sum = OnesComplementSum(header.data(), header.size(), datasum);
    if (sum == 0 || sum == 0xFFFFFFFFu) return header;
    SPEXD_RETURN_IF_ERROR(SetChecksum(f, kZeroChecksum, chkcomm_.c_str()));
  }
  SPEXD_ASSIGN_OR_RETURN(std::string header, HeaderBytes(f));
  char ascii[17] = {0};
  fits_encode_chksum(OnesComplementSum(header.data(), header.size(), datasum), 1, ascii);
  SPEXD_RETURN_IF_ERROR(SetChecksum(f, ascii, "&"));  // "&": keep the comment
  return HeaderBytes(f);
}

}  // namespace spexd::core::internal
