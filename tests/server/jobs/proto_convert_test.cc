#include "server/jobs/proto_convert.h"
#include "server/rpc/request_decode.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/base/float_convert.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

TEST(ProtoConvertTest, SelectBundlesFromBundlesOrFibres) {
  v1::ExtractHeader h;
  EXPECT_TRUE(SelectBundles(h, 100, 75, 25)->empty());  // all
  h.add_fibers(174);
  h.add_fibers(100);
  h.add_fibers(101);
  EXPECT_EQ(*SelectBundles(h, 100, 75, 25), (std::vector<int>{0, 2}));
  h.add_fibers(175);
  EXPECT_FALSE(SelectBundles(h, 100, 75, 25).ok());
  h.clear_fibers();
  h.add_bundles(1);
  h.add_bundles(1);
  EXPECT_EQ(*SelectBundles(h, 100, 75, 25), (std::vector<int>{1}));
  h.add_fibers(100);
  EXPECT_FALSE(SelectBundles(h, 100, 75, 25).ok());  // both
  h.clear_fibers();
  h.add_bundles(3);
  EXPECT_FALSE(SelectBundles(h, 100, 75, 25).ok());
}

// Parses a WireMessage as the client's generated code does.
v1::ExtractResponse Parse(const WireMessage& m) {
  v1::ExtractResponse r;
  EXPECT_TRUE(r.ParseFromString(m.Flatten()));
  return r;
}

// The bytes a client reads of `parts`, one after another.
std::string Flat(const std::vector<WireMessage>& parts) {
  std::string all;
  for (const WireMessage& m : parts) all += m.Flatten();
  return all;
}

TEST(ProtoConvertTest, LargeBundlesAreSplitIntoPartsUnderTheLimitWithoutCopies) {
  auto b = std::make_shared<core::BundleResult>();
  b->Allocate(/*bundle=*/2, /*fiber0=*/50, /*nfib=*/25, /*nw=*/2326, /*nd=*/5);
  for (std::size_t i = 0; i < b->flux.size(); ++i) {
    b->flux[i] = static_cast<double>(i);
    b->ivar[i] = 0.5 * static_cast<double>(i);
    b->chi2pix[i] = -1.0 * static_cast<double>(i);
    b->pixmask_fraction[i] = 1.0 / (1.0 + static_cast<double>(i));
    b->failed_bins[i] = static_cast<uint8_t>(i % 3 == 0);
  }
  for (std::size_t i = 0; i < b->rdiags.size(); ++i) b->rdiags[i] = 1e-3 * static_cast<double>(i);
  b->counts.extracted = 235;
  b->counts.retried = 2;
  const std::size_t limit = (4 << 20) - 65536;
  const std::vector<WireMessage> parts = EncodeBundleParts(b, 1.5, limit);
  ASSERT_GT(parts.size(), 1u);  // a full r-camera bundle is ~7 MB in float64
  int fibres = 0;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    EXPECT_LE(parts[i].ByteSize(), std::size_t{4} << 20);
    EXPECT_LE(parts[i].framing.size(), 256u);  // the arrays are borrowed, not copied
    EXPECT_EQ(parts[i].owner.get(), b.get());
    const v1::ExtractResponse r = Parse(parts[i]);
    ASSERT_EQ(r.kind_case(), v1::ExtractResponse::kBundle);
    const v1::BundleData& p = r.bundle();
    // The same bytes as protobuf's own serialization of the equivalent message (only the
    // field order differs): build that message and compare after a round trip.
    v1::BundleData expected;
    expected.set_bundle(2);
    expected.set_fiber_begin(50 + fibres);
    expected.set_nfibers(p.nfibers());
    const std::size_t off = static_cast<std::size_t>(fibres) * 2326;
    const std::size_t n = static_cast<std::size_t>(p.nfibers()) * 2326;
    expected.mutable_flux()->Add(b->flux.begin() + off, b->flux.begin() + off + n);
    expected.mutable_ivar()->Add(b->ivar.begin() + off, b->ivar.begin() + off + n);
    expected.mutable_resolution()->Add(b->rdiags.begin() + off * 11, b->rdiags.begin() + (off + n) * 11);
    expected.mutable_chi2pix()->Add(b->chi2pix.begin() + off, b->chi2pix.begin() + off + n);
    expected.mutable_pixmask_fraction()->Add(b->pixmask_fraction.begin() + off,
                                             b->pixmask_fraction.begin() + off + n);
    expected.set_failed_bins(reinterpret_cast<const char*>(b->failed_bins.data()) + off, n);
    if (i + 1 == parts.size()) {
      expected.set_last_part(true);
      expected.mutable_counts()->set_extracted(235);
      expected.mutable_counts()->set_retried(2);
      expected.set_seconds(1.5);
    }
    EXPECT_EQ(p.SerializeAsString(), expected.SerializeAsString()) << "part " << i;
    EXPECT_EQ(parts[i].ByteSize(), [&] {
      v1::ExtractResponse e;
      *e.mutable_bundle() = expected;
      return e.ByteSizeLong();
    }());
    fibres += p.nfibers();
  }
  EXPECT_EQ(fibres, 25);
  EXPECT_EQ(Parse(parts.front()).bundle().counts().extracted(), 0);
}

