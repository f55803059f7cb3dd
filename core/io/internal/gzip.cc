#include "core/io/internal/gzip.h"

#include <libdeflate.h>
#include <zlib.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace spexd::core {
namespace {

// gzip framing for zlib's inflateInit2/deflateInit2 (zlib.h: windowBits + 16).
constexpr int kGzipWindowBits = 16 + MAX_WBITS;
constexpr std::size_t kOutPiece = 256 * 1024;
// zlib counts in uInt: feed at most this much per call.
constexpr std::size_t kMaxZlibChunk = 1u << 30;

}  // namespace

bool IsGzip(absl::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

uint32_t GzipTrailerSize(absl::string_view gz) {
  if (gz.size() < 4) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(gz.data() + gz.size() - 4);
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

absl::StatusOr<std::size_t> InflateGzipInto(absl::string_view gz, char* out,
                                            std::size_t capacity, absl::string_view name,
                                            const std::function<bool()>& stop,
                                            const internal::ParallelInflateOptions& parallel) {
  std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> d(
      libdeflate_alloc_decompressor(), &libdeflate_free_decompressor);
  if (d == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat(name, ": cannot allocate a decompressor"));
  }
  std::size_t in_done = 0, out_done = 0;
  int members = 0;
  while (in_done < gz.size()) {
    const absl::string_view rest = gz.substr(in_done);
    // NUL padding after the last member, as gzip -d accepts it.
    if (members > 0 && rest.find_first_not_of('\0') == absl::string_view::npos) break;
    if (stop && stop()) return absl::CancelledError(absl::StrCat(name, ": decompression stopped"));
    std::size_t in_n = 0, out_n = 0;
    if (internal::ParallelInflateChunks(rest.size(), parallel) >= 2) {
      if (internal::ParallelInflate(rest, out + out_done, capacity - out_done, parallel, &in_n, &out_n)) {
        in_done += in_n;
        out_done += out_n;
        ++members;
        continue;
      }
      if (stop && stop()) return absl::CancelledError(absl::StrCat(name, ": decompression stopped"));
    }
    const libdeflate_result r =
        libdeflate_gzip_decompress_ex(d.get(), rest.data(), rest.size(), out + out_done,
                                      capacity - out_done, &in_n, &out_n);
    if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
      return absl::OutOfRangeError(
          absl::StrCat(name, ": inflates to more than ", capacity, " bytes"));
    }
    if (r != LIBDEFLATE_SUCCESS) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, ": corrupt or truncated gzip data (member ", members + 1, ")"));
    }
    in_done += in_n;
    out_done += out_n;
    ++members;
  }
  if (members == 0) return absl::InvalidArgumentError(absl::StrCat(name, ": truncated gzip data (empty)"));
  return out_done;
}

absl::StatusOr<std::string> GzipCompress(absl::string_view data) {
  z_stream zs{};
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, kGzipWindowBits, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::ResourceExhaustedError("gzip: cannot initialise zlib's deflate");
  }
  std::string out;
  out.resize(static_cast<std::size_t>(deflateBound(&zs, static_cast<uLong>(data.size()))) + 64);
  std::size_t in_done = 0;
  int ret = Z_OK;
  while (ret != Z_STREAM_END) {
    const std::size_t in_now = std::min(kMaxZlibChunk, data.size() - in_done);
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data() + in_done));
    zs.avail_in = static_cast<uInt>(in_now);
    if (zs.total_out + kOutPiece > out.size()) out.resize(out.size() + kOutPiece);
    const std::size_t out_room = std::min(kMaxZlibChunk, out.size() - zs.total_out);
    zs.next_out = reinterpret_cast<Bytef*>(out.data() + zs.total_out);
    zs.avail_out = static_cast<uInt>(out_room);
    const bool last = in_done + in_now == data.size();
    ret = deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
    in_done += in_now - zs.avail_in;
    if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR) {
      deflateEnd(&zs);
      return absl::InternalError(absl::StrCat("gzip: deflate failed (zlib code ", ret, ")"));
    }
  }
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

struct GzipInflater::State {
  z_stream zs{};
  bool initialised = false;
  bool in_member = false;  // inside a member whose end has not been seen
  int members = 0;         // complete members
  bool padding = false;    // NUL bytes seen after the last member
  absl::Status error;      // sticky
  std::string out = std::string(kOutPiece, '\0');
};

GzipInflater::GzipInflater(std::string name, Sink sink)
    : name_(std::move(name)), sink_(std::move(sink)), state_(std::make_unique<State>()) {
  state_->initialised = inflateInit2(&state_->zs, kGzipWindowBits) == Z_OK;
}

GzipInflater::~GzipInflater() {
  if (state_->initialised) inflateEnd(&state_->zs);
}

absl::Status GzipInflater::Fail(absl::string_view what) {
  state_->error = absl::InvalidArgumentError(absl::StrCat(name_, ": ", what));
  return state_->error;
}

absl::Status GzipInflater::Feed(absl::string_view input) {
  State& s = *state_;
  if (!s.error.ok()) return s.error;
  if (!s.initialised) {
    s.error = absl::ResourceExhaustedError(absl::StrCat(name_, ": cannot initialise zlib"));
    return s.error;
  }
  z_stream& zs = s.zs;
  while (!input.empty()) {
    const std::size_t in_now = std::min(kMaxZlibChunk, input.size());
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(input.data()));
    zs.avail_in = static_cast<uInt>(in_now);
    for (;;) {
      if (!s.in_member) {
        if (zs.avail_in == 0) break;
        if (s.members > 0 && *zs.next_in == 0) {  // NUL padding after the stream
          ++zs.next_in;
          --zs.avail_in;
          s.padding = true;
          continue;
        }
        if (s.padding) return Fail("data after the gzip stream and its padding");
        if (s.members > 0) inflateReset(&zs);  // another member follows
        s.in_member = true;
      }
      zs.next_out = reinterpret_cast<Bytef*>(s.out.data());
      zs.avail_out = static_cast<uInt>(s.out.size());
      const int ret = inflate(&zs, Z_NO_FLUSH);
      if (ret != Z_OK && ret != Z_STREAM_END && ret != Z_BUF_ERROR) {
        return Fail(absl::StrCat("corrupt gzip data (",
                                 zs.msg != nullptr ? zs.msg : "zlib error", ")"));
      }
      const std::size_t produced = s.out.size() - zs.avail_out;
      if (produced > 0) {
        absl::Status sunk = sink_(absl::string_view(s.out.data(), produced));
        if (!sunk.ok()) {
          s.error = sunk;
          return sunk;
        }
      }
      if (ret == Z_STREAM_END) {
        s.in_member = false;
        ++s.members;
        continue;
      }
      // Z_BUF_ERROR: no progress possible without more input. Z_OK with output room
      // left: the input is used up.
      if (ret == Z_BUF_ERROR || (zs.avail_in == 0 && zs.avail_out != 0)) break;
    }
    input.remove_prefix(in_now - zs.avail_in);
    if (zs.avail_in != 0) return Fail("corrupt gzip data (inflate stalled)");
  }
  return absl::OkStatus();
}

absl::Status GzipInflater::Finish() {
  State& s = *state_;
  if (!s.error.ok()) return s.error;
  if (s.in_member || s.members == 0) {
    return Fail("truncated gzip data (the stream ends before its end-of-stream marker)");
  }
  return absl::OkStatus();
}

}  // namespace spexd::core
