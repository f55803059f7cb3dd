// The header checks of server/request_validation and the
// bounded status messages of server/status_util.
#include "server/jobs/request_validation.h"

#include <climits>
#include <string>

#include "core/base/error_text.h"
#include "gtest/gtest.h"
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

TEST(RequestValidationTest, HeaderFieldsHaveBounds) {
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

// The header decoded once (CheckRequestAlone), then planned against the PSF
// (CheckRequest): what each stage refuses, and the selection the job gets.
absl::StatusOr<core::ExtractionPlan> DecodeAndPlan(const v1::ExtractHeader& h,
                                                   const core::Psf& psf,
                                                   const ServiceLimits& limits,
                                                   std::vector<int>* bundles) {
  const bool subset = h.bundles_size() > 0 || h.fibers_size() > 0;
  absl::StatusOr<DecodedRequest> decoded = CheckRequestAlone(h, subset, limits);
  if (!decoded.ok()) return decoded.status();
  *bundles = decoded->bundles;
  return CheckRequest(decoded->params, psf, limits);
}

TEST(RequestValidationTest, ParametersAndSelectionsCheckedAgainstThePsf) {
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
  absl::StatusOr<DecodedRequest> decoded = CheckRequestAlone(h, /*subset=*/true, limits);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->params.want_model);
  EXPECT_EQ(decoded->params.nspec, 50);
  // The same valid request over a small budget: RESOURCE_EXHAUSTED naming the flag.
  limits.max_request_bytes = 1 << 20;
  auto over = DecodeAndPlan(SmallHeader(), *psf, limits, &bundles);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.status().message().find("--max_request_bytes"), std::string::npos);
}

TEST(RequestValidationTest, EchoedValuesAndStatusMessagesAreBounded) {
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
