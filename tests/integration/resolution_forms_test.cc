// A job whose resolution one consumer alone reads takes it from the backend in that
// consumer's float32 bytes (core::ExtractionJob::resolution_form), as the CUDA backend
// narrows it on the device. A server-written frame file's (plain or .gz) is the one written
// from the float64 values, every DATASUM with it; a float32 stream's bundles are those
// rounded from the float64 values. A job whose resolution two consumers read never asks.
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/float_convert.h"
#include "core/io/fits_gunzip.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// The CPU backend, handing each bundle's resolution in the float32 form the job takes
// (the file's with their words' sum on every other bundle); counts the jobs of each form.
class Float32BytesBackend : public core::Backend {
 public:
  struct Asked {
    std::atomic<int> file{0}, stream{0};
  };
  Float32BytesBackend(std::unique_ptr<core::Backend> inner, std::shared_ptr<Asked> asked)
      : inner_(std::move(inner)), asked_(std::move(asked)) {}
  std::string name() const override { return inner_->name(); }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override {
    const core::ResolutionForm form = job.resolution_form;
    if (form == core::ResolutionForm::kFileBytes) asked_->file.fetch_add(1);
    if (form == core::ResolutionForm::kStreamFloat32) asked_->stream.fetch_add(1);
    return inner_->Extract(job, [&](core::BundleResult&& b) {
      if (form == core::ResolutionForm::kFileBytes) {
        b.rdiags_file = core::PlaneBuffer<char>::Make(4 * b.rdiags.size(), nullptr);
        const uint64_t sum =
            core::NarrowToBigEndianFloat32(b.rdiags.data(), b.rdiags.size(), b.rdiags_file.data());
        // Every other bundle with its words' sum, as the CUDA backend takes it: one file
        // from both kinds.
        if (b.bundle % 2 == 1) b.rdiags_file_word_sum = sum;
        b.rdiags.clear();
      } else if (form == core::ResolutionForm::kStreamFloat32) {
        b.rdiags_f32 = core::PlaneBuffer<char>::Make(4 * b.rdiags.size(), nullptr);
        core::NarrowToFloat32(b.rdiags.data(), reinterpret_cast<float*>(b.rdiags_f32.data()),
                              b.rdiags.size());
        b.rdiags.clear();
      }
      return sink(std::move(b));
    });
  }
  void Release(const std::shared_ptr<const core::Geometry>& geometry) override {
    inner_->Release(geometry);
  }

 private:
  std::unique_ptr<core::Backend> inner_;
  std::shared_ptr<Asked> asked_;
};

std::unique_ptr<server::SpexdServer> StartFloat32BytesServer(
    std::shared_ptr<Float32BytesBackend::Asked> asked) {
  server::ServerOptions o = TestServerOptions();
  o.workers.backend_factory = [asked](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    auto inner = core::CreateBackend(core::BackendOptions{});
    if (!inner.ok()) return inner.status();
    *reason = "test: cpu handing the resolution as float32 bytes";
    std::vector<std::unique_ptr<core::Backend>> out;
    out.push_back(std::make_unique<Float32BytesBackend>(*std::move(inner), asked));
    return out;
  };
  return StartServer(o);
}

// The DATASUM cards of a FITS file, in order.
std::vector<std::string> DatasumCards(const std::string& fits) {
  std::vector<std::string> cards;
  for (std::size_t at = 0; at + 80 <= fits.size(); at += 80) {
    // The value without its comment, whose time is the second the file was written.
    if (fits.compare(at, 8, "DATASUM ") == 0) {
      const std::string card = fits.substr(at, 80);
      cards.push_back(card.substr(0, card.find(" /")));
    }
  }
  return cards;
}

TEST(ResolutionFormsTest, FileOnlyFramesTakeTheBytesAndAreTheFloat64Files) {
  auto asked = std::make_shared<Float32BytesBackend::Asked>();
  auto server = StartFloat32BytesServer(asked);
  ASSERT_NE(server, nullptr);
  auto client = Connect(*server);
  auto psf = client->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  for (const std::string ext : {".fits", ".fits.gz"}) {
    SCOPED_TRACE(ext);
    v1::ExtractHeader h = SmallHeader(psf->id());
    h.set_server_path(Inputs().frame_path);
    h.set_in_img_name("frame.fits");
    h.set_in_psf_name("psf.fits");
    // Arrays streamed beside the file: float64 resolution.
    const std::string streamed_out = Inputs().output_dir + "/resolution-streamed" + ext;
    h.set_server_output_path(streamed_out);
    client::ExtractCallbacks cb;
    cb.on_bundle = [](v1::BundleData&&) { return absl::OkStatus(); };
    const int before = asked->file.load();
    ASSERT_TRUE(client->Extract(h, nullptr, false, cb).ok());
    EXPECT_EQ(asked->file.load(), before) << "a job streaming its arrays took file bytes";
    // The file only: the resolution as file bytes.
    const std::string file_out = Inputs().output_dir + "/resolution-file-only" + ext;
    h.set_server_output_path(file_out);
    h.set_results_to_file_only(true);
    auto summary = client->ExtractToServerFile(h, nullptr, false);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(asked->file.load(), before + 1) << "the file-only job did not take file bytes";
    std::string a = ReadBytes(streamed_out), b = ReadBytes(file_out);
    if (ext == ".fits.gz") {
      auto fa = core::GunzipFits(a, streamed_out, core::FitsSizeLimits{});
      auto fb = core::GunzipFits(b, file_out, core::FitsSizeLimits{});
      ASSERT_TRUE(fa.ok() && fb.ok());
      a = *std::move(fa);
      b = *std::move(fb);
    }
    ExpectSameFitsContents(a, b, "file-only frame");
    EXPECT_EQ(DatasumCards(a), DatasumCards(b));
    EXPECT_FALSE(DatasumCards(a).empty());
  }
  EXPECT_EQ(asked->stream.load(), 0) << "a job without a float32 stream took its bytes";
}

