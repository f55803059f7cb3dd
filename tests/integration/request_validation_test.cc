// Hostile and careless requests through the service: each
// refused with its status before any work (no FrameHeader), the message bounded, and the
// server still serving and extracting correctly afterwards.
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "spexd/v1/spexd.grpc.pb.h"
#include "tests/integration/service_fixture.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// What came back from one raw call.
struct Outcome {
  grpc::Status status;
  int headers = 0;  // FrameHeader messages received
  int bundles = 0;
  int summaries = 0;
  int64_t usable_bins = -1;  // from the summary
  double seconds = 0;
};

// Sends `messages` (the first usually a header) on a raw stream, half-closes and reads
// everything back.
Outcome Call(const std::shared_ptr<grpc::Channel>& channel,
             const std::vector<v1::ExtractRequest>& messages, bool subset) {
  const auto t0 = std::chrono::steady_clock::now();
  auto stub = v1::Extraction::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = subset ? stub->ExtractBundles(&ctx) : stub->ExtractFrame(&ctx);
  for (const v1::ExtractRequest& m : messages) {
    if (!stream->Write(m)) break;
  }
  stream->WritesDone();
  Outcome out;
  v1::ExtractResponse resp;
  while (stream->Read(&resp)) {
    out.headers += resp.has_header();
    out.bundles += resp.has_bundle();
    out.summaries += resp.has_summary();
    if (resp.has_summary()) out.usable_bins = resp.summary().usable_bins();
  }
  out.status = stream->Finish();
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

v1::ExtractRequest HeaderMessage(const v1::ExtractHeader& h) {
  v1::ExtractRequest m;
  *m.mutable_header() = h;
  return m;
}

// Header and upload chunks (1 MiB) for `bytes`.
std::vector<v1::ExtractRequest> Upload(v1::ExtractHeader h, const std::string& bytes) {
  h.set_upload_size(static_cast<int64_t>(bytes.size()));
  std::vector<v1::ExtractRequest> out = {HeaderMessage(h)};
  for (std::size_t off = 0; off < bytes.size(); off += 1 << 20) {
    v1::ExtractRequest c;
    c.mutable_chunk()->set_data(bytes.substr(off, 1 << 20));
    out.push_back(std::move(c));
  }
  return out;
}

class RequestValidationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions o = TestServerOptions();
    o.limits.max_request_bytes = int64_t{1} << 30;
    server_ = StartServer(o);
    ASSERT_NE(server_, nullptr);
    client_ = Connect(*server_);
    auto psf = client_->LoadPsfFromBytes(Inputs().psf_bytes, "psf.fits");
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_id_ = psf->id();
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  void ExpectStillServing() {
    auto health = client_->CheckHealth();
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, "SERVING");
  }

  // The small extraction by server path with `edit` applied.
  Outcome ByPath(const std::function<void(v1::ExtractHeader*)>& edit, bool subset = false) {
    v1::ExtractHeader h = SmallHeader(psf_id_);
    h.set_server_path(Inputs().frame_path);
    if (edit) edit(&h);
    return Call(channel_, {HeaderMessage(h)}, subset);
  }

  std::unique_ptr<server::SpexdServer> server_;
  std::unique_ptr<client::SpexdClient> client_;
  std::shared_ptr<grpc::Channel> channel_;
  std::string psf_id_;
};

struct ValidationCase {
  const char* name;
  std::function<void(v1::ExtractHeader*)> edit;
  grpc::StatusCode expected;
  bool subset = false;
};

