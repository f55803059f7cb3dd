// The header checks of server/rpc/request_decode and the
// bounded status messages of server/status_util.
#include "server/rpc/request_decode.h"

#include <climits>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/base/error_text.h"
#include "gtest/gtest.h"
#include "server/jobs/proto_convert.h"
#include "server/platform/status_util.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

v1::ExtractHeader SmallHeader() {
  v1::ExtractHeader h;
  h.set_psf_id(std::string(64, 'a'));
  h.set_server_path("/data/frame.fits");
  h.mutable_params()->set_wmin(5760);
  h.mutable_params()->set_wmax(5800);
  h.mutable_params()->set_dw(0.8);
  h.mutable_params()->set_nspec(50);
  return h;
}

TEST(RequestDecodeTest, HeaderFieldsHaveBounds) {
  EXPECT_TRUE(CheckHeaderFields(SmallHeader()).ok());
  v1::ExtractHeader h = SmallHeader();
  h.set_priority(static_cast<v1::Priority>(99));
  EXPECT_EQ(CheckHeaderFields(h).code(), absl::StatusCode::kInvalidArgument);
  h = SmallHeader();
  h.set_psf_id(std::string(1 << 20, 'x'));
  absl::Status s = CheckHeaderFields(h);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(s.message().size(), 400u) << s.message().substr(0, 400);
  h = SmallHeader();
  h.set_server_path("/data/" + std::string(300, 'n'));  // NAME_MAX is 255
  EXPECT_EQ(CheckHeaderFields(h).code(), absl::StatusCode::kInvalidArgument);
  h = SmallHeader();
  h.set_server_path("/data/" + std::string(255, 'n'));
  EXPECT_TRUE(CheckHeaderFields(h).ok());
  h.set_server_output_path("/" + std::string(5000, 'o'));
  EXPECT_EQ(CheckHeaderFields(h).code(), absl::StatusCode::kInvalidArgument);
}

// The header decoded once (DecodeRequest), then planned against the PSF
// (CheckRequest): what each stage refuses, and the selection the job gets.
absl::StatusOr<core::ExtractionPlan> DecodeAndPlan(const v1::ExtractHeader& h,
                                                   const core::Psf& psf,
                                                   const ServiceLimits& limits,
                                                   std::vector<int>* bundles) {
  const bool subset = h.bundles_size() > 0 || h.fibers_size() > 0;
  absl::StatusOr<DecodedRequest> decoded = DecodeRequest(h, subset, limits);
  if (!decoded.ok()) return decoded.status();
  *bundles = decoded->request.bundles;
  return CheckRequest(decoded->params, psf, limits);
}

TEST(RequestDecodeTest, ParametersAndSelectionsCheckedAgainstThePsf) {
  std::shared_ptr<const core::Psf> psf = testing::LoadBundledPsf();
  ASSERT_NE(psf, nullptr);
  ServiceLimits limits;
  std::vector<int> bundles;
  auto ok = DecodeAndPlan(SmallHeader(), *psf, limits, &bundles);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->params().nspec, 50);
  EXPECT_TRUE(bundles.empty());

  v1::ExtractHeader h = SmallHeader();
  h.mutable_params()->set_specmin(2147483625);
  h.mutable_params()->set_nspec(25);
  EXPECT_EQ(DecodeAndPlan(h, *psf, limits, &bundles).status().code(),
            absl::StatusCode::kInvalidArgument);
  h = SmallHeader();
  h.add_fibers(INT_MAX);
  EXPECT_EQ(DecodeAndPlan(h, *psf, limits, &bundles).status().code(),
            absl::StatusCode::kInvalidArgument);
  h = SmallHeader();
  h.add_fibers(49);
  h.add_fibers(3);
  ASSERT_TRUE(DecodeAndPlan(h, *psf, limits, &bundles).ok());
  EXPECT_EQ(bundles, (std::vector<int>{0, 1}));
  // The decoded parameters carry the header's model request (ExtractHeader.want_model).
  h.set_want_model(true);
  absl::StatusOr<DecodedRequest> decoded = DecodeRequest(h, /*subset=*/true, limits);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->params.want_model);
  EXPECT_EQ(decoded->params.nspec, 50);
  // The same valid request over a small budget: RESOURCE_EXHAUSTED naming the flag.
  limits.max_request_bytes = 1 << 20;
  auto over = DecodeAndPlan(SmallHeader(), *psf, limits, &bundles);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("--max_request_bytes"), std::string::npos);
}

