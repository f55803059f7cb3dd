#include "core/io/internal/gzip_image.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/status_macros.h"
#include "core/base/write_fully.h"

namespace spexd::core {

GzipImage::GzipImage(absl::string_view image, std::size_t chunk_bytes, std::vector<int64_t> cuts)
    : image_(image), chunk_bytes_(std::clamp<std::size_t>(chunk_bytes, 1, std::size_t{1} << 30)) {
  const int64_t size = static_cast<int64_t>(image_.size());
  const int64_t step = static_cast<int64_t>(chunk_bytes_);
  cuts.push_back(size);
  std::sort(cuts.begin(), cuts.end());
  int64_t at = 0;
  for (int64_t cut : cuts) {
    if (cut <= at || cut > size) continue;
    for (; at < cut; at = std::min(cut, at + step)) starts_.push_back(at);
  }
  for (std::size_t i = 0; i < starts_.size(); ++i) {
    const int64_t end = i + 1 < starts_.size() ? starts_[i + 1] : size;
    pending_.push_back(end - starts_[i]);
  }
  starts_.push_back(size);
  chunks_.resize(pending_.size());
}

absl::Status GzipImage::Final(int64_t offset, int64_t n) {
  const int64_t size = static_cast<int64_t>(image_.size());
  if (offset < 0 || n < 0 || offset > size || n > size - offset || finished_) {
    return absl::InternalError(absl::StrCat("gzip image: bytes [", offset, ", ", offset + n,
                                            ") are outside the ", size, "-byte image"));
  }
  if (n == 0) return absl::OkStatus();
  // The chunk holding `offset`: the last start at or before it.
  std::size_t i = static_cast<std::size_t>(
      std::upper_bound(starts_.begin(), starts_.end() - 1, offset) - starts_.begin() - 1);
  for (; i + 1 < starts_.size() && starts_[i] < offset + n; ++i) {
    const int64_t overlap = std::min(offset + n, starts_[i + 1]) - std::max(offset, starts_[i]);
    int64_t& left = pending_[i];
    if (overlap > left) {
      return absl::InternalError(
          absl::StrCat("gzip image: bytes of chunk ", i, " declared final twice"));
    }
    left -= overlap;
    if (left == 0) ready_.push_back(i);
  }
  return absl::OkStatus();
}

absl::Status GzipImage::Deflate(const std::vector<std::size_t>& which, TaskPool* pool,
                                int workers) {
  const std::size_t nimage = pending_.size();
  const std::size_t last = chunks_.size() - 1;
  std::vector<absl::Status> status(which.size());
  ParallelFor(pool, std::max(1, workers), static_cast<int>(which.size()), [&](int, int t) {
    const std::size_t i = which[static_cast<std::size_t>(t)];
    const absl::string_view data =
        i < nimage
            ? image_.substr(static_cast<std::size_t>(starts_[i]),
                            static_cast<std::size_t>(starts_[i + 1] - starts_[i]))
            : absl::string_view(tail_).substr((i - nimage) * chunk_bytes_, chunk_bytes_);
    auto chunk = DeflateGzipChunk(data, finished_ && i == last);
    if (chunk.ok()) {
      chunks_[i] = *std::move(chunk);
    } else {
      status[static_cast<std::size_t>(t)] = chunk.status();
    }
  });
  for (const absl::Status& st : status) SPEXD_RETURN_IF_ERROR(st);
  return absl::OkStatus();
}

absl::Status GzipImage::CompressReady(TaskPool* pool, int workers) {
  if (ready_.empty()) return absl::OkStatus();
  std::vector<std::size_t> which = std::move(ready_);
  ready_.clear();
  early_ += static_cast<int>(which.size());
  return Deflate(which, pool, workers);
}

absl::Status GzipImage::Finish(absl::string_view tail, TaskPool* pool, int workers, int fd,
                               absl::string_view name) {
  SPEXD_RETURN_IF_ERROR(Seal(tail, pool, workers, name));
  return Write(fd, name);
}

absl::Status GzipImage::Seal(absl::string_view tail, TaskPool* pool, int workers,
                             absl::string_view name) {
  const std::size_t nimage = pending_.size();
  for (std::size_t i = 0; i < nimage; ++i) {
    if (pending_[i] != 0) {
      return absl::InternalError(absl::StrCat(name, ": ", pending_[i], " bytes of gzip chunk ", i,
                                              " never written"));
    }
  }
  finished_ = true;
  tail_.assign(tail.data(), tail.size());
  // No tail: one empty chunk, for the final block.
  const std::size_t ntail =
      std::max<std::size_t>(1, (tail_.size() + chunk_bytes_ - 1) / chunk_bytes_);
  chunks_.resize(nimage + ntail);
  // What CompressReady has not deflated: the chunks made final since, and the tail's.
  std::vector<std::size_t> which = std::move(ready_);
  ready_.clear();
  for (std::size_t i = nimage; i < nimage + ntail; ++i) which.push_back(i);
  late_ = static_cast<int>(which.size());
  SPEXD_RETURN_IF_ERROR(Deflate(which, pool, workers));
  for (std::size_t i : which) late_bytes_ += static_cast<int64_t>(chunks_[i].input);
  std::vector<const GzipChunk*> order;
  order.reserve(chunks_.size());
  for (const GzipChunk& c : chunks_) order.push_back(&c);
  ends_ = MemberEndsOf(order);
  sealed_ = true;
  return absl::OkStatus();
}

absl::Status GzipImage::Write(int fd, absl::string_view name) const {
  if (!sealed_) return absl::InternalError(absl::StrCat(name, ": gzip member written before it was sealed"));
  int64_t at = 0;
  for (absl::string_view piece : pieces()) {
    SPEXD_RETURN_IF_ERROR(WriteFully(fd, piece.data(), piece.size(), at, name));
    at += static_cast<int64_t>(piece.size());
  }
  return absl::OkStatus();
}

std::vector<absl::string_view> GzipImage::pieces() const {
  if (!sealed_) return {};
  std::vector<absl::string_view> out;
  out.reserve(chunks_.size() + 2);
  out.emplace_back(ends_.header, sizeof(ends_.header));
  for (const GzipChunk& c : chunks_) out.push_back(c.view());
  out.emplace_back(ends_.trailer, sizeof(ends_.trailer));
  return out;
}

int64_t GzipImage::size() const {
  int64_t n = 0;
  for (absl::string_view p : pieces()) n += static_cast<int64_t>(p.size());
  return n;
}

}  // namespace spexd::core
