// The service with the files DESI users have: gzip-compressed preproc and PSF files
// (uploaded, by server path, and the shared case A preproc.fits.gz as is), .fits.gz
// outputs, gzip bombs and broken gzip data; and the header-before-pixels order of a job
// (the header is judged before any pixel is read).
#include <fitsio.h>
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/fits_file.h"
#include "core/io/fits_gunzip.h"
#include "core/io/internal/gzip.h"
#include "gtest/gtest.h"
#include "spexd/v1/spexd.grpc.pb.h"
#include "tests/core/io/gzip_test_bytes.h"
#include "tests/integration/service_fixture.h"
#include "tests/peak_memory.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

std::string Gzip(const std::string& bytes) {
  auto gz = core::GzipCompress(bytes);
  EXPECT_TRUE(gz.ok()) << gz.status();
  return gz.ok() ? *gz : std::string();
}

std::string Gunzip(const std::string& gz) {
  auto fits = core::GunzipFits(gz, "gz", core::FitsSizeLimits{});
  EXPECT_TRUE(fits.ok()) << fits.status();
  return fits.ok() ? *fits : std::string();
}

// A header block declaring a `side` x `side` float32 primary image, without its data.
std::string ImageHeader(long side) {
  std::string h;
  auto card = [&](const std::string& text) { h += text + std::string(80 - text.size(), ' '); };
  const std::string n = std::to_string(side);
  card("SIMPLE  =                    T");
  card("BITPIX  =                  -32");
  card("NAXIS   =                    2");
  card("NAXIS1  = " + std::string(20 - n.size(), ' ') + n);
  card("NAXIS2  = " + std::string(20 - n.size(), ' ') + n);
  card("END");
  h.resize(2880, ' ');
  return h;
}

// An extraction at the wire level (no client retries), for the status of refusals.
grpc::Status RawExtract(int port, const v1::ExtractHeader& header, const std::string& upload,
                        bool subset = false) {
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Extraction::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = subset ? stub->ExtractBundles(&ctx) : stub->ExtractFrame(&ctx);
  v1::ExtractRequest req;
  *req.mutable_header() = header;
  if (!header.has_server_path()) {
    req.mutable_header()->set_upload_size(static_cast<int64_t>(upload.size()));
  }
  stream->Write(req);
  for (std::size_t off = 0; off < upload.size(); off += 1 << 20) {
    v1::ExtractRequest chunk;
    chunk.mutable_chunk()->set_data(upload.substr(off, 1 << 20));
    if (!stream->Write(chunk)) break;
  }
  stream->WritesDone();
  v1::ExtractResponse resp;
  while (stream->Read(&resp)) {
  }
  return stream->Finish();
}

// The test frame with its MASK replaced by an int32 one holding 70000 at one pixel: the
// headers are fine, but decoding the MASK fails ("does not fit in 16 mask bits").
std::string FrameWithUndecodableMask() {
  const std::string path = MakeTempDir() + "/bad-mask.fits";
  WriteBytes(path, Inputs().frame_bytes);
  fitsfile* f = nullptr;
  int status = 0;
  fits_open_diskfile(&f, path.c_str(), READWRITE, &status);
  fits_movnam_hdu(f, ANY_HDU, const_cast<char*>("MASK"), 0, &status);
  long naxes[2] = {0, 0};
  fits_get_img_size(f, 2, naxes, &status);
  fits_delete_hdu(f, nullptr, &status);
  std::vector<int32_t> mask(static_cast<std::size_t>(naxes[0] * naxes[1]), 0);
  mask[10] = 70000;
  fits_create_img(f, LONG_IMG, 2, naxes, &status);
  fits_update_key(f, TSTRING, "EXTNAME", const_cast<char*>("MASK"), nullptr, &status);
  long fpixel[2] = {1, 1};
  fits_write_pix(f, TINT, fpixel, static_cast<LONGLONG>(mask.size()), mask.data(), &status);
  fits_close_file(f, &status);
  EXPECT_EQ(status, 0);
  return ReadBytes(path);
}

