// The spexctl binary against an in-process server: `extract --server` writes the same
// desispec file as `extract --local` (byte for byte, but for the CHECKSUM/DATASUM cards,
// whose comments carry the write time), and the admin subcommands work.
#include <sys/wait.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/io/fits_gunzip.h"
#include "core/io/internal/gzip.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

struct CliRun {
  int code = -1;
  std::string output;  // stdout and stderr
};

CliRun Spexctl(const std::string& args) {
  CliRun r;
  const std::string cmd = absl::StrCat("timeout 120 ", SPEXCTL_BINARY, " ", args, " 2>&1");
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return r;
  char buf[4096];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) r.output += buf;
  const int status = pclose(pipe);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// Compares two FITS files record by record (80 bytes); only CHECKSUM and DATASUM cards
// may differ, and only when both files have them in the same place.
void ExpectSameFitsBytes(const std::string& a_path, const std::string& b_path) {
  const std::string a = ReadBytes(a_path), b = ReadBytes(b_path);
  ASSERT_FALSE(a.empty()) << a_path;
  ASSERT_EQ(a.size(), b.size());
  ASSERT_EQ(a.size() % 2880, 0u);
  int checksum_cards = 0;
  for (std::size_t off = 0; off < a.size(); off += 80) {
    if (a.compare(off, 80, b, off, 80) == 0) continue;
    const std::string ka = a.substr(off, 8), kb = b.substr(off, 8);
    const bool checksum = (ka == "CHECKSUM" || ka == "DATASUM ") && ka == kb;
    ASSERT_TRUE(checksum) << "files differ at byte " << off << ":\n  " << a.substr(off, 80)
                          << "\n  " << b.substr(off, 80);
    ++checksum_cards;
  }
  EXPECT_LE(checksum_cards, 2 * 8);  // at most both cards of each HDU
}

class SpexctlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = StartServer(TestServerOptions());
    ASSERT_NE(server_, nullptr);
    server_flag_ = absl::StrCat("--server 127.0.0.1:", server_->port());
    out_ = MakeTempDir();
  }
  std::string ExtractArgs() const {
    return absl::StrCat("extract -i ", Inputs().frame_path, " -p ", Inputs().psf_copy,
                        " -w 5760.0,5800.0,0.8 -n 50 -q");
  }

  std::unique_ptr<server::SpexdServer> server_;
  std::string server_flag_;
  std::string out_;
};

TEST_F(SpexctlTest, RemoteExtractionWritesTheSameFileAsLocal) {
  CliRun local = Spexctl(absl::StrCat(ExtractArgs(), " --local -o ", out_, "/local.fits -m ", out_,
                                   "/local-model.fits"));
  ASSERT_EQ(local.code, 0) << local.output;
  CliRun upload = Spexctl(absl::StrCat(ExtractArgs(), " ", server_flag_, " -o ", out_,
                                    "/upload.fits -m ", out_, "/upload-model.fits"));
  ASSERT_EQ(upload.code, 0) << upload.output;
  CliRun by_path = Spexctl(absl::StrCat(ExtractArgs(), " ", server_flag_, " --server-path -o ", out_,
                                     "/path.fits --priority realtime --snr"));
  ASSERT_EQ(by_path.code, 0) << by_path.output;
  ExpectSameFitsBytes(out_ + "/local.fits", out_ + "/upload.fits");
  ExpectSameFitsBytes(out_ + "/local.fits", out_ + "/path.fits");
  ExpectSameFitsBytes(out_ + "/local-model.fits", out_ + "/upload-model.fits");
  EXPECT_NE(by_path.output.find("median_snr"), std::string::npos) << by_path.output;
  EXPECT_NE(upload.output.find("patches"), std::string::npos) << upload.output;
  // The frame's numerical health (issue 23).
  EXPECT_NE(upload.output.find("spexctl: qa request "), std::string::npos) << upload.output;
  EXPECT_NE(upload.output.find("median chi2pix"), std::string::npos) << upload.output;
  EXPECT_NE(upload.output.find("shadow parity not sampled"), std::string::npos) << upload.output;
}