// Integers that overflowed (a SIGSEGV), sizes that allocated gigabytes,
// unknown enum values, all refused at the header.
TEST_F(RequestValidationTest, OutOfRangeParametersAreRefusedBeforeAnyWork) {
  using C = grpc::StatusCode;
  auto params = [](v1::ExtractHeader* h) { return h->mutable_params(); };
  const std::vector<ValidationCase> cases = {
      {"specmin + nspec overflows int",
       [&](v1::ExtractHeader* h) { params(h)->set_specmin(2147483625); params(h)->set_nspec(25); },
       C::INVALID_ARGUMENT},
      {"specmin INT_MAX, bundles of 1",
       [&](v1::ExtractHeader* h) {
         params(h)->set_specmin(INT_MAX);
         params(h)->set_nspec(1);
         params(h)->set_bundlesize(1);
         params(h)->set_nsubbundles(1);
       },
       C::INVALID_ARGUMENT},
      {"nspec INT_MAX", [&](v1::ExtractHeader* h) { params(h)->set_nspec(INT_MAX); }, C::INVALID_ARGUMENT},
      {"bundlesize INT_MIN", [&](v1::ExtractHeader* h) { params(h)->set_bundlesize(INT_MIN); },
       C::INVALID_ARGUMENT},
      {"nsubbundles INT_MAX", [&](v1::ExtractHeader* h) { params(h)->set_nsubbundles(INT_MAX); },
       C::INVALID_ARGUMENT},
      {"nwavestep 1e8", [&](v1::ExtractHeader* h) { params(h)->set_nwavestep(100000000); },
       C::INVALID_ARGUMENT},
      {"nwavestep 2000", [&](v1::ExtractHeader* h) { params(h)->set_nwavestep(2000); },
       C::INVALID_ARGUMENT},
      {"wavepad INT_MAX", [&](v1::ExtractHeader* h) { params(h)->set_wavepad(INT_MAX); },
       C::INVALID_ARGUMENT},
      {"wavepad_frac 1e300", [&](v1::ExtractHeader* h) { params(h)->set_wavepad_frac(1e300); },
       C::INVALID_ARGUMENT},
      {"dw 1e-300", [&](v1::ExtractHeader* h) { params(h)->set_dw(1e-300); }, C::INVALID_ARGUMENT},
      {"unknown priority", [](v1::ExtractHeader* h) { h->set_priority(static_cast<v1::Priority>(99)); },
       C::INVALID_ARGUMENT},
      {"unknown mask_policy",
       [&](v1::ExtractHeader* h) { params(h)->set_mask_policy(static_cast<v1::MaskPolicy>(7)); },
       C::INVALID_ARGUMENT},
      {"bundle INT_MAX", [](v1::ExtractHeader* h) { h->add_bundles(INT_MAX); }, C::INVALID_ARGUMENT,
       true},
      {"fibre INT_MIN", [](v1::ExtractHeader* h) { h->add_fibers(INT_MIN); }, C::INVALID_ARGUMENT,
       true},
      {"fibre INT_MAX", [](v1::ExtractHeader* h) { h->add_fibers(INT_MAX); }, C::INVALID_ARGUMENT,
       true},
      // Valid ranges, but a dense 26200 x 26200 normal matrix per patch: over the budget.
      {"memory over --max_request_bytes",
       [&](v1::ExtractHeader* h) {
         params(h)->set_bundlesize(50);
         params(h)->set_nsubbundles(1);
         params(h)->set_nwavestep(500);
       },
       C::RESOURCE_EXHAUSTED},
  };
  for (const ValidationCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Outcome out = ByPath(c.edit, c.subset);
    EXPECT_EQ(out.status.error_code(), c.expected) << out.status.error_message();
    EXPECT_EQ(out.headers, 0);  // refused before any work
    EXPECT_LT(out.seconds, 5.0);
    ExpectStillServing();
  }
  EXPECT_TRUE(RemoteExtractFrame(*client_, SmallHeader(psf_id_), &Inputs().frame_bytes).ok());
}