// Each bundle's resolution as one extraction streams it: the float64 values rounded here
// for float64 arrays, the bytes as they came for float32 ones.
std::map<int, std::string> StreamedResolution(client::SpexdClient& client, v1::ExtractHeader h,
                                              bool float32) {
  std::map<int, std::string> out;
  if (float32) h.set_array_precision(v1::ARRAY_FLOAT32);
  client::ExtractCallbacks cb;
  cb.on_bundle = [&](v1::BundleData&& d) {
    std::string& bytes = out[d.bundle()];
    if (float32) {
      bytes += d.resolution_f32();
    } else {
      const std::size_t at = bytes.size();
      bytes.resize(at + 4 * static_cast<std::size_t>(d.resolution_size()));
      core::NarrowToFloat32(d.resolution().data(), reinterpret_cast<float*>(bytes.data() + at),
                            static_cast<std::size_t>(d.resolution_size()));
    }
    return absl::OkStatus();
  };
  const absl::Status s = client.Extract(h, nullptr, false, cb);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(ResolutionFormsTest, Float32StreamsTakeTheBytesAndAreTheRoundedFloat64Values) {
  auto asked = std::make_shared<Float32BytesBackend::Asked>();
  auto server = StartFloat32BytesServer(asked);
  ASSERT_NE(server, nullptr);
  auto client = Connect(*server);
  auto psf = client->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  v1::ExtractHeader h = SmallHeader(psf->id());
  h.set_server_path(Inputs().frame_path);
  const std::map<int, std::string> rounded = StreamedResolution(*client, h, /*float32=*/false);
  EXPECT_EQ(asked->stream.load(), 0) << "a float64 stream took float32 bytes";
  const std::map<int, std::string> narrowed = StreamedResolution(*client, h, /*float32=*/true);
  EXPECT_EQ(asked->stream.load(), 1) << "the float32 stream did not take its bytes";
  ASSERT_FALSE(rounded.empty());
  ASSERT_EQ(narrowed.size(), rounded.size());
  for (const auto& [bundle, bytes] : rounded) {
    ASSERT_FALSE(bytes.empty());
    EXPECT_TRUE(narrowed.at(bundle) == bytes) << "bundle " << bundle;
  }
  // Beside a server-written frame file, two consumers read it: float64 from the backend.
  h.set_server_output_path(Inputs().output_dir + "/resolution-stream-and-file.fits");
  h.set_in_img_name("frame.fits");
  h.set_in_psf_name("psf.fits");
  const std::map<int, std::string> with_file = StreamedResolution(*client, h, /*float32=*/true);
  EXPECT_EQ(asked->stream.load(), 1) << "a float32 stream beside a file took float32 bytes";
  EXPECT_EQ(asked->file.load(), 0);
  EXPECT_EQ(with_file, rounded);
}

// A client that goes away after its first float32 bundle: the parts that borrow the
// bundles' narrowed bytes are dropped with the call, and the server keeps serving (under
// AddressSanitizer, a part outliving its bytes would show here).
TEST(ResolutionFormsTest, AFloat32ClientThatLeavesMidStreamLeavesTheServerServing) {
  auto asked = std::make_shared<Float32BytesBackend::Asked>();
  auto server = StartFloat32BytesServer(asked);
  ASSERT_NE(server, nullptr);
  auto client = Connect(*server);
  auto psf = client->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  v1::ExtractHeader h = SmallHeader(psf->id());
  h.set_server_path(Inputs().frame_path);
  h.set_array_precision(v1::ARRAY_FLOAT32);
  client::ExtractCallbacks cb;
  int bundles = 0;
  cb.on_bundle = [&](v1::BundleData&&) {
    ++bundles;
    return absl::CancelledError("the client leaves");
  };
  EXPECT_FALSE(client->Extract(h, nullptr, false, cb).ok());
  EXPECT_EQ(bundles, 1);
  EXPECT_EQ(asked->stream.load(), 1);
  const std::map<int, std::string> after = StreamedResolution(*client, h, /*float32=*/true);
  EXPECT_FALSE(after.empty()) << "the server stopped serving";
  EXPECT_EQ(asked->stream.load(), 2);
}

}  // namespace
}  // namespace spexd::testing
