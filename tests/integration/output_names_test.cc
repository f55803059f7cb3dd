// Server-written files and the names they are written under: one file under two spellings
// (`//`, `/./`, a symlinked directory) is refused before any work, for a frame's output and
// model and across an exposure's frames, instead of one rename silently replacing the
// other; the model path is checked when the header arrives, not after an upload; files at
// guessable temporary names are neither fatal nor removed; and replacing a large file
// reads it in blocks, not whole.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "spexd/v1/spexd.grpc.pb.h"
#include "tests/integration/service_fixture.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The tests' output root, their own: the shared one's other tests count its entries.
const std::string& OutputRoot() {
  static const std::string* root = new std::string(MakeTempDir());
  return *root;
}

// A fresh directory `real` under the output root, and `alias`, a symlink to it.
struct OutputDirs {
  std::string real, alias;
};
OutputDirs MakeOutputDirs(const std::string& name) {
  const std::string base = absl::StrCat(OutputRoot(), "/", name);
  std::filesystem::remove_all(base);
  OutputDirs d{base + "/real", base + "/alias"};
  std::filesystem::create_directories(d.real);
  std::filesystem::create_directory_symlink(d.real, d.alias);
  return d;
}

class OutputNamesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server::ServerOptions o = TestServerOptions();
    o.storage.output_roots = {OutputRoot()};
    server_ = StartServer(o);
    ASSERT_NE(server_, nullptr);
    client::ClientOptions once;
    once.max_attempts = 1;
    client_ = Connect(*server_, once);
    auto psf = client_->LoadPsfFromServerPath(Inputs().psf_path);
    ASSERT_TRUE(psf.ok()) << psf.status();
    psf_id_ = psf->id();
  }

  v1::ExtractHeader ToFiles(const std::string& out, const std::string& model, bool overwrite) {
    v1::ExtractHeader h = SmallHeader(psf_id_);
    h.set_server_path(Inputs().frame_path);
    h.set_server_output_path(out);
    if (!model.empty()) h.set_server_model_path(model);
    h.set_overwrite(overwrite);
    return h;
  }

  absl::Status Extract(const v1::ExtractHeader& h) {
    return client_->Extract(h, nullptr, false, client::ExtractCallbacks{});
  }

  std::unique_ptr<server::SpexdServer> server_;
  std::unique_ptr<client::SpexdClient> client_;
  std::string psf_id_;
};

TEST_F(OutputNamesTest, OutputAndModelAsOneFileUnderTwoSpellingsAreRefusedBeforeAnyWork) {
  const OutputDirs d = MakeOutputDirs("two-spellings");
  const std::vector<std::pair<std::string, std::string>> same = {
      {d.real + "/a.fits", d.real + "//a.fits"},
      {d.real + "/a.fits", d.real + "/./a.fits"},
      {d.real + "/a.fits", d.alias + "/a.fits"},
      {d.alias + "/./a.fits", d.real + "/a.fits"},
  };
  for (bool overwrite : {true, false}) {
    for (const auto& [out, model] : same) {
      SCOPED_TRACE(absl::StrCat(out, " / ", model, overwrite ? " (overwrite)" : ""));
      const absl::Status st = Extract(ToFiles(out, model, overwrite));
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
      EXPECT_NE(st.message().find("same file"), absl::string_view::npos) << st;
      EXPECT_TRUE(DirEntries(d.real).empty()) << "written: " << DirEntries(d.real).front();
    }
  }
  // Two files, however spelled, are written, and the server serves on.
  const absl::Status st = Extract(ToFiles(d.alias + "//a.fits", d.real + "/./m.fits", false));
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(std::filesystem::exists(d.real + "/a.fits"));
  EXPECT_TRUE(std::filesystem::exists(d.real + "/m.fits"));
  EXPECT_EQ(DirEntries(d.real).size(), 2u);
}

TEST_F(OutputNamesTest, AnExposureWritingOneFileTwiceIsRefusedWholeBeforeAnyFrameRuns) {
  const OutputDirs d = MakeOutputDirs("exposure-spellings");
  const std::vector<std::pair<std::string, std::string>> same = {
      {d.real + "/x.fits", d.real + "//x.fits"},
      {d.real + "/x.fits", d.real + "/./x.fits"},
      {d.real + "/x.fits", d.alias + "/x.fits"},
  };
  for (bool overwrite : {true, false}) {
    for (const auto& [first, second] : same) {
      SCOPED_TRACE(absl::StrCat(first, " / ", second));
      v1::ExposureRequest request;
      *request.add_frames() = ToFiles(d.real + "/other.fits", "", overwrite);
      *request.add_frames() = ToFiles(first, "", overwrite);
      *request.add_frames() = ToFiles(second, "", overwrite);
      int reported = 0;
      auto summary = client_->ExtractExposure(request, [&](const v1::ExposureFrameResult&) {
        ++reported;
        return absl::OkStatus();
      });
      EXPECT_EQ(summary.status().code(), absl::StatusCode::kInvalidArgument) << summary.status();
      EXPECT_NE(summary.status().message().find("frames[2]"), absl::string_view::npos)
          << summary.status();
      EXPECT_EQ(reported, 0);
      EXPECT_TRUE(DirEntries(d.real).empty()) << "written: " << DirEntries(d.real).front();
    }
  }
  // Distinct files in one exposure are written.
  v1::ExposureRequest request;
  *request.add_frames() = ToFiles(d.real + "/x.fits", "", false);
  *request.add_frames() = ToFiles(d.alias + "/y.fits", "", false);
  auto summary = client_->ExtractExposure(request, [](const v1::ExposureFrameResult& r) {
    EXPECT_EQ(r.code(), 0) << r.message();
    return absl::OkStatus();
  });
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->succeeded(), 2);
  EXPECT_EQ(DirEntries(d.real).size(), 2u);
}