// Float32 parts carry each value rounded once (static_cast<float>, as the
// frame writer rounds), in about half the bytes, and no pixmask_fraction or failed_bins.
TEST(ProtoConvertTest, Float32PartsHoldTheRoundedValuesInHalfTheBytes) {
  auto b = std::make_shared<core::BundleResult>();
  b->Allocate(/*bundle=*/1, /*fiber0=*/25, /*nfib=*/25, /*nw=*/2326, /*nd=*/5);
  for (std::size_t i = 0; i < b->flux.size(); ++i) {
    b->flux[i] = 1.0 / 3.0 + static_cast<double>(i);  // not representable in float32
    b->ivar[i] = 1e-50 * static_cast<double>(i);      // underflows in float32
    b->chi2pix[i] = 1e300;                             // overflows to inf
  }
  for (std::size_t i = 0; i < b->rdiags.size(); ++i) b->rdiags[i] = 0.1 * static_cast<double>(i);
  const std::size_t limit = (4 << 20) - 65536;
  const std::vector<WireMessage> f64 = EncodeBundleParts(b, 1.5, limit);
  const std::vector<WireMessage> f32 = EncodeBundlePartsFloat32(b, 1.5, limit);
  std::size_t bytes64 = 0, bytes32 = 0;
  for (const WireMessage& m : f64) bytes64 += m.ByteSize();
  std::string flux, ivar, res, chi2;
  int fibres = 0;
  for (std::size_t i = 0; i < f32.size(); ++i) {
    bytes32 += f32[i].ByteSize();
    EXPECT_LE(f32[i].ByteSize(), std::size_t{4} << 20);
    const v1::BundleData p = Parse(f32[i]).bundle();
    EXPECT_EQ(p.fiber_begin(), 25 + fibres);
    EXPECT_EQ(p.last_part(), i + 1 == f32.size());
    EXPECT_EQ(p.flux_size() + p.ivar_size() + p.pixmask_fraction_size(), 0);
    EXPECT_TRUE(p.failed_bins().empty());
    flux += p.flux_f32();
    ivar += p.ivar_f32();
    res += p.resolution_f32();
    chi2 += p.chi2pix_f32();
    fibres += p.nfibers();
  }
  EXPECT_EQ(fibres, 25);
  EXPECT_LT(f32.size(), f64.size());
  EXPECT_NEAR(static_cast<double>(bytes32) / static_cast<double>(bytes64), 56.0 / 121.0, 0.01);
  auto expect_rounded = [](const std::string& bytes, const std::vector<double>& values) {
    ASSERT_EQ(bytes.size(), values.size() * sizeof(float));
    for (std::size_t i = 0; i < values.size(); ++i) {
      float v;
      std::memcpy(&v, bytes.data() + i * sizeof(float), sizeof(float));
      const float want = static_cast<float>(values[i]);
      ASSERT_EQ(std::memcmp(&v, &want, sizeof(float)), 0) << i;
    }
  };
  expect_rounded(flux, b->flux);
  expect_rounded(ivar, b->ivar);
  expect_rounded(res, b->rdiags);
  expect_rounded(chi2, b->chi2pix);
}

