// The longest wavelength grid a server sends: one fibre's row of a bundle must fit one
// message (--max_message_bytes), so the limit is floor((max_message_bytes - 64 KiB) /
// (8 (2 HSIZEY + 5) + 1)) bins (docs/service.md, "Parameters"), below the 100,000 the
// parameters allow on their own. A grid at that limit is served; one bin more is refused
// with INVALID_ARGUMENT when the header arrives, naming the limit, not after the frame was
// decoded.
#include <string>

#include "absl/strings/str_cat.h"
#include "core/io/psf.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// The limit by the documented formula.
int LongestGrid(int64_t max_message_bytes, int hsizey) {
  return static_cast<int>((max_message_bytes - 65536) / (8 * (2 * hsizey + 5) + 1));
}

TEST(WaveBinsLimitTest, TheLongestGridIsServedAndOneBinMoreRefusedUpFront) {
  auto psf = core::Psf::Load(Inputs().psf_path);
  ASSERT_TRUE(psf.ok()) << psf.status();
  // At the default 4 MiB, with this PSF.
  const int at_default = LongestGrid(int64_t{4} << 20, psf->hsizey());
  std::printf("HSIZEY %d: at most %d bins at 4 MiB\n", psf->hsizey(), at_default);
  EXPECT_GT(at_default, 2881);  // DESI's longest camera grid (z, dw 0.8) with room to spare

  // A 1 MiB message limit keeps the served grid short enough for a quick test.
  server::ServerOptions o = TestServerOptions();
  o.limits.max_message_bytes = 1 << 20;
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  client::ClientOptions once;
  once.max_attempts = 1;
  auto c = Connect(*server, once);
  auto loaded = c->LoadPsfFromServerPath(Inputs().psf_path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const int longest = LongestGrid(o.limits.max_message_bytes, psf->hsizey());
  // `bins` bins of 0.015 A from 5745 A (numpy arange's count, spec §2.3), one bundle of
  // five fibres: inside the test frame's traces.
  auto header = [&](int bins) {
    v1::ExtractHeader h = SmallHeader(loaded->id());
    const double dw = 0.015, wmin = 5745.0;
    h.mutable_params()->set_wmin(wmin);
    h.mutable_params()->set_wmax(wmin + (bins - 1) * dw);
    h.mutable_params()->set_dw(dw);
    h.mutable_params()->set_nspec(5);
    h.mutable_params()->set_bundlesize(5);
    h.mutable_params()->set_nsubbundles(1);
    h.set_server_path(Inputs().frame_path);
    return h;
  };
  auto refused = RemoteExtractFrame(*c, header(longest + 1), nullptr);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find(absl::StrCat("at most ", longest, " bins")),
            absl::string_view::npos)
      << refused.status();
  auto served = RemoteExtractFrame(*c, header(longest), nullptr);
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->nwave, longest);
  EXPECT_EQ(served->nspec, 5);
}

}  // namespace
}  // namespace spexd::testing