// The test frame with a RICE tile-compressed IMAGE whose tiles are then overwritten
// with garbage (`garbage`): its size is in the header, but decoding it fails.
std::string FrameWithUndecodableCompressedImage(bool garbage = true) {
  const std::string dir = MakeTempDir();
  WriteBytes(dir + "/in.fits", Inputs().frame_bytes);
  fitsfile *in = nullptr, *out = nullptr;
  int status = 0;
  const std::string out_path = dir + "/packed.fits";
  fits_open_diskfile(&in, (dir + "/in.fits").c_str(), READONLY, &status);
  fits_create_diskfile(&out, out_path.c_str(), &status);
  fits_create_img(out, BYTE_IMG, 0, nullptr, &status);
  int nhdu = 0;
  fits_get_num_hdus(in, &nhdu, &status);
  for (int i = 1; i <= nhdu && status == 0; ++i) {
    fits_movabs_hdu(in, i, nullptr, &status);
    char extname[FLEN_VALUE] = "";
    int s = 0;
    fits_read_key(in, TSTRING, "EXTNAME", extname, nullptr, &s);
    if (i == 1) std::snprintf(extname, sizeof(extname), "IMAGE");  // the primary is IMAGE
    if (std::string(extname) == "IMAGE") {
      fits_set_compression_type(out, RICE_1, &status);
      fits_img_compress(in, out, &status);
      fits_update_key(out, TSTRING, "EXTNAME", const_cast<char*>("IMAGE"), nullptr, &status);
      fits_set_compression_type(out, 0, &status);
    } else {
      fits_copy_hdu(in, out, 0, &status);
    }
  }
  fits_movnam_hdu(out, ANY_HDU, const_cast<char*>("IMAGE"), 0, &status);
  LONGLONG head = 0, data = 0, end = 0;
  fits_get_hduaddrll(out, &head, &data, &end, &status);
  fits_close_file(out, &status);
  fits_close_file(in, &status);
  EXPECT_EQ(status, 0);
  std::string bytes = ReadBytes(out_path);
  if (!garbage) return bytes;
  for (LONGLONG i = data + (end - data) / 4; i < end - 64; ++i) {
    bytes[static_cast<std::size_t>(i)] = static_cast<char>(0xA5);
  }
  return bytes;
}

class GzipServiceTest : public LoadedServerTest {};

TEST_F(GzipServiceTest, GzipPreprocUploadEqualsPlainUploadAndLocalBitForBit) {
  ASSERT_TRUE(core::IsGzip(Inputs().frame_gz_bytes));
  auto plain = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &Inputs().frame_bytes);
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto packed = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &Inputs().frame_gz_bytes);
  ASSERT_TRUE(packed.ok()) << packed.status();
  ExpectFramesIdentical(*plain, *packed);
  ExpectFramesIdentical(*local_, *packed);
  auto local_gz = LocalExtract(Inputs().psf_path, Inputs().frame_gz_path, SmallParams());
  ASSERT_TRUE(local_gz.ok()) << local_gz.status();
  ExpectFramesIdentical(*local_gz, *packed);
  EXPECT_GT(packed->counts.extracted, 0);
}

TEST_F(GzipServiceTest, GzipPreprocByServerPathEqualsLocal) {
  v1::ExtractHeader h = SmallHeader(psf_id_);
  h.set_server_path(Inputs().frame_gz_path);
  auto remote = RemoteExtractFrame(*client_, h, nullptr);
  ASSERT_TRUE(remote.ok()) << remote.status();
  ExpectFramesIdentical(*local_, *remote);
}

TEST_F(GzipServiceTest, GzipPsfUploadedOrByServerPathGivesTheSameFrame) {
  auto uploaded = client_->LoadPsfFromBytes(Inputs().psf_gz_bytes, "psf.fits.gz");
  ASSERT_TRUE(uploaded.ok()) << uploaded.status();
  EXPECT_EQ(uploaded->nspec(), 500);
  auto by_path = client_->LoadPsfFromServerPath(Inputs().psf_gz_path);
  ASSERT_TRUE(by_path.ok()) << by_path.status();
  EXPECT_EQ(by_path->id(), uploaded->id());  // the id hashes the bytes as given
  auto remote = RemoteExtractFrame(*client_, SmallHeader(uploaded->id()), &Inputs().frame_gz_bytes);
  ASSERT_TRUE(remote.ok()) << remote.status();
  ExpectFramesIdentical(*local_, *remote);
}

