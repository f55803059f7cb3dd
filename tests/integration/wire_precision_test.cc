// Through the client library: float32 arrays on the wire (half the stream, the
// same frame file as from float64), server-written frames (no arrays streamed; the
// summary names the file with its size and SHA-256), and their refusals.
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/spexctl/remote_frame.h"
#include "core/frame/frame_writer.h"
#include "core/io/fits_gunzip.h"
#include "gtest/gtest.h"
#include "server/platform/content_id.h"
#include "core/io/fits_file.h"
#include "tests/integration/service_fixture.h"
#include "tests/integration/spawned_server.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

class WirePrecisionTest : public LoadedServerTest {
 protected:
  struct Streamed {
    absl::Status status;
    std::string frame_fits;      // the frame file spexctl would write
    std::string model_fits;
    std::size_t array_bytes = 0;  // BundleData and FrameProducts messages as received
    int bundle_parts = 0, products_parts = 0, model_chunks = 0;
    v1::ExtractSummary summary;
    core::Frame frame;                      // as RemoteFrameBuilder::Finish gives it
    std::vector<uint32_t> products_mask;    // FrameProducts, in row order
    std::vector<v1::ScoreColumn> products_scores;
  };

  // Streams an extraction as spexctl does and builds its frame and model files.
  Streamed Stream(v1::ExtractHeader h) {
    Streamed out;
    client::RemoteFrameBuilder builder;
    client::ExtractCallbacks cb;
    cb.on_header = [&](const v1::FrameHeader& fh) { return builder.OnHeader(fh); };
    cb.on_bundle = [&](v1::BundleData&& part) {
      out.array_bytes += part.ByteSizeLong();
      ++out.bundle_parts;
      return h.results_to_file_only() ? absl::OkStatus() : builder.OnBundle(std::move(part));
    };
    cb.on_products = [&](const v1::FrameProducts& p) {
      out.array_bytes += p.ByteSizeLong();
      ++out.products_parts;
      out.products_mask.insert(out.products_mask.end(), p.mask().begin(), p.mask().end());
      out.products_scores.insert(out.products_scores.end(), p.scores().begin(), p.scores().end());
      return builder.OnProducts(p);
    };
    cb.on_model = [&](const v1::ModelChunk& c) {
      ++out.model_chunks;
      return builder.OnModel(c);
    };
    cb.on_summary = [&](const v1::ExtractSummary& s) { out.summary = s; };
    out.status = client_->Extract(h, nullptr, false, cb);
    if (!out.status.ok() || h.results_to_file_only()) return out;
    const bool exact = h.params().mask_policy() == v1::MASK_POLICY_DESISPEC_EXACT;
    absl::StatusOr<core::Frame> frame =
        builder.Finish(exact ? core::MaskPolicy::kDesispecExact : core::MaskPolicy::kDesispec);
    if (!frame.ok()) {
      out.status = frame.status();
      return out;
    }
    core::FrameMetadata meta = builder.Metadata("psf.fits", "frame.fits");
    meta.scores = !h.params().no_scores();  // as spexctl: desi_extract_spectra --no-scores
    out.frame_fits = core::FrameToFits(*frame, meta).value_or("");
    if (!frame->model.empty()) out.model_fits = core::ModelToFits(*frame, meta).value_or("");
    out.frame = *std::move(frame);
    return out;
  }

  // The same request streamed as float64, then as float32 arrays.
  void StreamBoth(v1::ExtractHeader h, Streamed* f64, Streamed* f32) {
    *f64 = Stream(h);
    ASSERT_TRUE(f64->status.ok()) << f64->status;
    h.set_array_precision(v1::ARRAY_FLOAT32);
    *f32 = Stream(h);
    ASSERT_TRUE(f32->status.ok()) << f32->status;
  }

  v1::ExtractHeader PathHeader(const std::string& frame_path) const {
    v1::ExtractHeader h = SmallHeader(psf_id_);
    h.set_server_path(frame_path);
    h.set_in_img_name("frame.fits");
    h.set_in_psf_name("psf.fits");
    return h;
  }
};