TEST_F(SpexctlTest, AdminCommands) {
  CliRun health = Spexctl(absl::StrCat("health ", server_flag_));
  EXPECT_EQ(health.code, 0) << health.output;
  EXPECT_NE(health.output.find("SERVING"), std::string::npos);
  CliRun info = Spexctl(absl::StrCat("info ", server_flag_));
  EXPECT_EQ(info.code, 0) << info.output;
  EXPECT_NE(info.output.find("worker 0: cpu"), std::string::npos) << info.output;
  CliRun load = Spexctl(absl::StrCat("psf load ", Inputs().psf_path, " ", server_flag_));
  ASSERT_EQ(load.code, 0) << load.output;
  const std::string id = load.output.substr(0, 64);
  CliRun again = Spexctl(absl::StrCat("psf load ", Inputs().psf_copy, " --server-path ", server_flag_));
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(again.output.substr(0, 64), id);
  EXPECT_NE(again.output.find("already loaded"), std::string::npos);
  CliRun list = Spexctl(absl::StrCat("psf list ", server_flag_));
  EXPECT_EQ(list.code, 0);
  EXPECT_NE(list.output.find(id), std::string::npos) << list.output;
  CliRun unload = Spexctl(absl::StrCat("psf unload ", id, " ", server_flag_));
  EXPECT_EQ(unload.code, 0) << unload.output;
  CliRun gone = Spexctl(absl::StrCat("psf unload ", id, " ", server_flag_));
  EXPECT_EQ(gone.code, 1);
  EXPECT_NE(gone.output.find("NOT_FOUND"), std::string::npos) << gone.output;
  CliRun outside = Spexctl(absl::StrCat(ExtractArgs(), " ", server_flag_,
                                     " --server-path -i /etc/hostname -o ", out_, "/x.fits"));
  EXPECT_EQ(outside.code, 1);
  EXPECT_NE(outside.output.find("PERMISSION_DENIED"), std::string::npos) << outside.output;
  CliRun down = Spexctl("health --server 127.0.0.1:1 --retries 1 --deadline 2");
  EXPECT_NE(down.code, 0);
}


// DESI names: .fits.gz inputs in every mode, and .fits.gz outputs really gzip, holding
// the same FITS file as a plain output (issue 14).
TEST_F(SpexctlTest, GzipInputsAndGzOutputsInEveryMode) {
  const std::string gz_args = absl::StrCat("extract -i ", Inputs().frame_gz_path, " -p ",
                                           Inputs().psf_gz_path, " -w 5760.0,5800.0,0.8 -n 50 -q");
  // The plain reference reads the same (gzip) inputs: IN_IMG and IN_PSF name them.
  CliRun plain = Spexctl(absl::StrCat(gz_args, " --local -o ", out_, "/plain.fits -m ", out_,
                                      "/plain-model.fits"));
  ASSERT_EQ(plain.code, 0) << plain.output;
  CliRun local = Spexctl(absl::StrCat(gz_args, " --local -o ", out_, "/local.fits.gz -m ", out_,
                                      "/local-model.fits.gz"));
  ASSERT_EQ(local.code, 0) << local.output;
  CliRun upload = Spexctl(absl::StrCat(gz_args, " ", server_flag_, " -o ", out_,
                                       "/upload.fits.gz -m ", out_, "/upload-model.fits.gz"));
  ASSERT_EQ(upload.code, 0) << upload.output;
  CliRun by_path = Spexctl(absl::StrCat(gz_args, " ", server_flag_, " --server-path -o ", out_,
                                        "/path.fits"));
  ASSERT_EQ(by_path.code, 0) << by_path.output;
  ExpectSameFitsBytes(out_ + "/plain.fits", out_ + "/path.fits");
  for (const char* name : {"local", "upload", "local-model", "upload-model"}) {
    const std::string gz = ReadBytes(absl::StrCat(out_, "/", name, ".fits.gz"));
    ASSERT_TRUE(core::IsGzip(gz)) << name;
    auto fits = core::GunzipFits(gz, name, core::FitsSizeLimits{});
    ASSERT_TRUE(fits.ok()) << fits.status();
    const std::string inflated = absl::StrCat(out_, "/", name, "-inflated.fits");
    ASSERT_TRUE(WriteBytes(inflated, *fits));
    const bool model = std::string(name).find("model") != std::string::npos;
    ExpectSameFitsBytes(out_ + (model ? "/plain-model.fits" : "/plain.fits"), inflated);
  }
}

}  // namespace
}  // namespace spexd::testing
