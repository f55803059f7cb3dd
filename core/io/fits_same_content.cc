#include "core/io/fits_same_content.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/io/internal/fits_card_value.h"
#include "core/io/internal/gzip.h"

namespace spexd::core {
namespace {

constexpr int64_t kRecord = 2880;  // FITS 4.0 §3.1
constexpr int64_t kCard = 80;
constexpr int64_t kMaxAxes = 999;  // §4.4.1.1

int64_t RoundUpToRecord(int64_t n) { return (n + kRecord - 1) / kRecord * kRecord; }

// The structural cards of one header (§4.4.1), as they are read.
struct HduSize {
  std::optional<int64_t> bitpix, naxis;
  int64_t pcount = 0, gcount = 1;
  std::vector<std::optional<int64_t>> axes;  // NAXISn, n = 1..NAXIS

  void Read(const std::string& key, absl::string_view field) {
    const std::optional<int64_t> v = internal::CardInteger(field);
    if (key == "BITPIX") {
      bitpix = v;
    } else if (key == "NAXIS") {
      naxis = v;
    } else if (key == "PCOUNT") {
      pcount = v.value_or(-1);
    } else if (key == "GCOUNT") {
      gcount = v.value_or(-1);
    } else if (key.size() > 5 && key.compare(0, 5, "NAXIS") == 0) {
      int n = 0;
      if (absl::SimpleAtoi(key.substr(5), &n) && n >= 1 && n <= kMaxAxes) {
        if (axes.size() < static_cast<std::size_t>(n)) axes.resize(static_cast<std::size_t>(n));
        axes[static_cast<std::size_t>(n - 1)] = v;
      }
    }
  }

  // Bytes of the data unit, bounded by `limit` (the file's size); nullopt when malformed.
  std::optional<int64_t> DataBytes(int64_t limit) const {
    if (!bitpix || !naxis || *naxis < 0 || *naxis > kMaxAxes || pcount < 0 || gcount < 0) {
      return std::nullopt;
    }
    const int64_t b = *bitpix < 0 ? -*bitpix : *bitpix;
    if (b != 8 && b != 16 && b != 32 && b != 64) return std::nullopt;
    int64_t values = *naxis > 0 ? 1 : 0;
    for (int64_t i = 0; i < *naxis; ++i) {
      if (static_cast<std::size_t>(i) >= axes.size() || !axes[static_cast<std::size_t>(i)]) {
        return std::nullopt;
      }
      const int64_t len = *axes[static_cast<std::size_t>(i)];
      if (len < 0 || (len != 0 && values > limit / len)) return std::nullopt;
      values *= len;
    }
    const int64_t per_group = pcount + values;
    if (per_group > limit || (gcount != 0 && per_group > limit / gcount)) return std::nullopt;
    const int64_t words = gcount * per_group;
    if (words > limit / (b / 8)) return std::nullopt;
    return words * (b / 8);
  }
};

}  // namespace

// The gzip side: inflated pieces go straight to Compare.
struct StoredFitsComparer::Inflate {
  explicit Inflate(StoredFitsComparer* c)
      : inflater(c->name_, [c](absl::string_view piece) {
          // Any error stops the inflation; the comparer has recorded why.
          return c->Compare(piece) ? absl::OkStatus() : absl::CancelledError("different");
        }) {}
  GzipInflater inflater;
};

StoredFitsComparer::~StoredFitsComparer() = default;

absl::StatusOr<std::unique_ptr<StoredFitsComparer>> StoredFitsComparer::Create(
    std::vector<absl::string_view> expected, bool gzip, std::string name) {
  std::unique_ptr<StoredFitsComparer> c(new StoredFitsComparer());
  c->name_ = std::move(name);
  for (absl::string_view p : expected) {
    if (p.empty()) continue;
    c->piece_start_.push_back(c->size_);
    c->pieces_.push_back(p);
    c->size_ += static_cast<int64_t>(p.size());
  }
  // Walks the headers of the new file (ours, written by FrameToFits or ModelToFits) to
  // find the cards to skip; data units are stepped over by their declared size, so that
  // bytes of a table that happen to spell a card are compared like any other.
  auto invalid = [&](int hdu, absl::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat(c->name_, ": the new file's HDU ", hdu, ": ", what));
  };
  std::string card(kCard, ' ');
  auto card_at = [&](int64_t at) {
    for (int64_t done = 0; done < kCard;) {  // a card may straddle two pieces
      const auto it = std::upper_bound(c->piece_start_.begin(), c->piece_start_.end(), at + done);
      const std::size_t i = static_cast<std::size_t>(it - c->piece_start_.begin()) - 1;
      const int64_t off = at + done - c->piece_start_[i];
      const int64_t n = std::min<int64_t>(kCard - done,
                                          static_cast<int64_t>(c->pieces_[i].size()) - off);
      std::memcpy(&card[static_cast<std::size_t>(done)], c->pieces_[i].data() + off,
                  static_cast<std::size_t>(n));
      done += n;
    }
  };
  int64_t at = 0;
  for (int hdu = 0; at < c->size_; ++hdu) {
    HduSize shape;
    int64_t next = at;
    for (bool end = false; !end; next += kCard) {
      if (next + kCard > c->size_) return invalid(hdu, "no END card");
      card_at(next);
      const std::string key(absl::StripTrailingAsciiWhitespace(absl::string_view(card).substr(0, 8)));
      end = key == "END";
      if (end || card.compare(8, 2, "= ") != 0) continue;
      shape.Read(key, absl::string_view(card).substr(10));
      if (key == "CHECKSUM") {
        c->skips_.push_back({next + 10, next + kCard});
      } else if (key == "DATASUM") {
        // Its comment only: the value ('<digits>') is the data's sum, a pure function of it.
        const std::size_t close = card.find('\'', 11);
        const std::size_t slash = close == std::string::npos ? close : card.find('/', close);
        if (slash != std::string::npos) {
          c->skips_.push_back({next + static_cast<int64_t>(slash), next + kCard});
        }
      }
    }
    const std::optional<int64_t> data = shape.DataBytes(c->size_);
    if (!data) return invalid(hdu, "malformed structural keywords");
    at += RoundUpToRecord(next - at) + RoundUpToRecord(*data);
  }
  if (at != c->size_) {
    return absl::InvalidArgumentError(
        absl::StrCat(c->name_, ": the new file's HDUs do not end where the file does"));
  }
  if (gzip) c->inflate_ = std::make_unique<Inflate>(c.get());
  return c;
}