// "Both paths are checked before any work" (docs/service.md): a model path outside the
// output roots is refused when the header arrives, while the announced upload has not
// been sent; the server used to wait for the upload first (up to the idle cut-off).
TEST_F(OutputNamesTest, TheModelPathIsCheckedWhenTheHeaderArrivesNotAfterTheUpload) {
  const OutputDirs d = MakeOutputDirs("model-early");
  v1::ExtractHeader h = SmallHeader(psf_id_);
  h.set_upload_size(static_cast<int64_t>(Inputs().frame_bytes.size()));
  h.set_server_output_path(d.real + "/frame.fits");
  h.set_server_model_path(Inputs().data_dir + "/model.fits");  // a data root: not writable
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::Extraction::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  const auto t0 = Clock::now();
  auto stream = stub->ExtractFrame(&ctx);
  v1::ExtractRequest m;
  *m.mutable_header() = h;
  ASSERT_TRUE(stream->Write(m));
  v1::ExtractResponse resp;
  int messages = 0;
  while (stream->Read(&resp)) ++messages;  // the upload is never sent, the stream left open
  const grpc::Status st = stream->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_EQ(messages, 0);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 10.0);
  EXPECT_FALSE(std::filesystem::exists(Inputs().data_dir + "/model.fits"));
  // The same model path inside the roots is written.
  ASSERT_TRUE(Extract(ToFiles(d.real + "/frame.fits", d.real + "/model.fits", false)).ok());
  EXPECT_TRUE(std::filesystem::exists(d.real + "/model.fits"));
}

// Any client can create files in a shared output root, e.g. as its own outputs: one put
// at the name the server's next temporary would have had (".NAME.tmp-<pid>-<n>", the
// in-process server's pid is this process's) used to fail the request with INTERNAL "link
// failed" after the whole extraction, and the server then deleted that file.
TEST_F(OutputNamesTest, FilesAtGuessableTemporaryNamesNeitherFailTheRequestNorAreRemoved) {
  const OutputDirs d = MakeOutputDirs("temporaries");
  constexpr int kPlanted = 512;  // more than this process's temporaries so far
  auto planted = [&](int n) { return absl::StrCat(d.real, "/.t.fits.tmp-", ::getpid(), "-", n); };
  for (int n = 0; n < kPlanted; ++n) ASSERT_TRUE(WriteBytes(planted(n), "theirs"));
  for (int i = 0; i < 3; ++i) {
    const absl::Status st = Extract(ToFiles(d.real + "/t.fits", "", /*overwrite=*/true));
    ASSERT_TRUE(st.ok()) << st;
  }
  for (int n = 0; n < kPlanted; ++n) ASSERT_EQ(ReadBytes(planted(n)), "theirs") << n;
  EXPECT_EQ(DirEntries(d.real).size(), static_cast<std::size_t>(kPlanted + 1));
}

// This process's resident set: the peak since the last ResetPeak, and now [bytes].
int64_t StatusBytes(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::stoll(line.substr(std::string(key).size())) * 1024;
  }
  return -1;
}
bool ResetPeak() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";  // resets VmHWM to the current resident set (Linux 4.0)
  out.flush();
  return static_cast<bool>(out);
}

// With overwrite, an existing file is checked for being the request's PSF: that used to
// read the whole file into memory (a 900 MiB file: +920 MiB); it is hashed in blocks.
TEST_F(OutputNamesTest, ReplacingALargeFileReadsItInBlocksNotWhole) {
  const OutputDirs d = MakeOutputDirs("large-existing");
  const std::string out = d.real + "/big.fits";
  constexpr int64_t kSize = int64_t{512} << 20;  // sparse: no disk, all of it read back
  {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, kSize), 0);
    ::close(fd);
  }
  // A first request warms everything up (the PSF's geometry, the thread pools).
  ASSERT_TRUE(Extract(ToFiles(d.real + "/warm.fits", "", false)).ok());
  if (!ResetPeak() || StatusBytes("VmHWM:") < 0) GTEST_SKIP() << "no /proc/self/clear_refs";
  const int64_t before = StatusBytes("VmRSS:");
  const absl::Status st = Extract(ToFiles(out, "", /*overwrite=*/true));
  ASSERT_TRUE(st.ok()) << st;
  const int64_t growth = StatusBytes("VmHWM:") - before;
  std::printf("peak resident growth while replacing a %lld MiB file: %lld MiB\n",
              static_cast<long long>(kSize >> 20), static_cast<long long>(growth >> 20));
  EXPECT_LT(growth, kSize / 2);
  EXPECT_LT(std::filesystem::file_size(out), static_cast<uintmax_t>(kSize));  // replaced
}

}  // namespace
}  // namespace spexd::testing