// The header's fields become the typed values the job reads: the image source, one
// output target (paths, compression, checksum, overwrite, model) and the reply options.
TEST(RequestDecodeTest, TheHeaderBecomesTypedValues) {
  ServiceLimits limits;
  v1::ExtractHeader h = SmallHeader();
  h.set_priority(v1::REALTIME);
  h.set_client_tag("night-1");
  h.set_in_img_name("preproc-r0.fits");
  h.set_in_psf_name("psf-r0.fits");
  h.set_server_output_path("/out/frame-r0.fits.gz");
  h.set_server_model_path("/out/model-r0.fits");
  h.set_output_checksum(v1::FILE_CHECKSUM_CRC32);
  h.set_overwrite(true);
  h.set_results_to_file_only(true);
  h.set_want_model(true);
  absl::StatusOr<DecodedRequest> decoded = DecodeRequest(h, /*subset=*/false, limits);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  const JobRequest& r = decoded->request;
  EXPECT_EQ(r.psf_id, h.psf_id());
  EXPECT_TRUE(r.realtime);
  EXPECT_EQ(r.client_tag, "night-1");
  EXPECT_EQ(r.in_psf_name, "psf-r0.fits");
  EXPECT_EQ(r.image.kind, ImageSource::Kind::kServerPath);
  EXPECT_EQ(r.image.server_path, "/data/frame.fits");
  EXPECT_EQ(r.image.name, "preproc-r0.fits");
  EXPECT_EQ(r.output.frame.path, "/out/frame-r0.fits.gz");
  EXPECT_TRUE(r.output.frame.gzip);
  EXPECT_EQ(r.output.model.path, "/out/model-r0.fits");
  EXPECT_FALSE(r.output.model.gzip);
  EXPECT_EQ(r.output.checksum, FileDigestKind::kCrc32);
  EXPECT_TRUE(r.output.overwrite);
  EXPECT_TRUE(r.reply.file_only);
  EXPECT_FALSE(r.reply.stream_model);  // the model goes to its file only
  EXPECT_TRUE(decoded->params.want_model);

  v1::ExtractHeader upload = SmallHeader();
  upload.set_upload_size(1000);
  upload.set_array_precision(v1::ARRAY_FLOAT32);
  upload.set_want_model(true);
  decoded = DecodeRequest(upload, /*subset=*/false, limits);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->request.image.kind, ImageSource::Kind::kUpload);
  EXPECT_FALSE(decoded->request.realtime);
  EXPECT_FALSE(decoded->request.output.any());
  EXPECT_EQ(decoded->request.output.checksum, FileDigestKind::kSha256);
  EXPECT_TRUE(decoded->request.reply.float32_arrays);
  EXPECT_TRUE(decoded->request.reply.stream_model);
}

// A grid too long for one message is refused once, by one check with one message, both
// for the request's plan and for a plan made again on a corrected grid.
TEST(RequestDecodeTest, AGridTooLongForOneMessageHasOneMessage) {
  ServiceLimits limits;
  limits.max_message_bytes = 1 << 20;
  const std::size_t per_bin = BundleBytesPerFiber(1, 4);
  const int longest = static_cast<int>(MaxPayloadBytes(limits) / per_bin);
  EXPECT_TRUE(CheckGridFitsMessage(longest, 4, limits).ok());
  absl::Status over = CheckGridFitsMessage(longest + 1, 4, limits);
  EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(over.message().find(absl::StrCat("at most ", longest, " bins")), std::string::npos)
      << over.message();
  EXPECT_NE(over.message().find("--max_message_bytes"), std::string::npos);
}

TEST(RequestDecodeTest, EchoedValuesAndStatusMessagesAreBounded) {
  const std::string big(1 << 20, 'q');
  const std::string echo = core::EchoValue(big);
  EXPECT_LT(echo.size(), 200u);
  EXPECT_NE(echo.find("(1048576 bytes)"), std::string::npos);
  EXPECT_EQ(core::EchoValue("short"), "short");
  EXPECT_EQ(core::EchoValue(std::string("a\nb", 3)), "a\\nb");
  grpc::Status g = ToGrpcStatus(absl::InvalidArgumentError(big));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(g.error_message().size(), kMaxStatusMessageBytes + 32);
  // A cut never leaves half a UTF-8 sequence.
  std::string utf8;
  while (utf8.size() < 3 * kMaxStatusMessageBytes) utf8 += "\xc3\xa9";  // é
  const std::string cut = ToGrpcStatus(absl::NotFoundError(utf8)).error_message();
  const std::size_t dots = cut.find("...(");
  ASSERT_NE(dots, std::string::npos);
  EXPECT_EQ(dots % 2, 0u);
}

}  // namespace
}  // namespace spexd::server