// Float32 parts from a pool's block carry the same bytes as from a block of their own; the
// block goes back to the pool once the parts are gone, and the next bundle takes it
// rather than fresh memory.
TEST(ProtoConvertTest, Float32PartsReusePooledMemoryOnceWritten) {
  auto bundle = std::make_shared<core::BundleResult>();
  core::BundleResult& b = *bundle;
  b.Allocate(/*bundle=*/0, /*fiber0=*/0, /*nfib=*/25, /*nw=*/2326, /*nd=*/5);
  for (std::size_t i = 0; i < b.flux.size(); ++i) {
    b.flux[i] = 1.0 / 7.0 * static_cast<double>(i);
    b.ivar[i] = 2.0 + static_cast<double>(i);
    b.chi2pix[i] = 0.5 * static_cast<double>(i);
  }
  for (std::size_t i = 0; i < b.rdiags.size(); ++i) b.rdiags[i] = 0.01 * static_cast<double>(i);
  const std::size_t limit = (4 << 20) - 65536;
  const std::string own = Flat(EncodeBundlePartsFloat32(bundle, 1.5, limit));
  core::PlaneBufferPool pool(int64_t{64} << 20);
  {
    const std::vector<WireMessage> pooled = EncodeBundlePartsFloat32(bundle, 1.5, limit, &pool);
    EXPECT_EQ(pool.cached_bytes(), 0);  // lent to the parts while they live
    EXPECT_EQ(Flat(pooled), own);
  }
  EXPECT_GT(pool.cached_bytes(), 0);
  EXPECT_EQ(pool.reused(), 0);
  EXPECT_EQ(Flat(EncodeBundlePartsFloat32(bundle, 1.5, limit, &pool)), own);
  EXPECT_EQ(pool.reused(), 1);
}

// A resolution the backend narrowed already (BundleResult::rdiags_f32) goes out as it is:
// the same bytes as rounded here from the float64 values, borrowed from the bundle, which
// the parts keep alive until they are gone.
TEST(ProtoConvertTest, Float32PartsBorrowAResolutionNarrowedAlready) {
  auto doubles = std::make_shared<core::BundleResult>();
  doubles->Allocate(/*bundle=*/2, /*fiber0=*/50, /*nfib=*/25, /*nw=*/2326, /*nd=*/5);
  for (std::size_t i = 0; i < doubles->flux.size(); ++i) {
    doubles->flux[i] = 1.0 / 3.0 + static_cast<double>(i);
    doubles->ivar[i] = 4.0 / static_cast<double>(i + 1);
    doubles->chi2pix[i] = 0.25 * static_cast<double>(i);
  }
  for (std::size_t i = 0; i < doubles->rdiags.size(); ++i) {
    doubles->rdiags[i] = 1.0 / 7.0 + 1e-3 * static_cast<double>(i);
  }
  auto narrowed = std::make_shared<core::BundleResult>(*doubles);
  narrowed->rdiags_f32 = core::PlaneBuffer<char>::Make(4 * narrowed->rdiags.size(), nullptr);
  core::NarrowToFloat32(narrowed->rdiags.data(), reinterpret_cast<float*>(narrowed->rdiags_f32.data()),
                        narrowed->rdiags.size());
  narrowed->rdiags.clear();
  const char* words = narrowed->rdiags_f32.data();
  const std::size_t limit = (4 << 20) - 65536;
  const std::string want = Flat(EncodeBundlePartsFloat32(doubles, 1.5, limit));
  std::weak_ptr<core::BundleResult> alive = narrowed;
  std::vector<WireMessage> parts = EncodeBundlePartsFloat32(std::move(narrowed), 1.5, limit);
  EXPECT_FALSE(alive.expired()) << "the parts do not keep the bundle they borrow from";
  EXPECT_EQ(Flat(parts), want);
  bool borrowed = false;
  for (const WireMessage& m : parts) {
    for (const WireMessage::Piece& p : m.pieces) {
      borrowed |= p.borrowed != nullptr && p.borrowed >= words &&
                  p.borrowed < words + 4 * doubles->rdiags.size();
    }
  }
  EXPECT_TRUE(borrowed) << "the narrowed resolution was copied";
  parts.clear();
  EXPECT_TRUE(alive.expired());
}