TEST_F(GzipServiceTest, SharedCaseAPreprocUploadedAsItIsEqualsLocal) {
  // The real-size DESI layout (4128 x 4114, RICE-compressed MASK) inside gzip, as users
  // have it: the default upload mode must take it.
  SPEXD_REQUIRE_SHARED_DATA(preproc, "caseA/preproc.fits.gz");
  const std::string bytes = ReadBytes(preproc);
  ASSERT_TRUE(core::IsGzip(bytes));
  auto remote = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &bytes);
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto local = LocalExtract(Inputs().psf_path, preproc, SmallParams());
  ASSERT_TRUE(local.ok()) << local.status();
  ExpectFramesIdentical(*local, *remote);
  EXPECT_GT(remote->counts.extracted, 0);
}

TEST_F(GzipServiceTest, GzipBombIsRefusedAndTheServerKeepsServing) {
  // 40 GB of pixels declared in 2880 bytes; 16 MB of zeros behind them squeeze into ~16 kB.
  const std::string bomb = Gzip(ImageHeader(100000) + std::string(16 << 20, '\0'));
  ASSERT_LT(bomb.size(), 100000u);
  grpc::Status s = RawExtract(server_->port(), SmallHeader(psf_id_), bomb);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
  EXPECT_NE(s.error_message().find("--max_image_pixels"), std::string::npos) << s.error_message();
  // A PSF bomb too.
  auto psf_bomb = client_->LoadPsfFromBytes(bomb, "bomb.fits.gz");
  EXPECT_EQ(psf_bomb.status().code(), absl::StatusCode::kResourceExhausted) << psf_bomb.status();
  auto next = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &Inputs().frame_gz_bytes);
  ASSERT_TRUE(next.ok()) << next.status();
  ExpectFramesIdentical(*local_, *next);
}

// Crafted streams that cost a decoder far more than their size unless its work is bounded
// (tests/core/io/gzip_hostile_test.cc has their CPU and memory): uploaded and by server
// path, each is refused at once and the next normal request is served.
TEST_F(GzipServiceTest, CraftedGzipIsRefusedAtOnceAndTheNextRequestIsServed) {
  const std::string stored = core::gzip_test::StoredBlockFlood(17u << 20, 0xFFFFFFFFu);
  const std::string copies = core::gzip_test::CopyFlood(16u << 20, 4u << 20, 16u * (16u << 20));
  int k = 0;
  for (const std::string* gz : {&stored, &copies}) {
    const std::string path = absl::StrCat(Inputs().data_dir, "/crafted-", k++, ".fits.gz");
    ASSERT_TRUE(WriteBytes(path, *gz));
    for (bool by_path : {false, true}) {
      v1::ExtractHeader h = SmallHeader(psf_id_);
      if (by_path) h.set_server_path(path);
      const auto t0 = std::chrono::steady_clock::now();
      grpc::Status s = RawExtract(server_->port(), h, by_path ? std::string() : *gz);
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
      EXPECT_NE(s.error_message().find(gz == &stored ? "corrupt gzip data" : "not a FITS file"),
                std::string::npos) << s.error_message();
      // The upload itself is most of it; the decode that froze a server took minutes.
      EXPECT_LT(seconds, 10.0) << (by_path ? "by path" : "uploaded");
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto next = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &Inputs().frame_gz_bytes);
  ASSERT_TRUE(next.ok()) << next.status();
  ExpectFramesIdentical(*local_, *next);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0);
}

