// FitsFile reads: keywords (checked before CFITSIO converts them), image dimensions and
// pixels, and the user's header cards.
#include <fitsio.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/io/fits_file.h"
#include "core/io/internal/fits_file_internal.h"
#include "core/base/status_macros.h"

namespace spexd::core {
namespace {

using internal::FitsType;
using internal::IsStructuralKey;

// A FITS integer or real value (§4.2.3, §4.2.4): sign, digits, point, exponent (E or D).
bool LooksNumeric(absl::string_view v) {
  v = absl::StripAsciiWhitespace(v);
  if (v.empty() || v.size() > 40) return false;
  bool digit = false;
  for (char c : v) {
    if (absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      digit = true;
    } else if (!absl::StrContains("+-.EeDd", c)) {
      return false;
    }
  }
  return digit;
}

}  // namespace

// Reads keyword `key` of the current HDU as CFITSIO type `type` into `value`: NOT_FOUND
// when absent, INVALID_ARGUMENT (with `problem`) when not convertible.
absl::Status FitsFile::ReadKeyInto(int type, const char* key, void* value,
                                   absl::string_view problem) {
  int status = 0;
  if (type != TSTRING && type != TLOGICAL) {
    // CFITSIO's conversion of a malformed number can overflow its own message buffer
    // (a fortify abort in ffc2j, found by fuzzing the PSF reader:
    // tests/fuzz/regressions/psf/): the raw value is checked here first.
    char raw[FLEN_VALUE] = {0};
    fits_read_keyword(fptr_, key, raw, nullptr, &status);
    if (status == 0 && !LooksNumeric(raw)) {
      return Invalid(absl::StrCat("keyword ", key, problem, " ('",
                                  absl::StripAsciiWhitespace(raw), "')"));
    }
    status = 0;
    fits_clear_errmsg();
  }
  fits_read_key(fptr_, type, key, value, nullptr, &status);
  if (status == KEY_NO_EXIST) {
    fits_clear_errmsg();
    return absl::NotFoundError(
        absl::StrCat(name_, "[", CurrentHduName(), "]: missing keyword ", key));
  }
  if (status != 0) return Error(status, absl::StrCat("keyword ", key, problem));
  return absl::OkStatus();
}

absl::StatusOr<double> FitsFile::ReadDouble(const char* key) {
  double value = 0;
  SPEXD_RETURN_IF_ERROR(ReadKeyInto(TDOUBLE, key, &value, " is not a number"));
  return value;
}

absl::StatusOr<long> FitsFile::ReadLong(const char* key) {
  // CFITSIO converts a string value like '3' (PSFVER) and rejects non-integral ones.
  long value = 0;
  SPEXD_RETURN_IF_ERROR(ReadKeyInto(TLONG, key, &value, " is not an integer"));
  return value;
}

absl::StatusOr<std::string> FitsFile::ReadString(const char* key) {
  // fits_read_key_longstr: a value continued over CONTINUE cards (the FITS long-string
  // convention, e.g. a path over 68 characters) comes back whole, a plain one as it is.
  int status = 0;
  char* value = nullptr;
  fits_read_key_longstr(fptr_, key, &value, nullptr, &status);
  std::string out = value != nullptr ? std::string(value) : std::string();
  if (value != nullptr) fits_free_memory(value, &status);
  if (status == KEY_NO_EXIST) {
    fits_clear_errmsg();
    return absl::NotFoundError(
        absl::StrCat(name_, "[", CurrentHduName(), "]: missing keyword ", key));
  }
  if (status != 0) return Error(status, absl::StrCat("keyword ", key));
  return out;
}

std::optional<double> FitsFile::ReadOptionalDouble(const char* key) {
  auto v = ReadDouble(key);
  if (!v.ok()) return std::nullopt;
  return *v;
}

std::optional<std::string> FitsFile::ReadOptionalString(const char* key) {
  auto v = ReadString(key);
  if (!v.ok()) return std::nullopt;
  return *v;
}

absl::StatusOr<FitsFile::ImageInfo> FitsFile::GetImageInfo() {
  int status = 0, hdutype = 0;
  fits_get_hdu_type(fptr_, &hdutype, &status);
  if (status != 0) return Error(status, "reading HDU type");
  // Tile-compressed images are BINTABLEs on disk that CFITSIO presents as images.
  int is_image = hdutype == IMAGE_HDU;
  if (!is_image) {
    is_image = fits_is_compressed_image(fptr_, &status);
    if (status != 0) return Error(status, "reading HDU type");
  }
  if (!is_image) return Invalid("is not an image HDU");
  int naxis = 0, bitpix = 0;
  fits_get_img_dim(fptr_, &naxis, &status);
  fits_get_img_equivtype(fptr_, &bitpix, &status);
  if (status != 0) return Error(status, "reading image dimensions");
  ImageInfo info;
  info.equiv_bitpix = bitpix;
  info.naxes.resize(naxis);
  if (naxis > 0) fits_get_img_size(fptr_, naxis, info.naxes.data(), &status);
  if (status != 0) return Error(status, "reading image size");
  return info;
}

template <typename T>
absl::StatusOr<std::vector<T>> FitsFile::ReadImage() {
  auto info = GetImageInfo();
  if (!info.ok()) return info.status();
  std::size_t n = 1;
  for (long a : info->naxes) n *= static_cast<std::size_t>(a);
  if (info->naxes.empty()) n = 0;
  std::vector<T> out(n);
  if (n == 0) return out;
  int status = 0, anynul = 0;
  std::vector<long> fpixel(info->naxes.size(), 1);
  fits_read_pix(fptr_, FitsType<T>::kData, fpixel.data(), static_cast<LONGLONG>(n), nullptr,
                out.data(), &anynul, &status);
  if (status != 0) return Error(status, "reading image data (truncated or corrupt file?)");
  return out;
}

absl::StatusOr<std::vector<std::string>> FitsFile::ReadUserCards() {
  int status = 0, nkeys = 0, more = 0;
  fits_get_hdrspace(fptr_, &nkeys, &more, &status);
  if (status != 0) return Error(status, "reading header");
  std::vector<std::string> cards;
  for (int i = 1; i <= nkeys; ++i) {
    char card[FLEN_CARD] = {0};
    fits_read_record(fptr_, i, card, &status);
    if (status != 0) return Error(status, "reading header card");
    char keyname[FLEN_KEYWORD] = {0};
    int len = 0, kst = 0;
    fits_get_keyname(card, keyname, &len, &kst);
    if (IsStructuralKey(keyname)) continue;
    cards.emplace_back(card);
  }
  return cards;
}

#define SPEXD_INSTANTIATE(T) template absl::StatusOr<std::vector<T>> FitsFile::ReadImage<T>();
SPEXD_FITS_PIXEL_TYPES(SPEXD_INSTANTIATE)
#undef SPEXD_INSTANTIATE

}  // namespace spexd::core
