#include "core/fits_file.h"

#include <fitsio.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace spexd::core {
namespace {

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

template <typename T>
struct FitsType;
template <> struct FitsType<double> { static constexpr int kData = TDOUBLE; static constexpr int kImg = DOUBLE_IMG; };
template <> struct FitsType<float> { static constexpr int kData = TFLOAT; static constexpr int kImg = FLOAT_IMG; };
template <> struct FitsType<int32_t> { static constexpr int kData = TINT; static constexpr int kImg = LONG_IMG; };
template <> struct FitsType<uint32_t> { static constexpr int kData = TUINT; static constexpr int kImg = ULONG_IMG; };
template <> struct FitsType<int16_t> { static constexpr int kData = TSHORT; static constexpr int kImg = SHORT_IMG; };
template <> struct FitsType<uint16_t> { static constexpr int kData = TUSHORT; static constexpr int kImg = USHORT_IMG; };
template <> struct FitsType<uint8_t> { static constexpr int kData = TBYTE; static constexpr int kImg = BYTE_IMG; };
template <> struct FitsType<int64_t> { static constexpr int kData = TLONGLONG; static constexpr int kImg = LONGLONG_IMG; };

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
      if (absl::string_view(p) == "Z" &&
          !(absl::StartsWith(key, "ZIMAGE") || absl::StartsWith(key, "ZBITPIX") ||
            absl::StartsWith(key, "ZNAXIS") || absl::StartsWith(key, "ZTILE") ||
            absl::StartsWith(key, "ZCMPTYPE") || absl::StartsWith(key, "ZNAME") ||
            absl::StartsWith(key, "ZVAL") || absl::StartsWith(key, "ZQUANTIZ") ||
            absl::StartsWith(key, "ZDITHER") || absl::StartsWith(key, "ZSIMPLE") ||
            absl::StartsWith(key, "ZEXTEND") || absl::StartsWith(key, "ZPCOUNT") ||
            absl::StartsWith(key, "ZGCOUNT") || absl::StartsWith(key, "ZHECKSUM") ||
            absl::StartsWith(key, "ZDATASUM") || absl::StartsWith(key, "ZBLANK") ||
            absl::StartsWith(key, "ZSCALE") || absl::StartsWith(key, "ZZERO") ||
            absl::StartsWith(key, "ZTENSION"))) {
        return false;
      }
      return true;
    }
  }
  return false;
}

}  // namespace

struct FitsFile::MemBuffer {
  void* ptr = nullptr;
  std::size_t size = 0;
};

FitsFile::FitsFile(fitsfile* fptr, std::string name) : fptr_(fptr), name_(std::move(name)) {}

FitsFile::FitsFile(FitsFile&& other) noexcept
    : fptr_(std::exchange(other.fptr_, nullptr)),
      name_(std::move(other.name_)),
      mem_(std::exchange(other.mem_, nullptr)) {}

FitsFile& FitsFile::operator=(FitsFile&& other) noexcept {
  if (this != &other) {
    (void)Close();
    fptr_ = std::exchange(other.fptr_, nullptr);
    name_ = std::move(other.name_);
    mem_ = std::exchange(other.mem_, nullptr);
  }
  return *this;
}

FitsFile::~FitsFile() { (void)Close(); }

absl::Status FitsFile::Close() {
  absl::Status result;
  if (fptr_ != nullptr) {
    int status = 0;
    fits_close_file(fptr_, &status);
    fptr_ = nullptr;
    if (status != 0) result = Error(status, "closing file");
  }
  if (mem_ != nullptr) {
    std::free(mem_->ptr);
    delete mem_;
    mem_ = nullptr;
  }
  return result;
}

absl::StatusOr<FitsFile> FitsFile::OpenRead(const std::string& path) {
  fitsfile* fptr = nullptr;
  int status = 0;
  // The "[...]" suffix syntax of CFITSIO would let a path select HDUs or filter rows;
  // open the file literally instead (fits_open_diskfile does not parse extended syntax).
  fits_open_diskfile(&fptr, path.c_str(), READONLY, &status);
  if (status != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": cannot open as FITS: ", CfitsioText(status)));
  }
  return FitsFile(fptr, path);
}