// The hostile files of tests/core/io/hostile_headers_test.cc (a primary header without END
// made of COMMENT cards, and of the text "SIMPLE  = " over and over; two float64 planes of
// zeros, the primary and IVAR, 1 GB in under 1 MB), eight at once, uploaded and by server
// path: each is refused with INVALID_ARGUMENT from its headers, the server's peak resident
// memory grows by a few tens of MB at most (it grew by gigabytes while such files were
// inflated whole), and the next request is served (docs/service.md "Input files and
// their limits").
TEST_F(GzipServiceTest, HostileHeadersEightAtOnceCostAFewTensOfMegabytes) {
  struct Hostile {
    std::string gz, words;
  };
  std::vector<Hostile> files;
  files.push_back({Gzip(core::gzip_test::CommentBombFits(std::size_t{64} << 20)),
                   "no END card in its first 2880 cards"});
  files.push_back({Gzip(core::gzip_test::RepeatedSimpleFits(std::size_t{64} << 20)),
                   "no END card in its first 2880 cards"});
  files.push_back({core::gzip_test::ZeroPlanesWithoutImageGz(), "is not the IMAGE HDU"});
  std::vector<std::string> paths;
  for (std::size_t k = 0; k < files.size(); ++k) {
    paths.push_back(absl::StrCat(Inputs().data_dir, "/hostile-", k, ".fits.gz"));
    ASSERT_TRUE(WriteBytes(paths.back(), files[k].gz));
  }
  std::vector<grpc::Status> statuses(8);
  const int64_t extra = PeakExtraResident([&] {
    for (std::size_t k = 0; k < files.size(); ++k) {
      for (bool by_path : {false, true}) {
        std::vector<std::thread> eight;
        for (std::size_t i = 0; i < statuses.size(); ++i) {
          eight.emplace_back([&, i, k, by_path] {
            v1::ExtractHeader h = SmallHeader(psf_id_);
            if (by_path) h.set_server_path(paths[k]);
            statuses[i] = RawExtract(server_->port(), h, by_path ? std::string() : files[k].gz);
          });
        }
        for (std::thread& t : eight) t.join();
        for (const grpc::Status& s : statuses) {
          EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
              << (by_path ? "by path: " : "uploaded: ") << s.error_message();
          EXPECT_NE(s.error_message().find(files[k].words), std::string::npos) << s.error_message();
        }
      }
    }
  });
  std::printf("6 rounds of 8 hostile requests: peak extra resident %lld bytes\n",
              static_cast<long long>(extra));
  if (extra >= 0) {
    EXPECT_LT(extra, (int64_t{64} << 20) * kPeakBarScale) << "peak extra resident bytes";
  }
  auto next = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &Inputs().frame_gz_bytes);
  ASSERT_TRUE(next.ok()) << next.status();
  ExpectFramesIdentical(*local_, *next);
}

TEST_F(GzipServiceTest, CorruptAndTruncatedGzipAreInvalidArgument) {
  const std::string& gz = Inputs().frame_gz_bytes;
  std::string corrupt = gz;
  for (std::size_t i = gz.size() / 2; i < gz.size() / 2 + 32; ++i) corrupt[i] ^= 0x5A;
  const std::string truncated = gz.substr(0, gz.size() / 2);
  for (const std::string& bad : std::vector<std::string>{corrupt, truncated}) {
    grpc::Status s = RawExtract(server_->port(), SmallHeader(psf_id_), bad);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find("gzip"), std::string::npos) << s.error_message();
  }
  const std::string& psf_gz = Inputs().psf_gz_bytes;
  auto cut_psf = client_->LoadPsfFromBytes(psf_gz.substr(0, psf_gz.size() - 100), "psf.fits.gz");
  EXPECT_EQ(cut_psf.status().code(), absl::StatusCode::kInvalidArgument) << cut_psf.status();
  auto next = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &Inputs().frame_bytes);
  ASSERT_TRUE(next.ok()) << next.status();
}