TEST_F(WirePrecisionTest, Float32StreamGivesTheSameFilesInHalfTheBytes) {
  for (const std::string& input : {Inputs().frame_path, Inputs().frame_gz_path}) {
    SCOPED_TRACE(input);
    v1::ExtractHeader h = PathHeader(input);
    h.set_want_model(true);
    Streamed f64, f32;
    ASSERT_NO_FATAL_FAILURE(StreamBoth(h, &f64, &f32));
    ExpectSameFitsContents(f64.frame_fits, f32.frame_fits, "frame");
    ExpectSameFitsContents(f64.model_fits, f32.model_fits, "model");
    EXPECT_EQ(f64.products_parts, 0);
    EXPECT_GE(f32.products_parts, 1);
    EXPECT_GT(f32.model_chunks, 0);
    // float64: 4 planes + 11 diagonals of 8 bytes and the failed flags per bin (121 B);
    // float32: 3 planes + 11 diagonals of 4 bytes, plus the mask (1-2 B varint): ~57 B.
    const double ratio =
        static_cast<double>(f32.array_bytes) / static_cast<double>(f64.array_bytes);
    std::printf("streamed array bytes: float64 %zu, float32 %zu (ratio %.3f)\n", f64.array_bytes,
                f32.array_bytes, ratio);
    RecordProperty("float32_over_float64_bytes", absl::StrCat(ratio));
    EXPECT_LT(ratio, 0.5);
    EXPECT_GT(ratio, 0.4);
  }
}

// A float64 stream that asks for FrameProducts (as the Python client does) gets the
// specmask and RAW scores that core computes from the same float64 arrays on the client
// side (RemoteFrameBuilder's core::ComputeSpecMask, core::RawScores): bit for bit.
TEST_F(WirePrecisionTest, Float64StreamSendsCoreMaskAndScoresWhenAsked) {
  v1::ExtractHeader h = PathHeader(Inputs().frame_path);
  h.set_want_frame_products(true);
  const Streamed s = Stream(h);
  ASSERT_TRUE(s.status.ok()) << s.status;
  EXPECT_GE(s.products_parts, 1);
  ASSERT_FALSE(s.frame.mask.empty());
  EXPECT_EQ(s.products_mask, s.frame.mask);
  const std::vector<core::FrameScore> raw = core::RawScores(s.frame);
  ASSERT_FALSE(raw.empty());
  ASSERT_EQ(s.products_scores.size(), raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    EXPECT_EQ(s.products_scores[i].name(), raw[i].name);
    EXPECT_EQ(s.products_scores[i].comment(), raw[i].comment);
    EXPECT_EQ(std::vector<double>(s.products_scores[i].values().begin(),
                                  s.products_scores[i].values().end()),
              raw[i].values) << raw[i].name;
  }
  // Not asked: none.
  h.set_want_frame_products(false);
  EXPECT_EQ(Stream(h).products_parts, 0);
}

TEST_F(WirePrecisionTest, NoScoresAndExactMaskPolicyOverFloat32) {
  v1::ExtractHeader h = PathHeader(Inputs().frame_path);
  h.mutable_params()->set_no_scores(true);
  h.mutable_params()->set_mask_policy(v1::MASK_POLICY_DESISPEC_EXACT);
  Streamed f64, f32;
  ASSERT_NO_FATAL_FAILURE(StreamBoth(h, &f64, &f32));
  ExpectSameFitsContents(f64.frame_fits, f32.frame_fits, "frame");
  EXPECT_EQ(f32.frame_fits.find("SUM_RAW_COUNT"), std::string::npos);
}

