// Through the service: each tile-compressed input that crashed spexd
// inside CFITSIO 4.2.0 (or was accepted when it should not be) is refused with
// INVALID_ARGUMENT, uploaded or by server path, to ExtractFrame and LoadPsf; the server
// then still serves a good frame, and a frame compressed as desispec writes it.
#include <fitsio.h>

#include <string>

#include "gtest/gtest.h"
#include "tests/compressed_fits.h"
#include "tests/integration/service_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

class CompressedUploadTest : public LoadedServerTest {};

TEST_F(CompressedUploadTest, CrashInputsAreRefusedAndTheServerKeepsServing) {
  auto inputs = CrashInputs(Inputs().frame_bytes, Inputs().psf_bytes);
  ASSERT_TRUE(inputs.ok()) << inputs.status();
  ASSERT_EQ(inputs->size(), 9u);
  for (const CrashInput& c : *inputs) {
    SCOPED_TRACE(c.name);
    // By server path too: the same reader behind it.
    const std::string path = Inputs().data_dir + "/crash-" + c.name;
    ASSERT_TRUE(WriteBytes(path, c.bytes));
    if (c.psf) {
      auto up = client_->LoadPsfFromBytes(c.bytes, c.name);
      EXPECT_EQ(up.status().code(), absl::StatusCode::kInvalidArgument) << up.status();
      auto by_path = client_->LoadPsfFromServerPath(path);
      EXPECT_EQ(by_path.status().code(), absl::StatusCode::kInvalidArgument) << by_path.status();
    } else {
      auto up = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &c.bytes);
      EXPECT_EQ(up.status().code(), absl::StatusCode::kInvalidArgument) << up.status();
      v1::ExtractHeader h = SmallHeader(psf_id_);
      h.set_server_path(path);
      auto by_path = RemoteExtractFrame(*client_, h, nullptr);
      EXPECT_EQ(by_path.status().code(), absl::StatusCode::kInvalidArgument) << by_path.status();
    }
    std::remove(path.c_str());
    auto health = client_->CheckHealth();
    ASSERT_TRUE(health.ok()) << health.status();
    EXPECT_EQ(*health, "SERVING");
  }
  // Still extracting, bit for bit the local extraction.
  auto good = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &Inputs().frame_bytes);
  ASSERT_TRUE(good.ok()) << good.status();
  ExpectFramesIdentical(*good, *local_);
  // A MASK RICE-compressed as desispec writes it (astropy's CompImageHDU) extracts the same.
  auto rice = RecompressHdus(Inputs().frame_bytes, {{"MASK", {RICE_1, false, {}}}});
  ASSERT_TRUE(rice.ok()) << rice.status();
  auto rice_frame = RemoteExtractFrame(*client_, SmallHeader(psf_id_), &*rice);
  ASSERT_TRUE(rice_frame.ok()) << rice_frame.status();
  ExpectFramesIdentical(*rice_frame, *local_);
}

}  // namespace
}  // namespace spexd::testing