TEST_F(GzipServiceTest, ServerOutputWithGzNameIsGzipWithTheSameHdus) {
  auto write = [&](const std::string& name) {
    v1::ExtractHeader h = SmallHeader(psf_id_);
    h.set_server_path(Inputs().frame_gz_path);
    h.set_server_output_path(Inputs().output_dir + "/" + name);
    EXPECT_TRUE(client_->Extract(h, nullptr, false, client::ExtractCallbacks{}).ok());
    return ReadBytes(Inputs().output_dir + "/" + name);
  };
  const std::string plain = write("gz-test-plain.fits");
  const std::string packed = write("gz-test-frame.fits.gz");
  ASSERT_TRUE(core::IsGzip(packed));
  ASSERT_FALSE(core::IsGzip(plain));
  EXPECT_LT(packed.size(), plain.size());
  // Inflated, the same records but for the CHECKSUM/DATASUM comments (write time).
  const std::string inflated = Gunzip(packed);
  ASSERT_EQ(inflated.size(), plain.size());
  for (std::size_t off = 0; off < plain.size(); off += 80) {
    if (plain.compare(off, 80, inflated, off, 80) == 0) continue;
    const std::string key = plain.substr(off, 8);
    ASSERT_TRUE(key == "CHECKSUM" || key == "DATASUM ") << off << ": " << plain.substr(off, 80);
  }
  // CFITSIO opens it by name, and every HDU's CHECKSUM/DATASUM verify.
  auto f = core::FitsFile::OpenRead(Inputs().output_dir + "/gz-test-frame.fits.gz");
  ASSERT_TRUE(f.ok()) << f.status();
  auto nhdu = f->NumHdus();
  ASSERT_TRUE(nhdu.ok());
  EXPECT_GE(*nhdu, 6);
  for (int i = 0; i < *nhdu; ++i) {
    ASSERT_TRUE(f->MoveToHduIndex(i).ok());
    int dataok = 0, hduok = 0, status = 0;
    fits_verify_chksum(f->get(), &dataok, &hduok, &status);
    EXPECT_EQ(status, 0);
    EXPECT_EQ(dataok, 1) << "HDU " << i;
    EXPECT_EQ(hduok, 1) << "HDU " << i;
  }
  ASSERT_TRUE(f->MoveToHdu("FLUX").ok());
  auto flux = f->ReadImage<float>();
  ASSERT_TRUE(flux.ok());
  ASSERT_EQ(flux->size(), local_->flux.size());
  for (std::size_t i = 0; i < flux->size(); ++i) {
    ASSERT_EQ((*flux)[i], static_cast<float>(local_->flux[i])) << i;
  }
}

// .fits.gz outputs of requests cut short by the client's deadline at several points of a
// ten-bundle frame (chunks deflating on the host pool when the job goes): the server keeps
// serving, and each name holds nothing or a whole member; the next request is written.
TEST_F(GzipServiceTest, GzOutputsOfRequestsCutShortAreWholeOrAbsent) {
  std::vector<std::string> names;
  for (double deadline : {0.02, 0.04, 0.06, 0.08, 0.1, 0.12}) {
    names.push_back(absl::StrCat(Inputs().output_dir, "/gz-cut-", names.size(), ".fits.gz"));
    client::ClientOptions o;
    o.extract_deadline_seconds = deadline;
    o.max_attempts = 1;
    auto c = Connect(*server_, o);
    ASSERT_NE(c, nullptr);
    v1::ExtractHeader h = TenBundleHeader(psf_id_);
    h.set_server_path(Inputs().frame_gz_path);
    h.set_server_output_path(names.back());
    const absl::Status st = c->Extract(h, nullptr, false, client::ExtractCallbacks{});
    EXPECT_TRUE(st.ok() || absl::IsDeadlineExceeded(st)) << deadline << " s: " << st;
  }
  v1::ExtractHeader h = TenBundleHeader(psf_id_);
  h.set_server_path(Inputs().frame_gz_path);
  h.set_server_output_path(Inputs().output_dir + "/gz-after-cuts.fits.gz");
  ASSERT_TRUE(client_->Extract(h, nullptr, false, client::ExtractCallbacks{}).ok());
  const std::string whole = Gunzip(ReadBytes(Inputs().output_dir + "/gz-after-cuts.fits.gz"));
  ASSERT_FALSE(whole.empty());
  std::this_thread::sleep_for(std::chrono::seconds(1));  // cut jobs still ending commit or not
  for (const std::string& name : names) {
    FILE* f = std::fopen(name.c_str(), "rb");
    if (f == nullptr) continue;
    std::fclose(f);
    const std::string gz = ReadBytes(name);
    ASSERT_TRUE(core::IsGzip(gz)) << name;
    EXPECT_EQ(Gunzip(gz).size(), whole.size()) << name;
  }
}