TEST(ProtoConvertTest, EmptyBundleModelChunkHeaderAndSummaryEncode) {
  auto empty = std::make_shared<core::BundleResult>();
  empty->Allocate(/*bundle=*/0, /*fiber0=*/0, /*nfib=*/0, /*nw=*/10, /*nd=*/1);
  const std::vector<WireMessage> parts = EncodeBundleParts(empty, 0.25, 1 << 20);
  ASSERT_EQ(parts.size(), 1u);
  const v1::ExtractResponse r = Parse(parts[0]);
  ASSERT_EQ(r.kind_case(), v1::ExtractResponse::kBundle);
  EXPECT_TRUE(r.bundle().last_part());
  EXPECT_EQ(r.bundle().flux_size(), 0);
  EXPECT_EQ(r.bundle().seconds(), 0.25);

  auto model = std::make_shared<const std::vector<double>>(std::vector<double>{1.0, 2.5, -3.0, 4.0});
  const WireMessage chunk = EncodeModelChunk(model, 8, 16);
  const v1::ExtractResponse m = Parse(chunk);
  ASSERT_EQ(m.kind_case(), v1::ExtractResponse::kModel);
  EXPECT_EQ(m.model().offset(), 8);
  EXPECT_EQ(m.model().total_bytes(), 32);
  EXPECT_EQ(m.model().data(), std::string(reinterpret_cast<const char*>(model->data()) + 8, 16));

  v1::FrameHeader header;
  header.add_wave(5760.0);
  header.add_image_header("SIMPLE  =                    T");
  header.set_backend("overwritten");
  v1::FrameHeader late;
  late.set_queue_seconds(0.5);
  late.set_backend("cuda");
  const v1::ExtractResponse h = Parse(EncodeFrameHeader(header.SerializeAsString(), late));
  ASSERT_EQ(h.kind_case(), v1::ExtractResponse::kHeader);
  header.MergeFrom(late);
  EXPECT_EQ(h.header().SerializeAsString(), header.SerializeAsString());

  v1::ExtractResponse summary;
  summary.mutable_summary()->set_nbundles(3);
  EXPECT_EQ(EncodeResponse(summary).Flatten(), summary.SerializeAsString());
}