TEST_F(WirePrecisionTest, ServerWrittenFilesStreamNoArraysAndRetryGivesTheSameBytes) {
  v1::ExtractHeader h = PathHeader(Inputs().frame_path);
  h.set_want_model(true);
  const Streamed streamed = Stream(h);
  ASSERT_TRUE(streamed.status.ok()) << streamed.status;
  const std::string out = Inputs().output_dir + "/wire-server.fits.gz";
  const std::string model = Inputs().output_dir + "/wire-server-model.fits";
  h.set_want_model(false);  // implied by server_model_path
  h.set_server_output_path(out);
  h.set_server_model_path(model);
  h.set_results_to_file_only(true);
  const Streamed first = Stream(h);
  ASSERT_TRUE(first.status.ok()) << first.status;
  EXPECT_EQ(first.bundle_parts, 2);  // one progress message per bundle
  EXPECT_LT(first.array_bytes, 200u);  // indices, counts and times only
  EXPECT_EQ(first.model_chunks, 0);
  const std::string gz = ReadBytes(out), model_bytes = ReadBytes(model);
  EXPECT_EQ(first.summary.server_output_path(), out);
  EXPECT_EQ(first.summary.server_output_bytes(), static_cast<int64_t>(gz.size()));
  EXPECT_EQ(first.summary.server_output_sha256(), server::Sha256Hex(gz));
  EXPECT_EQ(first.summary.server_model_path(), model);
  EXPECT_EQ(first.summary.server_model_bytes(), static_cast<int64_t>(model_bytes.size()));
  EXPECT_EQ(first.summary.server_model_sha256(), server::Sha256Hex(model_bytes));
  auto fits = core::GunzipFits(gz, out, core::FitsSizeLimits{});
  ASSERT_TRUE(fits.ok()) << fits.status();
  ExpectSameFitsContents(streamed.frame_fits, *fits, "server-written frame");
  ExpectSameFitsContents(streamed.model_fits, model_bytes, "server-written model");
  // The same request again: without overwrite the files are kept and named again
  // (a retry gets the same answer), with it they are written again.
  const Streamed kept = Stream(h);
  ASSERT_TRUE(kept.status.ok()) << kept.status;
  EXPECT_EQ(kept.summary.server_output_sha256(), first.summary.server_output_sha256());
  EXPECT_EQ(kept.summary.server_model_sha256(), first.summary.server_model_sha256());
  EXPECT_EQ(ReadBytes(out), gz);
  h.set_overwrite(true);
  auto again = client_->ExtractToServerFile(h, nullptr, false);
  ASSERT_TRUE(again.ok()) << again.status();
  auto refits = core::GunzipFits(ReadBytes(out), out, core::FitsSizeLimits{});
  ASSERT_TRUE(refits.ok()) << refits.status();
  ExpectSameFitsContents(*fits, *refits, "rewritten frame");
  ExpectSameFitsContents(model_bytes, ReadBytes(model), "rewritten model");
  // (The gzip sizes may differ: the CHECKSUM comments carry the time of writing.)
  const std::string regz = ReadBytes(out);
  EXPECT_EQ(again->server_output_bytes(), static_cast<int64_t>(regz.size()));
  EXPECT_EQ(again->server_output_sha256(), server::Sha256Hex(regz));
}

// True while this process (the in-process server) holds a file under `dir` open: an
// unnamed temporary shows as "<dir>/#inode (deleted)".
bool HoldsFileUnder(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd", ec)) {
    const std::string target = std::filesystem::read_symlink(e.path(), ec).string();
    if (!ec && absl::StartsWith(target, dir + "/")) return true;
  }
  return false;
}

// A plain .fits output is written bundle by bundle (core::ProgressiveFrameFile):
// the same bytes as the file spexctl writes from the stream, the summary's
// size and SHA-256 those of the file, and the per-bundle writes in their own stage.
TEST_F(WirePrecisionTest, ServerWrittenPlainFitsIsTheClientWrittenFile) {
  for (const std::string& input : {Inputs().frame_path, Inputs().frame_gz_path}) {
    SCOPED_TRACE(input);
    v1::ExtractHeader h = PathHeader(input);
    const Streamed streamed = Stream(h);
    ASSERT_TRUE(streamed.status.ok()) << streamed.status;
    const std::string out = absl::StrCat(Inputs().output_dir, "/progressive-",
                                         absl::EndsWith(input, ".gz") ? "gz" : "plain", ".fits");
    h.set_server_output_path(out);
    h.set_results_to_file_only(true);
    const Streamed written = Stream(h);
    ASSERT_TRUE(written.status.ok()) << written.status;
    const std::string bytes = ReadBytes(out);
    ExpectSameFitsContents(streamed.frame_fits, bytes, "progressively written frame");
    EXPECT_EQ(written.summary.server_output_bytes(), static_cast<int64_t>(bytes.size()));
    EXPECT_EQ(written.summary.server_output_sha256(), server::Sha256Hex(bytes));
    const auto& stages = written.summary.stage_seconds();
    EXPECT_EQ(stages.count("output_file_rows"), 1u);
    EXPECT_EQ(stages.count("output_file"), 1u);
    // Its two parts, measured beside each other (docs/service.md), each inside the whole.
    ASSERT_EQ(stages.count("output_file_commit"), 1u);
    ASSERT_EQ(stages.count("output_file_sha256"), 1u);
    EXPECT_GT(stages.at("output_file_commit"), 0.0);
    EXPECT_GT(stages.at("output_file_sha256"), 0.0);
    EXPECT_LE(stages.at("output_file_commit"), stages.at("output_file"));
    EXPECT_LE(stages.at("output_file_sha256"), stages.at("output_file"));
    // The wait for the last rows and the frame-wide rest come before the commit.
    ASSERT_EQ(stages.count("output_file_rows_wait"), 1u);
    ASSERT_EQ(stages.count("output_file_finish"), 1u);
    EXPECT_LE(stages.at("output_file_rows_wait") + stages.at("output_file_finish") +
                  stages.at("output_file_commit"),
              stages.at("output_file"));
    EXPECT_FALSE(HoldsFileUnder(Inputs().output_dir));
  }
}

