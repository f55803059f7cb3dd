// A table of bad requests, each answered with its expected status while the server keeps
// serving; then limits, authentication and the PSF cache budget through the service.
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "server/platform/metrics.h"
#include "spexd/v1/spexd.grpc.pb.h"
#include "tests/integration/service_fixture.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

constexpr int64_t kUploadLimit = 8 << 20;

// A request at the wire level: the header, then raw chunks (possibly fewer bytes than
// announced), sent on the generated stub so that malformed streams can be made.
struct RawRequest {
  std::string name;
  std::function<void(v1::ExtractHeader*)> edit;  // applied to a valid upload header
  std::string upload;                            // bytes sent as chunks
  int64_t announced = -1;                        // upload_size; -1: upload.size()
  bool subset = false;
  bool skip_header = false;                      // send a chunk first
  grpc::StatusCode expected;
};

grpc::Status RunRaw(const std::shared_ptr<grpc::Channel>& channel, const std::string& psf_id,
                    const RawRequest& r) {
  auto stub = v1::Extraction::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = r.subset ? stub->ExtractBundles(&ctx) : stub->ExtractFrame(&ctx);
  v1::ExtractRequest req;
  if (!r.skip_header) {
    v1::ExtractHeader h = SmallHeader(psf_id);
    h.set_upload_size(r.announced >= 0 ? r.announced : static_cast<int64_t>(r.upload.size()));
    if (r.edit) r.edit(&h);
    *req.mutable_header() = h;
    stream->Write(req);
  }
  const std::size_t kChunk = 1 << 20;
  for (std::size_t off = 0; off < r.upload.size(); off += kChunk) {
    v1::ExtractRequest chunk;
    chunk.mutable_chunk()->set_data(r.upload.substr(off, kChunk));
    if (!stream->Write(chunk)) break;
  }
  stream->WritesDone();
  v1::ExtractResponse resp;
  while (stream->Read(&resp)) {
  }
  return stream->Finish();
}

class BadRequestTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions o = TestServerOptions();
    o.limits.max_upload_bytes = kUploadLimit;
    server_ = StartServer(o);
    ASSERT_NE(server_, nullptr);
    client_ = Connect(*server_);
    auto psf = client_->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_id_ = psf->id();
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  std::unique_ptr<server::SpexdServer> server_;
  std::unique_ptr<client::SpexdClient> client_;
  std::shared_ptr<grpc::Channel> channel_;
  std::string psf_id_;
};

