// A server-written frame whose resolution nothing else reads takes it from the backend as
// the frame file's bytes (core::ExtractionJob::resolution_file_bytes), as the CUDA backend
// narrows it on the device: the file (plain or .gz) is the one written from the float64
// values, every DATASUM with it. A job that streams its arrays never asks for the bytes.
#include <atomic>
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

// The CPU backend, handing each bundle's resolution as the file's bytes when the job takes
// it so (every other one with their words' sum); counts the jobs that did.
class FileBytesBackend : public core::Backend {
 public:
  FileBytesBackend(std::unique_ptr<core::Backend> inner, std::shared_ptr<std::atomic<int>> asked)
      : inner_(std::move(inner)), asked_(std::move(asked)) {}
  std::string name() const override { return inner_->name(); }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override {
    if (job.resolution_file_bytes) asked_->fetch_add(1);
    return inner_->Extract(job, [&](core::BundleResult&& b) {
      if (job.resolution_file_bytes) {
        b.rdiags_file.resize(4 * b.rdiags.size());
        const uint64_t sum =
            core::NarrowToBigEndianFloat32(b.rdiags.data(), b.rdiags.size(), b.rdiags_file.data());
        // Every other bundle with its words' sum, as the CUDA backend takes it: one file
        // from both kinds.
        if (b.bundle % 2 == 1) b.rdiags_file_word_sum = sum;
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
  std::shared_ptr<std::atomic<int>> asked_;
};

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

TEST(ResolutionFileBytesTest, FileOnlyFramesTakeTheBytesAndAreTheFloat64Files) {
  auto asked = std::make_shared<std::atomic<int>>(0);
  server::ServerOptions o = TestServerOptions();
  o.workers.backend_factory = [asked](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    auto inner = core::CreateBackend(core::BackendOptions{});
    if (!inner.ok()) return inner.status();
    *reason = "test: cpu handing the resolution as file bytes";
    std::vector<std::unique_ptr<core::Backend>> out;
    out.push_back(std::make_unique<FileBytesBackend>(*std::move(inner), asked));
    return out;
  };
  auto server = StartServer(o);
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
    cb.on_header = [](const v1::FrameHeader&) { return absl::OkStatus(); };
    cb.on_bundle = [](v1::BundleData&&) { return absl::OkStatus(); };
    cb.on_model = [](const v1::ModelChunk&) { return absl::OkStatus(); };
    cb.on_products = [](const v1::FrameProducts&) { return absl::OkStatus(); };
    const int before = asked->load();
    ASSERT_TRUE(client->Extract(h, nullptr, false, cb).ok());
    EXPECT_EQ(asked->load(), before) << "a job streaming its arrays took file bytes";
    // The file only: the resolution as file bytes.
    const std::string file_out = Inputs().output_dir + "/resolution-file-only" + ext;
    h.set_server_output_path(file_out);
    h.set_results_to_file_only(true);
    auto summary = client->ExtractToServerFile(h, nullptr, false);
    ASSERT_TRUE(summary.ok()) << summary.status();
    EXPECT_EQ(asked->load(), before + 1) << "the file-only job did not take file bytes";
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
}

}  // namespace
}  // namespace spexd::testing