// A tiny hand-made plan: the header copies it field by field, and lists every bundle when
// none were selected.
TEST(ProtoConvertTest, FrameHeaderFromPlanImageAndGrid) {
  core::PatchPlan plan;
  plan.specmin = 25;
  plan.nspec = 50;
  plan.bundlesize = 25;
  plan.nbundles = 2;
  plan.nwave = 3;
  plan.ndiag = 5;
  plan.wave = {5760.0, 5760.8, 5761.6000000000004};
  core::PreprocImage image;
  image.height = 4128;
  image.width = 4114;
  image.image_header = {"CAMERA  = 'r0      '", "EXPTIME =                900.0"};
  image.fibermap_fits = std::string("FITS\0bytes", 10);
  const core::GridRequest grid{5760.0, 5761.6, 0.8};

  const v1::FrameHeader all = FrameHeaderToProto("abc", plan, {}, image, "psf-r0.fits", grid);
  EXPECT_EQ(all.psf_id(), "abc");
  EXPECT_EQ(all.specmin(), 25);
  EXPECT_EQ(all.nspec(), 50);
  EXPECT_EQ(all.bundlesize(), 25);
  EXPECT_EQ(all.ndiag(), 5);
  EXPECT_EQ(std::vector<double>(all.wave().begin(), all.wave().end()), plan.wave);  // bit-exact
  EXPECT_EQ(std::vector<int>(all.bundles().begin(), all.bundles().end()), (std::vector<int>{0, 1}));
  EXPECT_EQ(std::vector<std::string>(all.image_header().begin(), all.image_header().end()),
            image.image_header);
  EXPECT_EQ(all.fibermap_fits(), image.fibermap_fits);
  EXPECT_EQ(all.orig_psf(), "psf-r0.fits");
  EXPECT_EQ(all.wavemin(), 5760.0);
  EXPECT_EQ(all.wavemax(), 5761.6);
  EXPECT_EQ(all.wavestep(), 0.8);
  EXPECT_EQ(all.image_height(), 4128);
  EXPECT_EQ(all.image_width(), 4114);
  EXPECT_EQ(all.queue_seconds(), 0.0);  // the worker's to fill
  EXPECT_TRUE(all.backend().empty());

  const v1::FrameHeader one = FrameHeaderToProto("abc", plan, {1}, image, "", grid);
  EXPECT_EQ(std::vector<int>(one.bundles().begin(), one.bundles().end()), (std::vector<int>{1}));
}

TEST(ProtoConvertTest, ExtractionSummaryCountsAndStages) {
  core::ExtractionSummary s;
  s.counts.extracted = 40;
  s.counts.skipped = 3;
  s.counts.retried = 2;
  s.counts.failed = 1;
  s.stage_seconds = {{"cholesky", 0.25}, {"solve", 1.5}};
  v1::ExtractSummary out;
  out.set_nbundles(7);
  ExtractionSummaryToProto(s, &out);
  EXPECT_EQ(out.counts().extracted(), 40);
  EXPECT_EQ(out.counts().skipped(), 3);
  EXPECT_EQ(out.counts().retried(), 2);
  EXPECT_EQ(out.counts().failed(), 1);
  ASSERT_EQ(out.stage_seconds().size(), 2u);
  EXPECT_EQ(out.stage_seconds().at("cholesky"), 0.25);
  EXPECT_EQ(out.stage_seconds().at("solve"), 1.5);
  EXPECT_EQ(out.nbundles(), 7);  // untouched
}

TEST(ProtoConvertTest, BundleDoneCarriesIdentityCountsAndSecondsButNoArrays) {
  core::BundleResult b;
  b.Allocate(/*bundle=*/3, /*fiber0=*/75, /*nfib=*/25, /*nw=*/10, /*nd=*/2);
  b.counts.extracted = 9;
  b.counts.failed = 1;
  const v1::ExtractResponse r = Parse(EncodeBundleDone(b, 0.75));
  ASSERT_EQ(r.kind_case(), v1::ExtractResponse::kBundle);
  EXPECT_EQ(r.bundle().bundle(), 3);
  EXPECT_EQ(r.bundle().fiber_begin(), 75);
  EXPECT_EQ(r.bundle().nfibers(), 25);
  EXPECT_TRUE(r.bundle().last_part());
  EXPECT_EQ(r.bundle().counts().extracted(), 9);
  EXPECT_EQ(r.bundle().counts().failed(), 1);
  EXPECT_EQ(r.bundle().seconds(), 0.75);
  EXPECT_EQ(r.bundle().flux_size(), 0);
  EXPECT_TRUE(r.bundle().failed_bins().empty());
}

