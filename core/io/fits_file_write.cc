// FitsFile writes: image HDUs, header cards and keywords, and copies of whole HDUs.
#include <fitsio.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/io/fits_file.h"
#include "core/io/internal/fits_file_internal.h"

namespace spexd::core {

using internal::FitsType;
using internal::IsStructuralKey;

absl::Status FitsFile::CopyCurrentHduTo(FitsFile& dest) {
  if (fptr_ == nullptr || dest.fptr_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(name_, ": copying HDU of a closed file"));
  }
  int status = 0, hdutype = 0, ndest = 0;
  fits_get_hdu_type(fptr_, &hdutype, &status);
  fits_get_num_hdus(dest.fptr_, &ndest, &status);
  if (status != 0) return Error(status, "preparing HDU copy");
  if (ndest == 0 && hdutype != IMAGE_HDU) {
    fits_create_img(dest.fptr_, BYTE_IMG, 0, nullptr, &status);
    if (status != 0) return dest.Error(status, "creating empty primary HDU");
  }
  fits_copy_hdu(fptr_, dest.fptr_, 0, &status);
  if (status != 0) return Error(status, absl::StrCat("copying HDU to ", dest.name_));
  return absl::OkStatus();
}

template <typename T>
absl::Status FitsFile::CreateImage(absl::string_view extname, const std::vector<long>& naxes) {
  int status = 0;
  std::vector<long> axes = naxes;
  fits_create_img(fptr_, FitsType<T>::kImg, static_cast<int>(axes.size()), axes.data(), &status);
  std::string name(extname);
  fits_update_key(fptr_, TSTRING, "EXTNAME", name.data(), nullptr, &status);
  if (status != 0) return Error(status, absl::StrCat("creating image HDU ", extname));
  return absl::OkStatus();
}

template <typename T>
absl::Status FitsFile::WriteImage(absl::string_view extname, const std::vector<long>& naxes,
                                  const T* data) {
  absl::Status created = CreateImage<T>(extname, naxes);
  if (!created.ok()) return created;
  int status = 0;
  std::vector<long> axes = naxes;
  LONGLONG n = 1;
  for (long a : axes) n *= a;
  if (n > 0 && !axes.empty()) {
    std::vector<long> fpixel(axes.size(), 1);
    fits_write_pix(fptr_, FitsType<T>::kData, fpixel.data(), n, const_cast<T*>(data), &status);
  }
  if (status != 0) return Error(status, absl::StrCat("writing image HDU ", extname));
  return absl::OkStatus();
}

absl::Status FitsFile::WriteCards(const std::vector<std::string>& cards) {
  int status = 0;
  for (std::size_t i = 0; i < cards.size(); ++i) {
    const std::string& card = cards[i];
    char keyname[FLEN_KEYWORD] = {0};
    int len = 0, kst = 0;
    fits_get_keyname(const_cast<char*>(card.c_str()), keyname, &len, &kst);
    if (IsStructuralKey(keyname)) continue;
    std::string key(keyname);
    // A long-string value (FITS long-string convention: the key card's string ends in '&'
    // and CONTINUE cards follow) is one keyword over several cards: they are written
    // together, in order, after removing the keyword's earlier value (fits_delete_key
    // takes its CONTINUE cards too). fits_update_card would overwrite one CONTINUE card
    // with the next and keep only the last piece.
    std::size_t end = i + 1;
    while (end < cards.size() && absl::StartsWith(cards[end], "CONTINUE")) ++end;
    if (end > i + 1 && !key.empty() && key != "COMMENT" && key != "HISTORY" &&
        key != "CONTINUE") {
      int exists_status = 0;
      char old[FLEN_CARD];
      if (fits_read_card(fptr_, key.c_str(), old, &exists_status) == 0) {
        fits_delete_key(fptr_, key.c_str(), &status);
      } else {
        fits_clear_errmsg();
      }
      for (std::size_t j = i; status == 0 && j < end; ++j) {
        fits_write_record(fptr_, cards[j].c_str(), &status);
      }
      if (status != 0) return Error(status, absl::StrCat("writing long-string card ", key));
      i = end - 1;
      continue;
    }
    if (key.empty() || key == "COMMENT" || key == "HISTORY" || key == "CONTINUE") {
      fits_write_record(fptr_, card.c_str(), &status);
    } else {
      fits_update_card(fptr_, key.c_str(), card.c_str(), &status);
    }
    if (status != 0) return Error(status, absl::StrCat("writing header card ", key));
  }
  return absl::OkStatus();
}

absl::Status FitsFile::WriteKey(const char* key, const std::string& value, const char* comment) {
  int status = 0;
  // Over 68 characters a string does not fit one card: fits_update_key_longstr continues
  // it over CONTINUE cards (the long-string convention astropy and desispec use) instead
  // of cutting it. No LONGSTRN card is added: desispec's frames (astropy) carry none.
  const std::size_t quoted = value.size() + std::count(value.begin(), value.end(), '\'');
  if (quoted > 68) {
    fits_update_key_longstr(fptr_, key, value.c_str(), comment, &status);
  } else {
    fits_update_key(fptr_, TSTRING, key, const_cast<char*>(value.c_str()), comment, &status);
  }
  if (status != 0) return Error(status, absl::StrCat("writing keyword ", key));
  return absl::OkStatus();
}

absl::Status FitsFile::WriteKey(const char* key, double value, const char* comment) {
  int status = 0;
  fits_update_key(fptr_, TDOUBLE, key, &value, comment, &status);
  if (status != 0) return Error(status, absl::StrCat("writing keyword ", key));
  return absl::OkStatus();
}

absl::Status FitsFile::WriteKey(const char* key, long value, const char* comment) {
  int status = 0;
  fits_update_key(fptr_, TLONG, key, &value, comment, &status);
  if (status != 0) return Error(status, absl::StrCat("writing keyword ", key));
  return absl::OkStatus();
}

#define SPEXD_INSTANTIATE(T)                                                              \
  template absl::Status FitsFile::WriteImage<T>(absl::string_view, const std::vector<long>&, \
                                                const T*);                                   \
  template absl::Status FitsFile::CreateImage<T>(absl::string_view, const std::vector<long>&);
SPEXD_FITS_PIXEL_TYPES(SPEXD_INSTANTIATE)
#undef SPEXD_INSTANTIATE

}  // namespace spexd::core
