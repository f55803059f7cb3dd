// An exposure whose data root is also its output root: no frame may write a file that a
// frame of the exposure reads (an input, a PSF loaded from a server path), however the
// path is spelled, even with overwrite. The whole exposure is refused before any frame
// runs, naming both frames; the files read are left untouched.
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/lib/spexd_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

using ::testing::HasSubstr;

class ExposureInputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir();
    ASSERT_EQ(::mkdir((dir_ + "/out").c_str(), 0755), 0);
    for (const char* name : {"a.fits", "b.fits"}) {
      ASSERT_TRUE(WriteBytes(dir_ + "/" + name, Inputs().frame_bytes));
    }
    ASSERT_TRUE(WriteBytes(dir_ + "/psf.fits", Inputs().psf_bytes));
    server::ServerOptions o = TestServerOptions();
    o.storage.data_roots = {dir_};
    o.storage.output_roots = {dir_};
    server_ = StartServer(std::move(o));
    ASSERT_NE(server_, nullptr);
    client_ = Connect(*server_);
    auto psf = client_->LoadPsfFromServerPath(dir_ + "/psf.fits");
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_id_ = psf->id();
  }

  v1::ExtractHeader Frame(const std::string& input, const std::string& output) const {
    v1::ExtractHeader h = SmallHeader(psf_id_);
    h.set_server_path(input);
    h.set_server_output_path(output);
    h.set_overwrite(true);
    return h;
  }

  // Runs `request`, which must be refused whole (INVALID_ARGUMENT, no frame result) with
  // a message holding every one of `says`.
  void ExpectRefused(const v1::ExposureRequest& request, const std::vector<std::string>& says) {
    int results = 0;
    auto summary = client_->ExtractExposure(request, [&](const v1::ExposureFrameResult&) {
      ++results;
      return absl::OkStatus();
    });
    ASSERT_FALSE(summary.ok());
    EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument) << summary.status();
    for (const std::string& s : says) EXPECT_THAT(summary.status().message(), HasSubstr(s));
    EXPECT_EQ(results, 0) << "a frame ran";
    EXPECT_EQ(ReadBytes(dir_ + "/a.fits"), Inputs().frame_bytes);
    EXPECT_EQ(ReadBytes(dir_ + "/b.fits"), Inputs().frame_bytes);
    EXPECT_EQ(ReadBytes(dir_ + "/psf.fits"), Inputs().psf_bytes);
    for (const std::string& name : DirEntries(dir_ + "/out")) {
      EXPECT_EQ(name, "up") << "a frame was written";  // the symlink of a spelling test
    }
  }

  std::string dir_, psf_id_;
  std::unique_ptr<server::SpexdServer> server_;
  std::unique_ptr<client::SpexdClient> client_;
};

TEST_F(ExposureInputsTest, AFrameWritingAnotherFramesInputIsRefusedWhole) {
  v1::ExposureRequest r;
  *r.add_frames() = Frame(dir_ + "/a.fits", dir_ + "/out/frame-a.fits");
  *r.add_frames() = Frame(dir_ + "/b.fits", dir_ + "/a.fits");
  ExpectRefused(r, {"frames[1]: its output", "is frames[0]'s input"});
}

TEST_F(ExposureInputsTest, AFrameWritingAnotherFramesPsfIsRefusedWhole) {
  v1::ExposureRequest r;
  *r.add_frames() = Frame(dir_ + "/a.fits", dir_ + "/out/frame-a.fits");
  *r.add_frames() = Frame(dir_ + "/b.fits", dir_ + "/psf.fits");
  ExpectRefused(r, {"frames[1]", "PSF"});
}

TEST_F(ExposureInputsTest, EverySpellingAndHardLinksAreTheSameFile) {
  // `//` and `/./`, a symlinked directory, a hard link: the same file.
  ASSERT_EQ(::symlink(dir_.c_str(), (dir_ + "/out/up").c_str()), 0);
  ASSERT_EQ(::link((dir_ + "/b.fits").c_str(), (dir_ + "/b-link.fits").c_str()), 0);
  for (const std::string& spelled :
       {dir_ + "//./b.fits", dir_ + "/out/up/b.fits", dir_ + "/b-link.fits"}) {
    SCOPED_TRACE(spelled);
    v1::ExposureRequest r;
    *r.add_frames() = Frame(dir_ + "/a.fits", spelled);
    *r.add_frames() = Frame(dir_ + "/b.fits", dir_ + "/out/frame-b.fits");
    ExpectRefused(r, {"frames[0]: its output", "frames[1]'s input"});
  }
}

TEST_F(ExposureInputsTest, AnInputNotThereYetThatAFrameWouldWriteIsRefused) {
  // Frame 1 reads what frame 0 would create: which it reads would depend on scheduling.
  v1::ExposureRequest r;
  *r.add_frames() = Frame(dir_ + "/a.fits", dir_ + "/out/new.fits");
  *r.add_frames() = Frame(dir_ + "/out/new.fits", dir_ + "/out/frame-b.fits");
  ExpectRefused(r, {"frames[0]: its output", "frames[1]'s input"});
}

TEST_F(ExposureInputsTest, ElevenFramesTheFirstWritingWhatTheLastReads) {
  v1::ExposureRequest r;
  for (int i = 0; i < 10; ++i) {
    *r.add_frames() = Frame(dir_ + "/a.fits", absl::StrCat(dir_, "/out/frame-", i, ".fits"));
  }
  r.mutable_frames(0)->set_server_output_path(dir_ + "/b.fits");
  *r.add_frames() = Frame(dir_ + "/b.fits", dir_ + "/out/frame-10.fits");
  ExpectRefused(r, {"frames[0]: its output", "frames[10]'s input"});
}

TEST_F(ExposureInputsTest, DistinctFilesStillRun) {
  v1::ExposureRequest r;
  *r.add_frames() = Frame(dir_ + "/a.fits", dir_ + "/out/frame-a.fits");
  *r.add_frames() = Frame(dir_ + "/b.fits", dir_ + "/out/frame-b.fits");
  std::map<int, int> codes;
  auto summary = client_->ExtractExposure(r, [&](const v1::ExposureFrameResult& f) {
    codes[f.index()] = f.code();
    return absl::OkStatus();
  });
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->succeeded(), 2);
  EXPECT_EQ(codes, (std::map<int, int>{{0, 0}, {1, 0}}));
}

}  // namespace
}  // namespace spexd::testing
