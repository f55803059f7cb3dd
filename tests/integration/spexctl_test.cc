// The spexctl binary against an in-process server: `extract --server` writes the same
// desispec file as `extract --local` (byte for byte, but for the CHECKSUM/DATASUM cards,
// whose comments carry the write time), and the admin subcommands work.
#include <sys/wait.h>
#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/io/fits_gunzip.h"
#include "core/io/internal/gzip.h"
#include "server/platform/content_id.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/integration/spexctl_cli.h"
#include "tests/synthetic_frames.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

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

// A frame file appears by a rename; the rename survives a crash only once its directory is
// synced too (the server does it for its outputs; spexctl's own file likewise).
TEST_F(SpexctlTest, ALocalFrameFileIsSyncedWithItsDirectory) {
  const std::string dir = out_ + "/synced";
  std::filesystem::create_directories(dir);
  const std::string log = out_ + "/fsync.log";
  std::string asan = "verify_asan_link_order=0";  // the preload precedes ASan's runtime
  if (const char* old = getenv("ASAN_OPTIONS")) asan = absl::StrCat(old, ":", asan);
  // Quoted: the caller's options may hold spaces (sanitizers accept them as separators).
  const std::string cmd = absl::StrCat(
      "LD_PRELOAD=", SPEXD_FS_FAULT_LIB, " SPEXD_FSYNC_LOG=", log, " ASAN_OPTIONS='", asan, "'",
      " timeout 120 ", SPEXCTL_BINARY, " ", ExtractArgs(), " --local -o ", dir, "/frame.fits 2>&1");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  ASSERT_TRUE(std::filesystem::exists(dir + "/frame.fits"));
  const std::string synced = ReadBytes(log);
  const std::string real_dir = std::filesystem::canonical(dir).string();
  EXPECT_NE(synced.find(real_dir + "\n"), std::string::npos) << synced;
}

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
  // The frame's numerical health.
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
// the same FITS file as a plain output.
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

// The same frame and model files whichever way they are written: from a
// float64 stream (today's), from a float32 stream (spexctl's default for -o) and by the
// server (--server-output without -o: no array streamed), for .fits and .fits.gz inputs.
TEST_F(SpexctlTest, Float32StreamAndServerWrittenFilesEqualFloat64StreamFiles) {
  struct Case {
    const char* name;
    std::string frame, psf;
  };
  for (const Case& in : {Case{"fits", Inputs().frame_path, Inputs().psf_copy},
                         Case{"gz", Inputs().frame_gz_path, Inputs().psf_gz_path}}) {
    SCOPED_TRACE(in.name);
    const std::string args = absl::StrCat("extract -i ", in.frame, " -p ", in.psf,
                                          " -w 5760.0,5800.0,0.8 -n 50 -q ", server_flag_);
    const std::string f64 = absl::StrCat(out_, "/", in.name, "-f64");
    const std::string f32 = absl::StrCat(out_, "/", in.name, "-f32");
    const std::string srv = absl::StrCat(Inputs().output_dir, "/spexctl-", in.name, "-server");
    CliRun a = Spexctl(absl::StrCat(args, " --wire-precision float64 -o ", f64, ".fits -m ", f64,
                                    "-model.fits"));
    ASSERT_EQ(a.code, 0) << a.output;
    CliRun b = Spexctl(absl::StrCat(args, " -o ", f32, ".fits -m ", f32, "-model.fits"));
    ASSERT_EQ(b.code, 0) << b.output;
    CliRun c = Spexctl(absl::StrCat(args, " --server-path --server-output-path ", srv,
                                    ".fits -m ", srv, "-model.fits"));
    ASSERT_EQ(c.code, 0) << c.output;
    ExpectSameFitsBytes(f64 + ".fits", f32 + ".fits");
    ExpectSameFitsBytes(f64 + ".fits", srv + ".fits");
    ExpectSameFitsBytes(f64 + "-model.fits", f32 + "-model.fits");
    ExpectSameFitsBytes(f64 + "-model.fits", srv + "-model.fits");
    // The reply names each file with its size and SHA-256.
    for (const std::string& path : {srv + ".fits", srv + "-model.fits"}) {
      const std::string bytes = ReadBytes(path);
      EXPECT_NE(c.output.find(absl::StrCat(path, " ", bytes.size(), " bytes sha256 ",
                                           server::Sha256Hex(bytes))),
                std::string::npos)
          << c.output;
    }
  }
}