// A PSF's device bytes: the warm state of its own geometries, summed over the workers;
// another PSF's geometry on the same device is not counted.
TEST(ProtoConvertTest, PsfSummaryCountsItsGeometriesOnEveryWorker) {
  std::shared_ptr<const core::Psf> psf = testing::LoadBundledPsf();
  ASSERT_NE(psf, nullptr);
  core::ExtractionParams p;
  p.nspec = 25;
  p.wmin = 6000.0;
  p.wmax = 6100.0;
  p.has_wavelength = true;
  auto mine = core::Geometry::Create(psf, p, 4128, 4114);
  auto other = core::Geometry::Create(psf, p, 4128, 4114);
  ASSERT_TRUE(mine.ok() && other.ok());
  PsfSummary s;
  s.id = "abc";
  s.source = "psf.fits";
  s.nspec = 500;
  s.wavemin = 5543.0;
  s.wavemax = 7827.0;
  s.in_psf = "in.fits";
  s.host_bytes = 1234;
  s.geometries = 1;
  s.geometry_refs = {*mine};
  s.already_loaded = true;
  std::vector<core::BackendMemory> memory(2);
  memory[0].geometry_bytes = {{mine->get(), 100}, {other->get(), 1000}};
  memory[1].geometry_bytes = {{mine->get(), 20}};
  v1::PsfInfo out;
  PsfSummaryToProto(s, memory, &out);
  EXPECT_EQ(out.id(), "abc");
  EXPECT_EQ(out.source(), "psf.fits");
  EXPECT_EQ(out.nspec(), 500);
  EXPECT_EQ(out.wavemin(), 5543.0);
  EXPECT_EQ(out.wavemax(), 7827.0);
  EXPECT_EQ(out.in_psf(), "in.fits");
  EXPECT_EQ(out.host_bytes(), 1234);
  EXPECT_EQ(out.gpu_bytes(), 120);
  EXPECT_EQ(out.geometries(), 1);
  EXPECT_TRUE(out.already_loaded());
}

TEST(ProtoConvertTest, WorkerStateAndLimits) {
  WorkerState w;
  w.index = 2;
  w.backend = "cuda";
  w.description = "cuda (device 1)";
  w.gpu_device = 1;
  w.healthy = false;
  w.busy = true;
  v1::WorkerInfo info;
  WorkerStateToProto(w, &info);
  EXPECT_EQ(info.index(), 2);
  EXPECT_EQ(info.backend(), "cuda");
  EXPECT_EQ(info.description(), "cuda (device 1)");
  EXPECT_EQ(info.gpu_device(), 1);
  EXPECT_FALSE(info.healthy());
  EXPECT_TRUE(info.busy());

  ServiceLimits limits;
  limits.max_message_bytes = 11;
  limits.max_upload_bytes = 12;
  limits.max_image_pixels = 13;
  limits.upload_idle_seconds = 14.5;
  limits.write_timeout_seconds = 15.5;
  Scheduler::Load load;
  load.max_queue = 16;
  load.max_uploads = 17;
  load.realtime_reserve = 18;
  v1::Limits out;
  LimitsToProto(limits, load, 19, &out);
  EXPECT_EQ(out.max_message_bytes(), 11);
  EXPECT_EQ(out.max_upload_bytes(), 12);
  EXPECT_EQ(out.max_image_pixels(), 13);
  EXPECT_EQ(out.upload_idle_seconds(), 14.5);
  EXPECT_EQ(out.write_timeout_seconds(), 15.5);
  EXPECT_EQ(out.max_queue(), 16);
  EXPECT_EQ(out.max_uploads(), 17);
  EXPECT_EQ(out.realtime_reserve(), 18);
  EXPECT_EQ(out.psf_cache_budget_bytes(), 19);
}

}  // namespace
}  // namespace spexd::server