bool StoredFitsComparer::SizeCanMatch(int64_t bytes) const {
  if (inflate_ == nullptr) return bytes == size_;
  // deflate's stored blocks add 5 bytes per 64 KiB; gzip's header (a name, a comment) and
  // trailer a few more: 1/256 and 64 KiB of margin are ample.
  return bytes >= 18 && bytes <= size_ + size_ / 256 + 65536;
}

bool StoredFitsComparer::Differ(std::string why) {
  if (!differs_) {
    differs_ = true;
    difference_ = std::move(why);
  }
  return false;
}

bool StoredFitsComparer::Compare(absl::string_view bytes) {
  while (!bytes.empty()) {
    if (differs_) return false;
    if (pos_ >= size_) {
      return Differ(absl::StrCat("its content is longer than the new file's ", size_, " bytes"));
    }
    while (pos_ >= piece_start_[piece_] + static_cast<int64_t>(pieces_[piece_].size())) ++piece_;
    while (skip_ < skips_.size() && skips_[skip_].end <= pos_) ++skip_;
    const int64_t in_piece = pos_ - piece_start_[piece_];
    int64_t n = std::min<int64_t>(static_cast<int64_t>(bytes.size()),
                                  static_cast<int64_t>(pieces_[piece_].size()) - in_piece);
    bool skipped = false;
    if (skip_ < skips_.size()) {
      const Skip& s = skips_[skip_];
      skipped = s.begin <= pos_;
      n = std::min(n, skipped ? s.end - pos_ : s.begin - pos_);
    }
    if (!skipped) {
      const char* want = pieces_[piece_].data() + in_piece;
      if (std::memcmp(want, bytes.data(), static_cast<std::size_t>(n)) != 0) {
        int64_t i = 0;
        while (want[i] == bytes[static_cast<std::size_t>(i)]) ++i;
        return Differ(absl::StrCat("its content differs at byte ", pos_ + i));
      }
    }
    pos_ += n;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return !differs_;
}

bool StoredFitsComparer::Feed(absl::string_view stored) {
  if (differs_) return false;
  if (inflate_ == nullptr) return Compare(stored);
  const absl::Status st = inflate_->inflater.Feed(stored);
  if (!st.ok()) return Differ(std::string(st.message()));
  return !differs_;
}

bool StoredFitsComparer::Finish() {
  if (differs_) return false;
  if (inflate_ != nullptr) {
    const absl::Status st = inflate_->inflater.Finish();
    if (!st.ok()) return Differ(std::string(st.message()));
  }
  if (pos_ != size_) {
    return Differ(absl::StrCat("its content has ", pos_, " bytes, the new file ", size_));
  }
  return true;
}

}  // namespace spexd::core
