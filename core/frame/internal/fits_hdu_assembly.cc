#include "core/frame/internal/fits_hdu_assembly.h"

#include <fitsio.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "core/base/parallel_for.h"
#include "core/base/prefault.h"
#include "core/base/status_macros.h"
#include "core/frame/internal/fits_checksum.h"

namespace spexd::core::internal {
namespace {

constexpr int64_t kBlock = 2880;  // FITS logical record (FITS 4.0 §3.1)

}  // namespace

std::size_t BytesPerValue(HduSource::Encoding e) {
  return e == HduSource::Encoding::kFloat64 ? 8 : 4;
}

namespace {

// The size of the current HDU's data unit from its header (FITS 4.0 §4.4.1.1, eq. 2):
// |BITPIX|/8 * GCOUNT * (PCOUNT + NAXIS1 * ... * NAXISm), 0 when NAXIS is 0.
absl::StatusOr<int64_t> DataUnitBytes(FitsFile& f) {
  int status = 0;
  long bitpix = 0, naxis = 0;
  fits_read_key_lng(f.get(), "BITPIX", &bitpix, nullptr, &status);
  fits_read_key_lng(f.get(), "NAXIS", &naxis, nullptr, &status);
  if (status != 0) return f.Error(status, "reading BITPIX/NAXIS");
  if (naxis == 0) return 0;
  int64_t product = 1;
  for (long i = 1; i <= naxis; ++i) {
    long n = 0;
    fits_read_key_lng(f.get(), absl::StrCat("NAXIS", i).c_str(), &n, nullptr, &status);
    product *= n;
  }
  long pcount = 0, gcount = 1;
  for (auto [key, value] : {std::pair{"PCOUNT", &pcount}, std::pair{"GCOUNT", &gcount}}) {
    int tstatus = 0;
    if (fits_read_key_lng(f.get(), key, value, nullptr, &tstatus) != 0 && tstatus != KEY_NO_EXIST) {
      status = tstatus;
    }
  }
  if (status != 0) return f.Error(status, "reading the data unit's size");
  return std::abs(bitpix) / 8 * gcount * (pcount + product);
}

}  // namespace

absl::Status BuildHdu(const HduSource& src, const std::string& time, BuiltHdu* out) {
  SPEXD_ASSIGN_OR_RETURN(FitsFile scratch, FitsFile::CreateMemory("HDU"));
  out->scratch.emplace(std::move(scratch));
  FitsFile& f = *out->scratch;
  int status = 0;
  if (!src.primary) fits_create_img(f.get(), BYTE_IMG, 0, nullptr, &status);
  if (status != 0) return f.Error(status, "creating a scratch primary HDU");
  SPEXD_RETURN_IF_ERROR(src.build(f));
  SPEXD_ASSIGN_OR_RETURN(out->data_bytes, DataUnitBytes(f));
  const bool encoded = src.encoding != HduSource::Encoding::kByBuild;
  if (encoded) {
    if (out->data_bytes != static_cast<int64_t>(src.count * BytesPerValue(src.encoding))) {
      return absl::InternalError(absl::StrCat(f.name(), ": header has ", out->data_bytes,
                                              " data bytes, the values ", src.count));
    }
    // CFITSIO zero-fills a memory file up to the end of the data unit the header
    // announces as soon as the header is closed: 70 MB of fresh pages over an r frame's
    // scratch files, for data written elsewhere. NAXIS1 is 0 in the scratch file; the
    // real card goes back into the header's bytes (ChecksumCards::ReplaceCard).
    char card[FLEN_CARD] = {0};
    fits_read_card(f.get(), "NAXIS1", card, &status);
    fits_modify_key_lng(f.get(), "NAXIS1", 0, "&", &status);
    if (status != 0) return f.Error(status, "setting aside NAXIS1");
    std::string real(card);
    real.resize(80, ' ');
    out->cards.ReplaceCard(std::move(real));
  }
  SPEXD_RETURN_IF_ERROR(out->cards.Begin(f, time));
  LONGLONG headstart = 0, datastart = 0, dataend = 0;
  fits_get_hduaddrll(f.get(), &headstart, &datastart, &dataend, &status);
  if (status != 0) return f.Error(status, "locating the HDU");
  out->header_bytes = datastart - headstart;
  out->padded_bytes = (out->data_bytes + kBlock - 1) / kBlock * kBlock;
  if ((encoded ? 0 : out->padded_bytes) != dataend - datastart) {
    return absl::InternalError(absl::StrCat(f.name(), ": data unit of ", dataend - datastart,
                                            " bytes for ", out->data_bytes));
  }
  if (src.encoding == HduSource::Encoding::kByBuild && out->data_bytes > 0) {
    SPEXD_ASSIGN_OR_RETURN(out->data, f.WrittenBytes(datastart, out->data_bytes));
  }
  return absl::OkStatus();
}

namespace {

// Adds the time since the last lap to a phase of `times` (nothing when null).
class PhaseClock {
 public:
  explicit PhaseClock(FitsWriteTimes* times) : times_(times) {}
  void Lap(double FitsWriteTimes::*phase) {
    const auto now = std::chrono::steady_clock::now();
    if (times_ != nullptr) times_->*phase += std::chrono::duration<double>(now - last_).count();
    last_ = now;
  }