TEST_F(BadRequestTest, EachBadRequestGetsItsStatusAndTheServerKeepsServing) {
  auto psf = core::Psf::Load(Inputs().psf_path);
  ASSERT_TRUE(psf.ok());
  SyntheticFrameOptions mismatch;
  mismatch.ivar_shape_mismatch = true;
  auto mismatched = MakeSyntheticPreproc(*psf, mismatch);
  ASSERT_TRUE(mismatched.ok());
  SyntheticFrameOptions empty;
  empty.empty_image = true;
  auto empty_image = MakeSyntheticPreproc(*psf, empty);
  ASSERT_TRUE(empty_image.ok());
  const std::string& good = Inputs().frame_bytes;
  const std::string outside = MakeTempDir() + "/frame.fits";
  ASSERT_TRUE(WriteBytes(outside, good));
  // A symlink inside the data root that points outside it.
  const std::string link = Inputs().data_dir + "/escape.fits";
  std::remove(link.c_str());
  ASSERT_EQ(symlink(outside.c_str(), link.c_str()), 0);
  // A cut-out that holds none of the requested traces (fibre 0 is at x ~ 121).
  SyntheticFrameOptions narrow;
  narrow.width = 60;
  auto off_trace = MakeSyntheticPreproc(*psf, narrow);
  ASSERT_TRUE(off_trace.ok());
  using C = grpc::StatusCode;
  auto path = [](const std::string& p) {
    return [p](v1::ExtractHeader* h) { h->set_server_path(p); };
  };
  const std::vector<RawRequest> table = {
      {"unknown PSF id", [](v1::ExtractHeader* h) { h->set_psf_id(std::string(64, 'a')); }, good, -1,
       false, false, C::NOT_FOUND},
      {"path outside the data roots", path(outside), "", -1, false, false, C::PERMISSION_DENIED},
      {"symlink escaping the data root", path(link), "", -1, false, false, C::PERMISSION_DENIED},
      {"dot-dot in the path", path(Inputs().data_dir + "/../frame.fits"), "", -1, false, false,
       C::INVALID_ARGUMENT},
      {"relative path", path("frame.fits"), "", -1, false, false, C::INVALID_ARGUMENT},
      {"missing server file", path(Inputs().data_dir + "/nope.fits"), "", -1, false, false,
       C::NOT_FOUND},
      {"mismatched IMAGE/IVAR shapes", nullptr, *mismatched, -1, false, false, C::INVALID_ARGUMENT},
      {"image without the requested traces", nullptr, *off_trace, -1, false, false,
       C::INVALID_ARGUMENT},
      {"wavelength range off the PSF",
       [](v1::ExtractHeader* h) {
         h->mutable_params()->set_wmin(4000);
         h->mutable_params()->set_wmax(4100);
       },
       good, -1, false, false, C::INVALID_ARGUMENT},
      {"only wmin given",
       [](v1::ExtractHeader* h) {
         h->mutable_params()->clear_wmax();
         h->mutable_params()->clear_dw();
       },
       good, -1, false, false, C::INVALID_ARGUMENT},
      {"oversize upload", nullptr, "", kUploadLimit + 1, false, false, C::RESOURCE_EXHAUSTED},
      {"truncated upload", nullptr, good.substr(0, good.size() / 2),
       static_cast<int64_t>(good.size()), false, false, C::INVALID_ARGUMENT},
      {"upload longer than announced", nullptr, good, static_cast<int64_t>(good.size()) - 10,
       false, false, C::INVALID_ARGUMENT},
      {"garbage bytes as FITS", nullptr, std::string(100000, 'x'), -1, false, false,
       C::INVALID_ARGUMENT},
      {"empty upload", nullptr, "", 0, false, false, C::INVALID_ARGUMENT},
      {"empty image", nullptr, *empty_image, -1, false, false, C::INVALID_ARGUMENT},
      {"nspec 0", [](v1::ExtractHeader* h) { h->mutable_params()->set_nspec(0); }, good, -1, false,
       false, C::INVALID_ARGUMENT},
      {"negative specmin", [](v1::ExtractHeader* h) { h->mutable_params()->set_specmin(-25); }, good,
       -1, false, false, C::INVALID_ARGUMENT},
      {"negative nwavestep", [](v1::ExtractHeader* h) { h->mutable_params()->set_nwavestep(-50); },
       good, -1, false, false, C::INVALID_ARGUMENT},
      {"negative psferr", [](v1::ExtractHeader* h) { h->mutable_params()->set_psferr(-0.01); }, good,
       -1, false, false, C::INVALID_ARGUMENT},
      {"negative regularize", [](v1::ExtractHeader* h) { h->mutable_params()->set_regularize(-1); },
       good, -1, false, false, C::INVALID_ARGUMENT},
      {"negative dw", [](v1::ExtractHeader* h) { h->mutable_params()->set_dw(-0.8); }, good, -1,
       false, false, C::INVALID_ARGUMENT},
      {"fibres beyond the PSF", [](v1::ExtractHeader* h) { h->mutable_params()->set_specmin(500); },
       good, -1, false, false, C::INVALID_ARGUMENT},
      {"bundle outside the plan", [](v1::ExtractHeader* h) { h->add_bundles(7); }, good, -1, true,
       false, C::INVALID_ARGUMENT},
      {"ExtractBundles without a subset", nullptr, good, -1, true, false, C::INVALID_ARGUMENT},
      {"ExtractFrame with a subset", [](v1::ExtractHeader* h) { h->add_bundles(0); }, good, -1,
       false, false, C::INVALID_ARGUMENT},
      {"chunk before the header", nullptr, "abc", -1, false, true, C::INVALID_ARGUMENT},
      {"message over 4 MiB", nullptr, "", -1, false, false, C::RESOURCE_EXHAUSTED},
  };
  for (const RawRequest& r : table) {
    SCOPED_TRACE(r.name);
    grpc::Status s;
    if (r.name == "message over 4 MiB") {
      // One 5 MiB chunk: gRPC's own receive limit answers.
      RawRequest big = r;
      big.announced = 6 << 20;
      auto stub = v1::Extraction::NewStub(channel_);
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      auto stream = stub->ExtractFrame(&ctx);
      v1::ExtractRequest req;
      v1::ExtractHeader h = SmallHeader(psf_id_);
      h.set_upload_size(6 << 20);
      *req.mutable_header() = h;
      stream->Write(req);
      v1::ExtractRequest chunk;
      chunk.mutable_chunk()->set_data(std::string(5 << 20, 'z'));
      stream->Write(chunk);
      stream->WritesDone();
      s = stream->Finish();
    } else {
      s = RunRaw(channel_, psf_id_, r);
    }
    EXPECT_EQ(s.error_code(), r.expected) << s.error_message();
    EXPECT_FALSE(s.error_message().empty());
    // Still serving after each one.
    auto health = client_->CheckHealth();
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, "SERVING");
  }
  // And still extracting correctly.
  auto frame = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &good);
  EXPECT_TRUE(frame.ok()) << frame.status();
  std::remove(link.c_str());
}