// zlib's CRC-32 of `bytes` as the summary writes it (an implementation other than the
// server's libdeflate).
std::string ZlibCrc32Hex(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32_z(crc, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
  return absl::StrFormat("%08x", crc);
}

// output_checksum = CRC32: the summary gives the CRC-32 of each file as written (a
// progressive plain .fits, a .gz and the model: the three ways the server stages a
// file) and no SHA-256, and its stage is named for it; a retry that finds the same
// frame in place gives the CRC-32 of the file on disk, as the first reply did.
TEST_F(WirePrecisionTest, ServerWrittenFilesGiveTheirCrc32WhenAsked) {
  for (const std::string name : {"crc-plain.fits", "crc-gz.fits.gz"}) {
    SCOPED_TRACE(name);
    v1::ExtractHeader h = PathHeader(Inputs().frame_path);
    const std::string out = Inputs().output_dir + "/" + name;
    const std::string model = Inputs().output_dir + "/model-" + name;
    h.set_server_output_path(out);
    h.set_server_model_path(model);
    h.set_results_to_file_only(true);
    h.set_output_checksum(v1::FILE_CHECKSUM_CRC32);
    const Streamed first = Stream(h);
    ASSERT_TRUE(first.status.ok()) << first.status;
    const std::string bytes = ReadBytes(out), model_bytes = ReadBytes(model);
    EXPECT_EQ(first.summary.server_output_bytes(), static_cast<int64_t>(bytes.size()));
    EXPECT_EQ(first.summary.server_output_crc32(), ZlibCrc32Hex(bytes));
    EXPECT_EQ(first.summary.server_model_crc32(), ZlibCrc32Hex(model_bytes));
    EXPECT_EQ(first.summary.server_output_crc32().size(), 8u);
    EXPECT_EQ(first.summary.server_output_sha256(), "");
    EXPECT_EQ(first.summary.server_model_sha256(), "");
    const auto& stages = first.summary.stage_seconds();
    EXPECT_EQ(stages.count("output_file_crc32"), 1u);
    EXPECT_EQ(stages.count("output_file_sha256"), 0u);
    const Streamed kept = Stream(h);
    ASSERT_TRUE(kept.status.ok()) << kept.status;
    EXPECT_EQ(kept.summary.server_output_crc32(), first.summary.server_output_crc32());
    EXPECT_EQ(kept.summary.server_model_crc32(), first.summary.server_model_crc32());
    EXPECT_EQ(ReadBytes(out), bytes);
    // The same files asked for with the default: their SHA-256 as they are on disk.
    h.set_output_checksum(v1::FILE_CHECKSUM_UNSPECIFIED);
    const Streamed sha = Stream(h);
    ASSERT_TRUE(sha.status.ok()) << sha.status;
    EXPECT_EQ(sha.summary.server_output_sha256(), server::Sha256Hex(bytes));
    EXPECT_EQ(sha.summary.server_output_crc32(), "");
  }
  // proto3 keeps an unknown enum number: refused, not read as a default.
  v1::ExtractHeader bad = PathHeader(Inputs().frame_path);
  bad.set_server_output_path(Inputs().output_dir + "/crc-bad.fits");
  bad.set_results_to_file_only(true);
  bad.set_output_checksum(static_cast<v1::FileChecksum>(7));
  const Streamed refused = Stream(bad);
  EXPECT_EQ(refused.status.code(), absl::StatusCode::kInvalidArgument) << refused.status;
  EXPECT_TRUE(absl::StrContains(refused.status.message(), "output_checksum")) << refused.status;
  EXPECT_FALSE(std::filesystem::exists(Inputs().output_dir + "/crc-bad.fits"));
}

// A client that cancels mid-frame: the job stops, its temporary goes (named or not:
// nothing in the directory, no descriptor left open), and the server keeps serving; for a
// .fits and a .fits.gz (deflated chunk by chunk while the bundles come).
TEST_F(WirePrecisionTest, CancelledServerWrittenFrameLeavesNothing) {
  // A directory of its own inside the output roots.
  const std::string out_dir = Inputs().output_dir + "/cancelled";
  std::filesystem::create_directories(out_dir);
  int completed = 0;
  constexpr int kRounds = 4;
  for (int round = 0; round < kRounds; ++round) {
    v1::ExtractHeader h = PathHeader(Inputs().frame_path);
    const std::string out =
        absl::StrCat(out_dir, "/frame-", round, round % 2 == 0 ? ".fits" : ".fits.gz");
    h.set_server_output_path(out);
    h.set_results_to_file_only(true);
    client::ExtractCallbacks cb;
    cb.on_bundle = [](v1::BundleData&&) { return absl::CancelledError("client gives up"); };
    const absl::Status st = client_->Extract(h, nullptr, false, cb);
    EXPECT_EQ(st.code(), absl::StatusCode::kCancelled) << st;
    // The job ends shortly after the cancel; then nothing of it is left.
    EXPECT_TRUE(WaitFor([&] { return !HoldsFileUnder(out_dir); }, 30))
        << "a descriptor under " << out_dir << " is still open";
    std::vector<std::filesystem::path> left;
    for (const auto& e : std::filesystem::directory_iterator(out_dir)) left.push_back(e.path());
    for (const auto& path : left) {
      // Only a frame the server finished before the cancel reached it, complete.
      EXPECT_EQ(path.string(), out) << "left behind";
      auto f = core::FitsFile::OpenRead(out);
      ASSERT_TRUE(f.ok()) << f.status();
      EXPECT_GE(f->NumHdus().value_or(0), 7);
      ++completed;
      // The next round starts from an empty directory (a finished frame of this round is
      // not something the next one left behind).
      std::filesystem::remove(path);
    }
  }
  std::printf("cancelled mid-frame: %d of %d finished before the cancel arrived\n", completed,
              kRounds);
  v1::ExtractHeader h = PathHeader(Inputs().frame_path);
  h.set_server_output_path(out_dir + "/after.fits");
  h.set_results_to_file_only(true);
  EXPECT_TRUE(client_->ExtractToServerFile(h, nullptr, false).ok());
}

TEST_F(WirePrecisionTest, ServerWrittenFrameRefusals) {
  const std::string dir = Inputs().output_dir;
  const std::string existing = dir + "/wire-existing.fits";
  ASSERT_TRUE(WriteBytes(existing, "x"));
  struct Case {
    const char* what;
    std::string output, model;
    bool file_only;
    absl::StatusCode code;
    bool runs = false;  // refused only once the frame is extracted (an existing file)
  };
  const Case cases[] = {
      {"file only without an output", "", "", true, absl::StatusCode::kInvalidArgument},
      {"model without an output", "", dir + "/m.fits", false, absl::StatusCode::kInvalidArgument},
      {"model on the frame's path", dir + "/same.fits", dir + "/same.fits", true,
       absl::StatusCode::kInvalidArgument},
      {"output outside the output roots", "/tmp/wire-outside.fits", "", true,
       absl::StatusCode::kPermissionDenied},
      {"output in a data root", Inputs().data_dir + "/wire.fits", "", true,
       absl::StatusCode::kPermissionDenied},
      {"model outside the output roots", dir + "/wire-ok.fits", "/tmp/wire-model.fits", true,
       absl::StatusCode::kPermissionDenied},
      {"existing output", existing, "", true, absl::StatusCode::kAlreadyExists, true},
      {"existing model", dir + "/wire-ok2.fits", existing, true, absl::StatusCode::kAlreadyExists,
       true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::ExtractHeader h = PathHeader(Inputs().frame_path);
    h.set_server_output_path(c.output);
    h.set_server_model_path(c.model);
    h.set_results_to_file_only(c.file_only);
    const Streamed r = Stream(h);
    EXPECT_EQ(r.status.code(), c.code) << r.status;
    if (!c.runs) {
      EXPECT_EQ(r.bundle_parts, 0);
    }
  }
  // Nothing was written by the refused requests, and the existing file is untouched.
  EXPECT_FALSE(std::filesystem::exists(dir + "/wire-ok.fits"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/wire-ok2.fits"));
  EXPECT_EQ(ReadBytes(existing), "x");
  v1::ExtractHeader h = PathHeader(Inputs().frame_path);
  h.set_array_precision(static_cast<v1::ArrayPrecision>(7));
  EXPECT_EQ(Stream(h).status.code(), absl::StatusCode::kInvalidArgument);
  // The server is still serving.
  h.set_array_precision(v1::ARRAY_FLOAT32);
  EXPECT_TRUE(Stream(h).status.ok());
}

}  // namespace
}  // namespace spexd::testing