TEST_F(GzipServiceTest, AstropyReadsGzOutputsWithTheSameDataAndValidChecksums) {
  if (std::system("/usr/bin/python3 -c 'import astropy.io.fits, numpy' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "needs /usr/bin/python3 with astropy (Debian python3-astropy); not installed";
  }
  const std::string dir = Inputs().output_dir;
  for (const char* name : {"astropy-plain.fits", "astropy-frame.fits.gz"}) {
    v1::ExtractHeader h = SmallHeader(psf_id_);
    h.set_server_path(Inputs().frame_path);
    h.set_server_output_path(dir + "/" + name);
    ASSERT_TRUE(client_->Extract(h, nullptr, false, client::ExtractCallbacks{}).ok());
  }
  const std::string script = MakeTempDir() + "/compare.py";
  WriteBytes(script,
             "import sys, numpy\n"
             "from astropy.io import fits\n"
             "a = fits.open(sys.argv[1], checksum=True)\n"
             "b = fits.open(sys.argv[2], checksum=True)\n"
             "assert open(sys.argv[2], 'rb').read(2) == b'\\x1f\\x8b'\n"
             "assert [h.name for h in a] == [h.name for h in b], 'HDU names'\n"
             "for x, y in zip(a, b):\n"
             "    if x.data is None: continue\n"
             "    if isinstance(x, fits.BinTableHDU):\n"
             "        assert x.data.tobytes() == y.data.tobytes(), x.name\n"
             "    else:\n"
             "        assert numpy.array_equal(x.data, y.data, equal_nan=True), x.name\n"
             "print('same', len(a))\n");
  const std::string cmd = absl::StrCat("/usr/bin/python3 -W error::astropy.io.fits.verify.VerifyWarning ",
                                       script, " ", dir, "/astropy-plain.fits ", dir,
                                       "/astropy-frame.fits.gz 2>&1");
  const spexd::testing::CommandResult run = spexd::testing::RunCommand(cmd);
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("same"), std::string::npos) << run.output;
}

TEST_F(GzipServiceTest, RefusedRequestIsRefusedBeforeItsImageIsDecoded) {
  // The fibre is outside the request, which the server can tell
  // without the pixels; the MASK would fail to decode. The answer must be about the
  // fibre: the frame was not decoded first.
  const std::string frame = FrameWithUndecodableMask();
  v1::ExtractHeader h = SmallHeader(psf_id_);
  h.add_fibers(400);
  grpc::Status s = RawExtract(server_->port(), h, frame, /*subset=*/true);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("fibre 400"), std::string::npos) << s.error_message();
  // The same frame in a valid request does get decoded, and its MASK refused.
  grpc::Status decoded = RawExtract(server_->port(), SmallHeader(psf_id_), frame);
  EXPECT_EQ(decoded.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(decoded.error_message().find("16 mask bits"), std::string::npos)
      << decoded.error_message();
}

TEST(GzipServiceLimitsTest, OversizedTileCompressedImageIsRefusedFromItsHeader) {
  // The image's size is judged from its header (ZNAXISn), not by
  // decoding it. Every tile's stream is checked when the file is opened
  // (core/compressed_hdu_check), so undecodable tiles are refused there, INVALID_ARGUMENT
  // naming the tile, and the size limit is shown on valid tiles. Plain, gzip and server
  // path alike.
  server::ServerOptions o = TestServerOptions();
  o.limits.max_image_pixels = 20000;
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  auto client = Connect(*server);
  auto psf = client->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
  ASSERT_TRUE(psf.ok()) << psf.status();
  for (bool garbage : {true, false}) {
    SCOPED_TRACE(garbage ? "undecodable tiles" : "valid tiles");
    const std::string frame = FrameWithUndecodableCompressedImage(garbage);
    const std::string path = Inputs().data_dir + "/undecodable-packed.fits";
    WriteBytes(path, frame);
    for (const std::string& upload : {frame, Gzip(frame), std::string()}) {
      v1::ExtractHeader h = SmallHeader(psf->id());
      if (upload.empty()) h.set_server_path(path);
      grpc::Status s = RawExtract(server->port(), h, upload);
      // A gzip upload is inflated in steps, each HDU's header checked against the limits
      // as it comes out: the size is refused before the tiles are looked at.
      const bool by_size = !garbage || core::IsGzip(upload);
      EXPECT_EQ(s.error_code(), by_size ? grpc::StatusCode::RESOURCE_EXHAUSTED
                                        : grpc::StatusCode::INVALID_ARGUMENT)
          << s.error_message();
      EXPECT_NE(s.error_message().find(by_size ? "max_image_pixels=20000"
                                               : "of the compressed image is not"),
                std::string::npos)
          << s.error_message();
    }
  }
}

}  // namespace
}  // namespace spexd::testing