// The same bad value gets the same answer whether or not the geometry is
// cached, and before the FrameHeader is sent.
TEST_F(RequestValidationTest, ValidationDoesNotDependOnTheCache) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<ValidationCase> cases = {
      {"regularize Inf", [inf](v1::ExtractHeader* h) { h->mutable_params()->set_regularize(inf); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"psferr Inf", [inf](v1::ExtractHeader* h) { h->mutable_params()->set_psferr(inf); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"regularize -1", [](v1::ExtractHeader* h) { h->mutable_params()->set_regularize(-1); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"psferr NaN", [nan](v1::ExtractHeader* h) { h->mutable_params()->set_psferr(nan); },
       grpc::StatusCode::INVALID_ARGUMENT},
  };
  for (int round = 0; round < 2; ++round) {  // fresh server, then geometry cached
    SCOPED_TRACE(round == 0 ? "fresh" : "cached");
    for (const ValidationCase& c : cases) {
      SCOPED_TRACE(c.name);
      const Outcome out = ByPath(c.edit);
      EXPECT_EQ(out.status.error_code(), c.expected) << out.status.error_message();
      EXPECT_EQ(out.headers, 0);
    }
    const Outcome good = ByPath(nullptr);
    ASSERT_TRUE(good.status.ok()) << good.status.error_message();
    EXPECT_EQ(good.summaries, 1);
  }
}

// Echoed input is bounded, and over-long names are the request's fault.
TEST_F(RequestValidationTest, LongInputGetsInvalidArgumentWithABoundedMessage) {
  const std::vector<ValidationCase> cases = {
      {"1 MB psf_id", [](v1::ExtractHeader* h) { h->set_psf_id(std::string(1 << 20, 'f')); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"10k-character path",
       [](v1::ExtractHeader* h) { h->set_server_path(Inputs().data_dir + "/" + std::string(10000, 'p')); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"300-character file name",
       [](v1::ExtractHeader* h) { h->set_server_path(Inputs().data_dir + "/" + std::string(300, 'n')); },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"300-character output name",
       [](v1::ExtractHeader* h) {
         h->set_server_output_path(Inputs().data_dir + "/" + std::string(300, 'o'));
       },
       grpc::StatusCode::INVALID_ARGUMENT},
      {"1 MB client tag", [](v1::ExtractHeader* h) { h->set_client_tag(std::string(1 << 20, 't')); },
       grpc::StatusCode::INVALID_ARGUMENT},
  };
  for (const ValidationCase& c : cases) {
    SCOPED_TRACE(c.name);
    const Outcome out = ByPath(c.edit);
    EXPECT_EQ(out.status.error_code(), c.expected) << out.status.error_message().substr(0, 300);
    EXPECT_LT(out.status.error_message().size(), 1000u);
    ExpectStillServing();
  }
  // LoadPsf: the same rules for its path and upload name.
  EXPECT_EQ(client_->LoadPsfFromServerPath(Inputs().data_dir + "/" + std::string(300, 'q'))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  auto long_name = client_->LoadPsfFromBytes(Inputs().psf_bytes, std::string(100000, 'u'));
  EXPECT_EQ(long_name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(long_name.status().message().size(), 1000u);
  auto unload = client_->UnloadPsf(std::string(1 << 20, 'z'));
  EXPECT_EQ(unload.status().code(), absl::StatusCode::kNotFound);
  EXPECT_LT(unload.status().message().size(), 1000u);
}

// What follows a complete request is refused, not ignored.
TEST_F(RequestValidationTest, MessagesAfterTheCompleteRequestAreRefused) {
  const std::string& frame = Inputs().frame_bytes;
  v1::ExtractHeader by_path = SmallHeader(psf_id_);
  by_path.set_server_path(Inputs().frame_path);
  Outcome second_header =
      Call(channel_, {HeaderMessage(by_path), HeaderMessage(by_path)}, /*subset=*/false);
  EXPECT_EQ(second_header.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << second_header.status.error_message();
  EXPECT_EQ(second_header.summaries, 0);

  std::vector<v1::ExtractRequest> upload = Upload(SmallHeader(psf_id_), frame);
  v1::ExtractRequest extra;
  extra.mutable_chunk()->set_data("trailing bytes");
  upload.push_back(extra);
  Outcome trailing = Call(channel_, upload, false);
  EXPECT_EQ(trailing.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << trailing.status.error_message();
  EXPECT_EQ(trailing.summaries, 0);

  std::vector<v1::ExtractRequest> header_after = Upload(SmallHeader(psf_id_), frame);
  header_after.push_back(HeaderMessage(SmallHeader(psf_id_)));
  Outcome late_header = Call(channel_, header_after, false);
  EXPECT_EQ(late_header.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << late_header.status.error_message();
  ExpectStillServing();
  // The same uploads without the extra message still work.
  Outcome ok = Call(channel_, Upload(SmallHeader(psf_id_), frame), false);
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.summaries, 1);
}

// An image without a valid pixel is refused; a request whose bins are all
// masked fails; dead fibres in a live frame stay OK.
TEST_F(RequestValidationTest, ImagesWithoutValidPixelsDoNotLookLikeSuccess) {
  auto psf = core::Psf::Load(Inputs().psf_path);
  ASSERT_TRUE(psf.ok());
  SyntheticFrameOptions nan_opts;
  nan_opts.all_nan = true;
  auto all_nan = MakeSyntheticPreproc(*psf, nan_opts);
  ASSERT_TRUE(all_nan.ok());
  SyntheticFrameOptions masked_opts;
  masked_opts.dead_columns = 1 << 20;
  auto all_masked = MakeSyntheticPreproc(*psf, masked_opts);
  ASSERT_TRUE(all_masked.ok());
  for (const std::string* bytes : {&*all_nan, &*all_masked}) {
    const Outcome out = Call(channel_, Upload(SmallHeader(psf_id_), *bytes), false);
    EXPECT_EQ(out.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << out.status.error_message();
    EXPECT_NE(out.status.error_message().find("no valid pixel"), std::string::npos);
    EXPECT_EQ(out.headers, 0);
  }

  // Bundle 0 (fibres 0-24) dead: every pixel its patch windows read is masked.
  double x24 = 0;
  for (double w = 5700; w <= 5900; w += 1) x24 = std::max(x24, psf->X(24, w));
  SyntheticFrameOptions dead_opts;
  dead_opts.dead_columns = static_cast<int>(x24) + 2 * psf->hsizex() + 3;
  double x25 = 1e9;
  for (double w = 5700; w <= 5900; w += 1) x25 = std::min(x25, psf->X(25, w));
  ASSERT_LT(dead_opts.dead_columns, x25 + psf->hsizex()) << "bundle 1 must keep live pixels";
  auto dead_bundle = MakeSyntheticPreproc(*psf, dead_opts);
  ASSERT_TRUE(dead_bundle.ok());
  v1::ExtractHeader only_dead = SmallHeader(psf_id_);
  only_dead.add_bundles(0);
  const Outcome dead = Call(channel_, Upload(only_dead, *dead_bundle), /*subset=*/true);
  EXPECT_EQ(dead.status.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << dead.status.error_message();
  EXPECT_EQ(dead.summaries, 0);
  // The whole frame with its dead bundle is a normal frame: OK, usable bins counted.
  const Outcome frame = Call(channel_, Upload(SmallHeader(psf_id_), *dead_bundle), false);
  EXPECT_TRUE(frame.status.ok()) << frame.status.error_message();
  EXPECT_EQ(frame.summaries, 1);
  EXPECT_GT(frame.usable_bins, 0);
  EXPECT_LT(frame.usable_bins, 50 * 51);  // bundle 0's 25 x 51 bins are not usable
  ExpectStillServing();
}

}  // namespace
}  // namespace spexd::testing
