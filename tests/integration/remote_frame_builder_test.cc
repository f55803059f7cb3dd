// client::RemoteFrameBuilder's sinks (no server): a float32 stream's bundles reach the
// float32 sink as the bytes of their parts joined in order (an empty part among them
// changes nothing), a float64 stream's reach the BundleResult sink widened; parts of the
// wrong size are refused before anything reaches a sink.
#include "client/spexctl/remote_frame.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace spexd::client {
namespace {

constexpr int kNwave = 4, kNdiag = 1, kNk = 2 * kNdiag + 1, kBundleSize = 2;

v1::FrameHeader Header() {
  v1::FrameHeader h;
  h.set_specmin(0);
  h.set_nspec(4);
  h.set_bundlesize(kBundleSize);
  h.set_ndiag(kNdiag);
  for (int w = 0; w < kNwave; ++w) h.add_wave(5760.0 + 0.8 * w);
  h.add_bundles(0);
  h.add_bundles(1);
  return h;
}

// Little-endian float32 bytes of n values first, first + 1, ...
std::string Bytes(int n, float first) {
  std::string out(static_cast<std::size_t>(n) * 4, '\0');
  for (int i = 0; i < n; ++i) {
    const float v = first + static_cast<float>(i);
    std::memcpy(out.data() + 4 * i, &v, 4);
  }
  return out;
}

// Fibres [fiber, fiber + nfibers) of `bundle` as float32, values from `seed`.
v1::BundleData Part32(int bundle, int fiber, int nfibers, float seed, bool last) {
  v1::BundleData p;
  p.set_bundle(bundle);
  p.set_fiber_begin(fiber);
  p.set_nfibers(nfibers);
  p.set_last_part(last);
  const int bins = nfibers * kNwave;
  if (bins > 0) {
    p.set_flux_f32(Bytes(bins, seed));
    p.set_ivar_f32(Bytes(bins, seed + 100));
    p.set_chi2pix_f32(Bytes(bins, seed + 200));
    p.set_resolution_f32(Bytes(bins * kNk, seed + 300));
  }
  return p;
}

TEST(RemoteFrameBuilderTest, Float32PartsReachTheFloat32SinkJoinedAsTheyCame) {
  RemoteFrameBuilder builder;
  std::vector<std::pair<int, std::shared_ptr<const core::Float32Rows>>> got;
  int widened = 0;
  builder.SendBundlesTo(
      [&](int, std::shared_ptr<const core::BundleResult>) {
        ++widened;
        return absl::OkStatus();
      },
      /*keep_spectra=*/false,
      [&](int row, std::shared_ptr<const core::Float32Rows> rows) {
        got.emplace_back(row, std::move(rows));
        return absl::OkStatus();
      });
  ASSERT_TRUE(builder.OnHeader(Header()).ok());
  // Bundle 0 in two parts of one fibre with an empty part between them; bundle 1 whole.
  ASSERT_TRUE(builder.OnBundle(Part32(0, 0, 1, 1, false)).ok());
  ASSERT_TRUE(builder.OnBundle(Part32(0, 1, 0, 0, false)).ok());
  ASSERT_TRUE(builder.OnBundle(Part32(0, 1, 1, 1 + kNwave, true)).ok());
  ASSERT_TRUE(builder.OnBundle(Part32(1, 2, 2, 50, true)).ok());
  EXPECT_EQ(widened, 0);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].first, 0);
  EXPECT_EQ(got[1].first, 2);
  const core::Float32Rows& b0 = *got[0].second;
  EXPECT_EQ(b0.bundle, 0);
  EXPECT_EQ(b0.nfibers, 2);
  // The two fibres' values follow each other: the parts' bytes in order.
  EXPECT_EQ(b0.flux, Bytes(2 * kNwave, 1));
  EXPECT_EQ(b0.ivar, Bytes(kNwave, 101) + Bytes(kNwave, 101 + kNwave));
  EXPECT_EQ(b0.chi2pix, Bytes(kNwave, 201) + Bytes(kNwave, 201 + kNwave));
  EXPECT_EQ(b0.rdiags, Bytes(kNwave * kNk, 301) + Bytes(kNwave * kNk, 301 + kNwave));
  const core::Float32Rows& b1 = *got[1].second;
  EXPECT_EQ(b1.nfibers, 2);
  EXPECT_EQ(b1.rdiags, Bytes(2 * kNwave * kNk, 350));
  EXPECT_EQ(builder.bundles_done(), 2);
}

TEST(RemoteFrameBuilderTest, Float64PartsReachTheBundleSinkWidened) {
  RemoteFrameBuilder builder;
  std::vector<std::shared_ptr<const core::BundleResult>> got;
  int as_float32 = 0;
  builder.SendBundlesTo(
      [&](int, std::shared_ptr<const core::BundleResult> b) {
        got.push_back(std::move(b));
        return absl::OkStatus();
      },
      /*keep_spectra=*/false,
      [&](int, std::shared_ptr<const core::Float32Rows>) {
        ++as_float32;
        return absl::OkStatus();
      });
  ASSERT_TRUE(builder.OnHeader(Header()).ok());
  v1::BundleData p;
  p.set_bundle(0);
  p.set_fiber_begin(0);
  p.set_nfibers(2);
  p.set_last_part(true);
  for (int i = 0; i < 2 * kNwave; ++i) {
    p.add_flux(i + 0.25);
    p.add_ivar(1);
    p.add_chi2pix(1);
    p.add_pixmask_fraction(0);
  }
  for (int i = 0; i < 2 * kNwave * kNk; ++i) p.add_resolution(0.5);
  ASSERT_TRUE(builder.OnBundle(std::move(p)).ok());
  EXPECT_EQ(as_float32, 0);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0]->nfibers, 2);
  EXPECT_DOUBLE_EQ(got[0]->flux[3], 3.25);
  EXPECT_EQ(got[0]->rdiags.size(), static_cast<std::size_t>(2 * kNwave * kNk));
}

TEST(RemoteFrameBuilderTest, AFloat32PartOfTheWrongSizeReachesNoSink) {
  RemoteFrameBuilder builder;
  int calls = 0;
  builder.SendBundlesTo(
      [&](int, std::shared_ptr<const core::BundleResult>) {
        ++calls;
        return absl::OkStatus();
      },
      /*keep_spectra=*/false,
      [&](int, std::shared_ptr<const core::Float32Rows>) {
        ++calls;
        return absl::OkStatus();
      });
  ASSERT_TRUE(builder.OnHeader(Header()).ok());
  v1::BundleData p = Part32(0, 0, 2, 1, true);
  p.mutable_resolution_f32()->resize(p.resolution_f32().size() - 4);
  const absl::Status st = builder.OnBundle(std::move(p));
  EXPECT_EQ(st.code(), absl::StatusCode::kDataLoss) << st;
  EXPECT_EQ(calls, 0);
}

}  // namespace
}  // namespace spexd::client