// Server-written frames are refused where the server may not write them.
TEST_F(SpexctlTest, ServerWrittenFrameRefusals) {
  const std::string args = absl::StrCat(ExtractArgs(), " ", server_flag_, " --server-path");
  const std::string dir = Inputs().output_dir;
  CliRun no_output = Spexctl(absl::StrCat(ExtractArgs(), " ", server_flag_));
  EXPECT_EQ(no_output.code, 2);
  EXPECT_NE(no_output.output.find("--server-output"), std::string::npos) << no_output.output;
  CliRun outside = Spexctl(absl::StrCat(args, " --server-output-path ", out_, "/x.fits"));
  EXPECT_EQ(outside.code, 1);
  EXPECT_NE(outside.output.find("PERMISSION_DENIED"), std::string::npos) << outside.output;
  // The model outside the roots refuses the request before anything is written.
  CliRun model_outside = Spexctl(
      absl::StrCat(args, " --server-output-path ", dir, "/refused.fits -m ", out_, "/m.fits"));
  EXPECT_EQ(model_outside.code, 1);
  EXPECT_NE(model_outside.output.find("PERMISSION_DENIED"), std::string::npos)
      << model_outside.output;
  EXPECT_FALSE(std::filesystem::exists(dir + "/refused.fits"));
  const std::string first = absl::StrCat(args, " --server-output-path ", dir, "/again.fits");
  CliRun made = Spexctl(first);
  ASSERT_EQ(made.code, 0) << made.output;
  // The "PATH SIZE bytes sha256 HEX" line.
  auto file_line = [](const std::string& output) {
    const std::size_t at = output.find(" bytes sha256 ");
    if (at == std::string::npos) return std::string();
    const std::size_t begin = output.rfind('\n', at) == std::string::npos ? 0 : output.rfind('\n', at) + 1;
    return output.substr(begin, output.find('\n', at) - begin);
  };
  ASSERT_NE(file_line(made.output), "") << made.output;
  // A re-run (a pipeline job run again after a lost reply) gets the same answer: the
  // file is the frame it would write, so it is kept and named as the first run named it.
  CliRun again = Spexctl(first);
  EXPECT_EQ(again.code, 0) << again.output;
  EXPECT_EQ(file_line(again.output), file_line(made.output)) << again.output;
  // Another request onto it is refused: the file is another frame.
  CliRun exists = Spexctl(first + " --no-scores");
  EXPECT_EQ(exists.code, 1);
  EXPECT_NE(exists.output.find("ALREADY_EXISTS"), std::string::npos) << exists.output;
  EXPECT_NE(exists.output.find("different content"), std::string::npos) << exists.output;
  CliRun replaced = Spexctl(first + " --no-scores --server-overwrite");
  EXPECT_EQ(replaced.code, 0) << replaced.output;
  CliRun bad_wire = Spexctl(absl::StrCat(ExtractArgs(), " ", server_flag_, " -o ", out_,
                                         "/w.fits --wire-precision float16"));
  EXPECT_EQ(bad_wire.code, 2);
  CliRun bad_checksum = Spexctl(first + " --server-checksum md5");
  EXPECT_EQ(bad_checksum.code, 2);
  EXPECT_NE(bad_checksum.output.find("--server-checksum"), std::string::npos)
      << bad_checksum.output;
}

// A server-written path is printed escaped (docs/service.md): a newline in the name
// cannot split the "PATH SIZE bytes sha256 HEX" line into two.
TEST_F(SpexctlTest, AServerWrittenPathWithANewlineStaysOneLine) {
  const std::string path = Inputs().output_dir + "/new\nline.fits";
  std::filesystem::remove(path);
  // A literal newline inside single quotes: one argument for sh.
  CliRun made = Spexctl(absl::StrCat(ExtractArgs(), " ", server_flag_,
                                     " --server-path --server-output-path '", path, "'"));
  ASSERT_EQ(made.code, 0) << made.output;
  const std::string bytes = ReadBytes(path);
  ASSERT_FALSE(bytes.empty());
  const std::string line = absl::StrCat(Inputs().output_dir, "/new\\nline.fits ", bytes.size(),
                                        " bytes sha256 ", server::Sha256Hex(bytes), "\n");
  EXPECT_NE(made.output.find(line), std::string::npos) << made.output;
  EXPECT_EQ(made.output.find("/new\n"), std::string::npos) << made.output;
  std::filesystem::remove(path);
}

// --server-checksum crc32: the line names the file with its CRC-32 (zlib's, as
// `format(zlib.crc32(data), "08x")` gives it) instead of its SHA-256; the file is the same.
TEST_F(SpexctlTest, ServerChecksumCrc32NamesTheFileWithItsCrc32) {
  const std::string dir = Inputs().output_dir;
  const std::string args =
      absl::StrCat(ExtractArgs(), " ", server_flag_, " --server-path --server-output-path ");
  CliRun sha = Spexctl(absl::StrCat(args, dir, "/sum-sha.fits"));
  ASSERT_EQ(sha.code, 0) << sha.output;
  CliRun crc = Spexctl(absl::StrCat(args, dir, "/sum-crc.fits --server-checksum crc32"));
  ASSERT_EQ(crc.code, 0) << crc.output;
  const std::string bytes = ReadBytes(dir + "/sum-crc.fits");
  const uLong value = crc32_z(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()),
                              bytes.size());
  EXPECT_NE(crc.output.find(absl::StrCat(dir, "/sum-crc.fits ", bytes.size(), " bytes crc32 ",
                                         absl::StrFormat("%08x", value), "\n")),
            std::string::npos)
      << crc.output;
  EXPECT_EQ(crc.output.find("sha256"), std::string::npos) << crc.output;
  ExpectSameFitsBytes(dir + "/sum-sha.fits", dir + "/sum-crc.fits");
}

}  // namespace
}  // namespace spexd::testing
