// End-to-end extraction through an in-process spexd on loopback (CPU backend): results
// equal a local run bit for bit, stream order and completeness, subsets, concurrency.
#include <thread>
#include <vector>

#include "core/io/fits_file.h"
#include "core/frame/frame_writer.h"
#include "gtest/gtest.h"
#include "server/state/psf_cache.h"
#include "tests/integration/service_fixture.h"

namespace spexd::testing {
namespace {

class ExtractServiceTest : public LoadedServerTest {};

TEST_F(ExtractServiceTest, UploadedFrameEqualsLocalExtractionBitForBit) {
  ASSERT_GT(local_->nspec, 0);
  auto remote = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &Inputs().frame_bytes);
  ASSERT_TRUE(remote.ok()) << remote.status();
  ExpectFramesIdentical(*local_, *remote);
  // Not a trivial frame: real fluxes and some extracted patches.
  EXPECT_GT(remote->counts.extracted, 0);
  double sum = 0;
  for (double f : remote->flux) sum += f;
  EXPECT_GT(sum, 0);
}

TEST_F(ExtractServiceTest, ServerPathFrameWithModelEqualsLocal) {
  core::ExtractionParams params = SmallParams();
  params.want_model = true;
  auto local = LocalExtract(Inputs().psf_path, Inputs().frame_path, params);
  ASSERT_TRUE(local.ok()) << local.status();
  v1::ExtractHeader h = SmallHeader(psf_id_);
  h.set_server_path(Inputs().frame_path);
  h.set_want_model(true);
  auto remote = RemoteExtractFrame(*client_, h, nullptr);
  ASSERT_TRUE(remote.ok()) << remote.status();
  ASSERT_FALSE(remote->model.empty());
  ExpectFramesIdentical(*local, *remote);
}

TEST_F(ExtractServiceTest, ServerWritesTheSameFrameFileAtomically) {
  v1::ExtractHeader h = SmallHeader(psf_id_);
  h.set_server_path(Inputs().frame_path);
  const std::string out = Inputs().output_dir + "/server-frame.fits";
  h.set_server_output_path(out);
  v1::ExtractSummary summary;
  client::ExtractCallbacks cb;
  cb.on_summary = [&](const v1::ExtractSummary& s) { summary = s; };
  ASSERT_TRUE(client_->Extract(h, nullptr, false, cb).ok());
  EXPECT_EQ(summary.server_output_path(), out);
  // Readable as a desispec frame with the local values (FLUX is float32 on disk).
  auto fits = core::FitsFile::OpenRead(out);
  ASSERT_TRUE(fits.ok()) << fits.status();
  ASSERT_TRUE(fits->MoveToHdu("FLUX").ok());
  auto flux = fits->ReadImage<float>();
  ASSERT_TRUE(flux.ok());
  ASSERT_EQ(flux->size(), local_->flux.size());
  for (std::size_t i = 0; i < flux->size(); ++i) {
    ASSERT_EQ((*flux)[i], static_cast<float>(local_->flux[i])) << i;
  }
}

TEST_F(ExtractServiceTest, StreamsHeaderThenBundlesInOrderThenSummary) {
  std::vector<std::string> kinds;
  std::vector<int> bundle_order;
  int next_fiber = 0;
  int64_t extracted = 0;
  v1::FrameHeader header;
  v1::ExtractSummary summary;
  client::ExtractCallbacks cb;
  cb.on_header = [&](const v1::FrameHeader& h) {
    kinds.push_back("header");
    header = h;
    return absl::OkStatus();
  };
  cb.on_bundle = [&](v1::BundleData&& b) {
    kinds.push_back("bundle");
    EXPECT_EQ(b.fiber_begin(), next_fiber);
    next_fiber += b.nfibers();
    EXPECT_EQ(b.flux_size(), b.nfibers() * header.wave_size());
    EXPECT_EQ(b.resolution_size(), b.nfibers() * header.wave_size() * (2 * header.ndiag() + 1));
    if (b.last_part()) {
      bundle_order.push_back(b.bundle());
      extracted += b.counts().extracted();
    }
    return absl::OkStatus();
  };
  cb.on_summary = [&](const v1::ExtractSummary& s) {
    kinds.push_back("summary");
    summary = s;
  };
  ASSERT_TRUE(client_->Extract(SmallHeader(psf_id_), &Inputs().frame_bytes, false, cb).ok());
  ASSERT_GE(kinds.size(), 4u);
  EXPECT_EQ(kinds.front(), "header");
  EXPECT_EQ(kinds.back(), "summary");
  EXPECT_EQ(bundle_order, (std::vector<int>{0, 1}));
  EXPECT_EQ(next_fiber, 50);
  EXPECT_EQ(header.wave_size(), 51);
  EXPECT_EQ(header.wave_size(), 51);
  EXPECT_EQ(header.bundles_size(), 2);
  EXPECT_EQ(summary.nbundles(), 2);
  EXPECT_EQ(summary.nfibers(), 50);
  EXPECT_EQ(summary.counts().extracted(), extracted);
  EXPECT_GE(summary.total_seconds(), summary.extract_seconds());
}

TEST_F(ExtractServiceTest, ExtractBundlesByFibreMatchesTheFullFrame) {
  v1::ExtractHeader h = SmallHeader(psf_id_);
  h.add_fibers(30);  // in bundle 1
  h.add_fibers(40);
  auto remote = RemoteExtractFrame(*client_, h, &Inputs().frame_bytes, /*subset=*/true);
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ(remote->specmin, 25);
  EXPECT_EQ(remote->nspec, 25);
  const std::size_t n = static_cast<std::size_t>(25) * local_->nwave;
  std::vector<double> tail(local_->flux.begin() + static_cast<std::ptrdiff_t>(n), local_->flux.end());
  EXPECT_EQ(remote->flux, tail);  // bundles are independent: same values as in the frame
}

TEST_F(ExtractServiceTest, EightConcurrentClientsAllGetTheLocalResult) {
  constexpr int kClients = 8;
  std::vector<absl::StatusOr<core::Frame>> results(kClients, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = Connect(*server_);
      v1::ExtractHeader h = SmallHeader(psf_id_);
      h.set_priority(i % 2 == 0 ? v1::REALTIME : v1::REPROCESSING);
      if (i % 2 == 0) {
        results[i] = RemoteExtractFrame(*c, h, &Inputs().frame_bytes);
      } else {
        h.set_server_path(Inputs().frame_path);
        results[i] = RemoteExtractFrame(*c, h, nullptr);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    ASSERT_TRUE(results[i].ok()) << i << ": " << results[i].status();
    ExpectFramesIdentical(*local_, *results[i]);
  }
  // The geometry was warmed once and then reused.
  bool found = false;
  for (const auto& p : server_->cache().List()) found = found || (p.id == psf_id_ && p.geometries == 1);
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace spexd::testing