absl::StatusOr<FitsFile> FitsFile::OpenMemory(const void* data, std::size_t size,
                                              std::string display_name) {
  if (size < 2880) {
    return absl::InvalidArgumentError(absl::StrCat(
        display_name, ": not a FITS file (", size, " bytes; a FITS file has at least 2880)"));
  }
  auto* mem = new MemBuffer;
  mem->ptr = std::malloc(size);
  if (mem->ptr == nullptr) {
    delete mem;
    return absl::ResourceExhaustedError(absl::StrCat(display_name, ": out of memory"));
  }
  std::memcpy(mem->ptr, data, size);
  mem->size = size;
  fitsfile* fptr = nullptr;
  int status = 0;
  fits_open_memfile(&fptr, display_name.c_str(), READONLY, &mem->ptr, &mem->size, 0, nullptr,
                    &status);
  if (status != 0) {
    std::free(mem->ptr);
    delete mem;
    return absl::InvalidArgumentError(
        absl::StrCat(display_name, ": cannot open as FITS: ", CfitsioText(status)));
  }
  FitsFile file(fptr, std::move(display_name));
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
  auto* mem = new MemBuffer;
  mem->size = 2880 * 4;
  mem->ptr = std::malloc(mem->size);
  if (mem->ptr == nullptr) {
    delete mem;
    return absl::ResourceExhaustedError(absl::StrCat(display_name, ": out of memory"));
  }
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

absl::StatusOr<double> FitsFile::ReadDouble(const char* key) {
  int status = 0;
  double value = 0;
  fits_read_key(fptr_, TDOUBLE, key, &value, nullptr, &status);
  if (status == KEY_NO_EXIST) {
    fits_clear_errmsg();
    return absl::NotFoundError(
        absl::StrCat(name_, "[", CurrentHduName(), "]: missing keyword ", key));
  }
  if (status != 0) return Error(status, absl::StrCat("keyword ", key, " is not a number"));
  return value;
}

absl::StatusOr<long> FitsFile::ReadLong(const char* key) {
  int status = 0;
  // Read as a double first so that a string value like '3' (PSFVER) is accepted as CFITSIO
  // does, and reject non-integral values explicitly.
  long value = 0;
  fits_read_key(fptr_, TLONG, key, &value, nullptr, &status);
  if (status == KEY_NO_EXIST) {
    fits_clear_errmsg();
    return absl::NotFoundError(
        absl::StrCat(name_, "[", CurrentHduName(), "]: missing keyword ", key));
  }
  if (status != 0) return Error(status, absl::StrCat("keyword ", key, " is not an integer"));
  return value;
}

absl::StatusOr<std::string> FitsFile::ReadString(const char* key) {
  int status = 0;
  char value[FLEN_VALUE] = {0};
  fits_read_key(fptr_, TSTRING, key, value, nullptr, &status);
  if (status == KEY_NO_EXIST) {
    fits_clear_errmsg();
    return absl::NotFoundError(
        absl::StrCat(name_, "[", CurrentHduName(), "]: missing keyword ", key));
  }
  if (status != 0) return Error(status, absl::StrCat("keyword ", key));
  return std::string(value);
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

template <typename T>
absl::Status FitsFile::WriteImage(absl::string_view extname, const std::vector<long>& naxes,
                                  const T* data) {
  int status = 0;
  std::vector<long> axes = naxes;
  fits_create_img(fptr_, FitsType<T>::kImg, static_cast<int>(axes.size()), axes.data(), &status);
  std::string name(extname);
  fits_update_key(fptr_, TSTRING, "EXTNAME", name.data(), nullptr, &status);
  if (status != 0) return Error(status, absl::StrCat("creating image HDU ", extname));
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
  for (const std::string& card : cards) {
    char keyname[FLEN_KEYWORD] = {0};
    int len = 0, kst = 0;
    fits_get_keyname(const_cast<char*>(card.c_str()), keyname, &len, &kst);
    if (IsStructuralKey(keyname)) continue;
    std::string key(keyname);
    if (key.empty() || key == "COMMENT" || key == "HISTORY") {
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
  fits_update_key(fptr_, TSTRING, key, const_cast<char*>(value.c_str()), comment, &status);
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

#define SPEXD_INSTANTIATE(T)                                               \
  template absl::StatusOr<std::vector<T>> FitsFile::ReadImage<T>();        \
  template absl::Status FitsFile::WriteImage<T>(absl::string_view, const std::vector<long>&, \
                                                const T*);
SPEXD_INSTANTIATE(double)
SPEXD_INSTANTIATE(float)
SPEXD_INSTANTIATE(int32_t)
SPEXD_INSTANTIATE(uint32_t)
SPEXD_INSTANTIATE(int16_t)
SPEXD_INSTANTIATE(uint16_t)
SPEXD_INSTANTIATE(uint8_t)
SPEXD_INSTANTIATE(int64_t)
#undef SPEXD_INSTANTIATE

}  // namespace spexd::core