 private:
  FitsWriteTimes* times_;
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// One piece of phase 2: values [begin, end) of an encoded HDU, or a whole built data unit.
struct DataTask {
  int hdu = 0;
  std::size_t begin = 0, end = 0;
};

uint32_t Encode(const HduSource& src, const DataTask& t, char* data_unit) {
  return EncodeValues(src.encoding, src.values, t.begin, t.end,
                      data_unit + t.begin * BytesPerValue(src.encoding));
}

// An output buffer's pages are prepared in pieces of this size, one per task.
constexpr std::size_t kOutputPiece = std::size_t{4} << 20;

// fn(at, len) for each piece [at, at + len) of [0, n), spread over `workers` of `pool`.
void ForEachOutputPiece(std::size_t n, TaskPool* pool, int workers,
                        absl::FunctionRef<void(std::size_t at, std::size_t len)> fn) {
  const int pieces = static_cast<int>((n + kOutputPiece - 1) / kOutputPiece);
  ParallelFor(pool, workers, pieces, [&](int, int c) {
    const std::size_t at = static_cast<std::size_t>(c) * kOutputPiece;
    fn(at, std::min(kOutputPiece, n - at));
  });
}

}  // namespace

std::string ZeroFilledOutput(std::size_t n, TaskPool* pool, int workers) {
  std::string s;
  if (n < 2 * kOutputPiece) return std::string(n, '\0');
  s.reserve(n);  // capacity only: the pages are not touched yet
  AdviseHugePages(s.data(), n);
  ForEachOutputPiece(n, pool, workers, [&](std::size_t at, std::size_t len) {
    PrefaultForWrite(s.data() + at, len);
  });
  s.resize(n);  // the zero fill, at memory speed now
  return s;
}

PlaneBuffer<char> ZeroFilledBlock(std::size_t n, PlaneBufferPool* buffers, TaskPool* pool,
                                  int workers) {
  PlaneBuffer<char> b = PlaneBuffer<char>::Make(n, buffers);
  ForEachOutputPiece(n, pool, workers,
                     [&](std::size_t at, std::size_t len) { std::memset(b.data() + at, 0, len); });
  return b;
}

PlaneBuffer<char> ImageWithZeroedGaps(const std::vector<BuiltHdu>& built,
                                      const std::vector<HduSource>& hdus, int64_t n,
                                      PlaneBufferPool* buffers, TaskPool* pool, int workers) {
  int64_t at = 0;
  for (const BuiltHdu& b : built) {
    if (b.offset != at || b.data_bytes > b.padded_bytes) break;
    at = b.offset + b.header_bytes + b.padded_bytes;
  }
  if (at != n) return ZeroFilledBlock(static_cast<std::size_t>(n), buffers, pool, workers);
  PlaneBuffer<char> image = PlaneBuffer<char>::Make(static_cast<std::size_t>(n), buffers);
  for (std::size_t i = 0; i < built.size(); ++i) {
    const BuiltHdu& b = built[i];
    char* data = image.data() + b.offset + b.header_bytes;
    const bool by_build = hdus[i].encoding == HduSource::Encoding::kByBuild;
    const int64_t filled =
        by_build ? std::min<int64_t>(static_cast<int64_t>(b.data.size()), b.data_bytes)
                 : b.data_bytes;
    std::memset(image.data() + b.offset, 0, static_cast<std::size_t>(b.header_bytes));
    std::memset(data + filled, 0, static_cast<std::size_t>(b.padded_bytes - filled));
  }
  return image;
}

uint32_t EncodeValues(HduSource::Encoding encoding, const void* values, std::size_t begin,
                      std::size_t end, char* out) {
  const std::size_t n = end - begin;
  switch (encoding) {
    case HduSource::Encoding::kFloat32:
      return EncodeFloat32(static_cast<const double*>(values) + begin, n, out);
    case HduSource::Encoding::kUint32WithZero:
      return EncodeUint32WithZero(static_cast<const uint32_t*>(values) + begin, n, out);
    case HduSource::Encoding::kFloat64:
      return EncodeFloat64(static_cast<const double*>(values) + begin, n, out);
    case HduSource::Encoding::kByBuild:
      break;
  }
  return 0;
}

uint32_t DataUnitSum(const BuiltHdu& b, char* data_unit) {
  std::memcpy(data_unit, b.data.data(), b.data.size());
  uint32_t sum = OnesComplementSum(b.data.data(), b.data.size() / 4 * 4);
  // A unit whose size is not a multiple of 4: its last word ends in padding zeros.
  if (b.data.size() % 4 != 0) sum = OnesComplementSum(data_unit + b.data.size() / 4 * 4, 4, sum);
  return sum;
}

absl::StatusOr<std::string> FinishHeader(BuiltHdu& b, uint32_t datasum) {
  absl::StatusOr<std::string> header = absl::ResourceExhaustedError("out of memory");
  try {
    header = b.cards.Finish(*b.scratch, datasum);
  } catch (const std::bad_alloc&) {
  }
  if (header.ok() && static_cast<int64_t>(header->size()) != b.header_bytes) {
    return absl::InternalError(absl::StrCat(b.scratch->name(), ": header grew from ",
                                            b.header_bytes, " to ", header->size(), " bytes"));
  }
  return header;
}

WriterThreads::WriterThreads(const FitsWriteOptions& options)
    : workers_(options.threads > 0 ? options.threads : DefaultFitsWriteThreads()),
      pool_(options.pool) {
  if (pool_ == nullptr && workers_ > 1) {
    own_ = MakeTaskPool(workers_ - 1);
    pool_ = own_.get();
  }
}

absl::StatusOr<int64_t> BuildHdus(const std::vector<HduSource>& hdus, const std::string& time,
                                  TaskPool* pool, int workers, std::vector<BuiltHdu>* built) {
  built->clear();
  built->resize(hdus.size());
  ParallelFor(pool, workers, static_cast<int>(hdus.size()), [&](int, int i) {
    BuiltHdu& b = (*built)[static_cast<std::size_t>(i)];
    try {  // ParallelFor's bodies must not throw; std::string may
      b.status = BuildHdu(hdus[static_cast<std::size_t>(i)], time, &b);
    } catch (const std::bad_alloc&) {
      b.status = absl::ResourceExhaustedError("out of memory building a FITS header");
    }
  });
  int64_t total = 0;
  for (BuiltHdu& b : *built) {
    SPEXD_RETURN_IF_ERROR(b.status);
    b.offset = total;
    total += b.header_bytes + b.padded_bytes;
  }
  return total;
}

absl::StatusOr<std::string> AssembleFits(const std::vector<HduSource>& hdus,
                                         const WriterThreads& threads,
                                         const std::string& checksum_time,
                                         FitsWriteTimes* times) {
  PhaseClock clock(times);
  TaskPool* pool = threads.pool();
  const int workers = threads.workers();
  const std::string time = checksum_time.empty() ? ChecksumTimeNow() : checksum_time;
  const int nhdu = static_cast<int>(hdus.size());

  // Phase 1: every HDU's header (and small data unit) in its own scratch file.
  std::vector<BuiltHdu> built;
  SPEXD_ASSIGN_OR_RETURN(const int64_t total, BuildHdus(hdus, time, pool, workers, &built));
  clock.Lap(&FitsWriteTimes::headers);
  std::vector<DataTask> tasks;
  for (int i = 0; i < nhdu; ++i) {
    if (hdus[i].encoding == HduSource::Encoding::kByBuild) {
      if (built[i].data_bytes > 0) tasks.push_back({i, 0, 0});
      continue;
    }
    for (std::size_t b = 0; b < hdus[i].count; b += kEncodeChunkValues) {
      tasks.push_back({i, b, std::min(hdus[i].count, b + kEncodeChunkValues)});
    }
  }

  // Phase 2: the data units, encoded and summed in chunks straight into the output
  // (zero-filled: the padding of each unit, FITS 4.0 §3.3.2).
  std::string file = ZeroFilledOutput(static_cast<std::size_t>(total), pool, workers);
  clock.Lap(&FitsWriteTimes::allocate);
  std::vector<uint32_t> sums(tasks.size(), 0);
  ParallelFor(pool, workers, static_cast<int>(tasks.size()), [&](int, int t) {
    const DataTask& task = tasks[t];
    BuiltHdu& b = built[task.hdu];
    char* data_unit = file.data() + b.offset + b.header_bytes;
    if (hdus[task.hdu].encoding == HduSource::Encoding::kByBuild) {
      sums[t] = DataUnitSum(b, data_unit);
    } else {
      sums[t] = Encode(hdus[task.hdu], task, data_unit);
    }
  });

  clock.Lap(&FitsWriteTimes::encode);

  // Phase 3: each header with its DATASUM and CHECKSUM, into place.
  std::vector<uint32_t> datasum(hdus.size(), 0);
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    datasum[tasks[t].hdu] = OnesComplementAdd(datasum[tasks[t].hdu], sums[t]);
  }
  ParallelFor(pool, workers, nhdu, [&](int, int i) {
    BuiltHdu& b = built[i];
    absl::StatusOr<std::string> header = FinishHeader(b, datasum[i]);
    if (!header.ok()) {
      b.status = header.status();
    } else {
      std::memcpy(file.data() + b.offset, header->data(), header->size());
    }
    b.scratch.reset();
  });
  for (const BuiltHdu& b : built) SPEXD_RETURN_IF_ERROR(b.status);
  clock.Lap(&FitsWriteTimes::checksums);
  return file;
}

}  // namespace spexd::core::internal