TEST_F(BadRequestTest, LoadPsfErrors) {
  EXPECT_EQ(client_->LoadPsfFromBytes(std::string(5000, 'g'), "garbage").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client_->LoadPsfFromServerPath("/etc/hostname").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(client_->LoadPsfFromServerPath(Inputs().frame_path).status().code(),
            absl::StatusCode::kInvalidArgument);  // a preproc is not a PSF
  EXPECT_EQ(client_->UnloadPsf("0123").status().code(), absl::StatusCode::kNotFound);
  // Loading by path gives the same content id as the upload.
  auto by_path = client_->LoadPsfFromServerPath(Inputs().psf_copy);
  ASSERT_TRUE(by_path.ok()) << by_path.status();
  EXPECT_EQ(by_path->id(), psf_id_);
  EXPECT_TRUE(by_path->already_loaded());
}

TEST(AuthTest, BearerTokenIsRequiredWhenConfigured) {
  server::ServerOptions o = TestServerOptions();
  o.security.auth_token = "s3cret-token";
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  client::ClientOptions none;
  none.max_attempts = 1;
  auto anonymous = Connect(*server, none);
  EXPECT_EQ(anonymous->GetServerInfo().status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(anonymous->LoadPsfFromBytes(Inputs().psf_bytes, "p").status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(RemoteExtractFrame(*anonymous, SmallHeader("x"), &Inputs().frame_bytes).status().code(),
            absl::StatusCode::kUnauthenticated);
  client::ClientOptions wrong = none;
  wrong.bearer_token = "s3cret-tokem";
  EXPECT_EQ(Connect(*server, wrong)->ListPsfs().status().code(), absl::StatusCode::kUnauthenticated);
  client::ClientOptions right = none;
  right.bearer_token = "s3cret-token";
  auto authed = Connect(*server, right);
  auto psf = authed->LoadPsfFromBytes(Inputs().psf_bytes, "p");
  ASSERT_TRUE(psf.ok()) << psf.status();
  EXPECT_TRUE(RemoteExtractFrame(*authed, SmallHeader(psf->id()), &Inputs().frame_bytes).ok());
  // Health stays open to probes without a token.
  EXPECT_EQ(*anonymous->CheckHealth(), "SERVING");
}

TEST(PsfCacheServiceTest, TwoPsfsCachedAndTheLeastRecentlyUsedEvicted) {
  // Three byte-different copies of the PSF; the budget holds two of them.
  std::vector<std::string> variants;
  for (long k = 0; k < 3; ++k) {
    auto v = WithExtraKeyword(Inputs().psf_bytes, "VARIANT", k);
    ASSERT_TRUE(v.ok()) << v.status();
    variants.push_back(*v);
  }
  auto probe = core::Psf::LoadFromMemory(variants[0].data(), variants[0].size(), "probe");
  ASSERT_TRUE(probe.ok());
  server::ServerOptions o = TestServerOptions();
  o.storage.psf_cache_bytes = static_cast<int64_t>(probe->MemoryBytes() * 5 / 2);
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  auto c = Connect(*server);
  std::vector<std::string> ids;
  for (int k = 0; k < 2; ++k) {
    auto info = c->LoadPsfFromBytes(variants[k], absl::StrCat("variant", k));
    ASSERT_TRUE(info.ok()) << info.status();
    ids.push_back(info->id());
  }
  EXPECT_NE(ids[0], ids[1]);
  ASSERT_EQ(c->ListPsfs()->psfs_size(), 2);
  auto third = c->LoadPsfFromBytes(variants[2], "variant2");
  ASSERT_TRUE(third.ok()) << third.status();
  auto list = c->ListPsfs();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->psfs_size(), 2);
  EXPECT_EQ(list->psfs(0).id(), third->id());  // most recent first
  EXPECT_EQ(list->psfs(1).id(), ids[1]);
  EXPECT_LE(list->cache_bytes(), list->cache_budget_bytes());
  // The evicted PSF is gone: extraction says NOT_FOUND; loading it again works.
  EXPECT_EQ(RemoteExtractFrame(*c, SmallHeader(ids[0]), &Inputs().frame_bytes).status().code(),
            absl::StatusCode::kNotFound);
  const std::string metrics = server->metrics().Serialize();
  EXPECT_NE(metrics.find("spexd_psf_cache_evictions_total{kind=\"psf\"} 1"), std::string::npos)
      << metrics;
  // Unload really drops it from the cache.
  auto freed = c->UnloadPsf(third->id());
  ASSERT_TRUE(freed.ok());
  EXPECT_GT(freed->freed_bytes(), 0);
  EXPECT_EQ(c->ListPsfs()->psfs_size(), 1);
}

}  // namespace
}  // namespace spexd::testing
