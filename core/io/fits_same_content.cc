#include "core/io/fits_same_content.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/io/internal/fits_layout.h"
#include "core/io/internal/gzip.h"

namespace spexd::core {
namespace {

constexpr int64_t kRecord = 2880;  // FITS 4.0 §3.1
constexpr int64_t kCard = 80;

int64_t RoundUpToRecord(int64_t n) { return (n + kRecord - 1) / kRecord * kRecord; }

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
  // The new file (ours, written by FrameToFits or ModelToFits) is walked by the checker
  // every FITS input gets (fits_layout.h), which gives each HDU's header and data; the
  // cards to skip are looked for in the headers only, so that bytes of a table that
  // happen to spell a card are compared like any other.
  auto read = [&](int64_t at, std::size_t n, char* out) {  // a range may straddle pieces
    if (at < 0 || at + static_cast<int64_t>(n) > c->size_) return false;
    for (std::size_t done = 0; done < n;) {
      const int64_t pos = at + static_cast<int64_t>(done);
      const auto it = std::upper_bound(c->piece_start_.begin(), c->piece_start_.end(), pos);
      const std::size_t i = static_cast<std::size_t>(it - c->piece_start_.begin()) - 1;
      const std::size_t off = static_cast<std::size_t>(pos - c->piece_start_[i]);
      const std::size_t k = std::min(n - done, c->pieces_[i].size() - off);
      std::memcpy(out + done, c->pieces_[i].data() + off, k);
      done += k;
    }
    return true;
  };
  std::vector<FitsHduSpan> spans;
  if (absl::Status st = CheckFitsLayout(read, c->size_, c->name_, &spans); !st.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the new file: ", st.message()));
  }
  std::string card(kCard, ' ');
  for (const FitsHduSpan& hdu : spans) {
    for (int64_t at = hdu.header_start; at < hdu.data_start; at += kCard) {
      read(at, card.size(), card.data());
      const std::string key(absl::StripTrailingAsciiWhitespace(absl::string_view(card).substr(0, 8)));
      if (key == "END") break;
      if (card.compare(8, 2, "= ") != 0) continue;
      if (key == "CHECKSUM") {
        c->skips_.push_back({at + 10, at + kCard});
      } else if (key == "DATASUM") {
        // Its comment only: the value ('<digits>') is the data's sum, a pure function of it.
        const std::size_t close = card.find('\'', 11);
        const std::size_t slash = close == std::string::npos ? close : card.find('/', close);
        if (slash != std::string::npos) c->skips_.push_back({at + static_cast<int64_t>(slash), at + kCard});
      }
    }
  }
  if (spans.empty() ||
      spans.back().data_start + RoundUpToRecord(spans.back().data_bytes) != c->size_) {
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
