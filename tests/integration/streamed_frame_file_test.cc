// spexctl's frame file written while the spectra stream in (client::
// StreamedFrameFile): byte for byte the file of the whole-file path (taken with -m, the
// model written beside) over float32 and float64 wires, a subset of bundles, without scores; and neither the
// output nor a temporary is left after a server error mid-stream, an interrupted spexctl
// or a file dropped uncommitted.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/spexctl/streamed_frame_file.h"
#include "core/backend/backend.h"
#include "core/io/internal/gzip.h"
#include "gtest/gtest.h"
#include "tests/integration/service_fixture.h"
#include "tests/integration/spexctl_cli.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// Stricter than ExpectSameFitsBytes: only the CHECKSUM cards and the comments of the
// DATASUM cards (the write time, to the second) may differ; DATASUM's value must not.
void ExpectSameButChecksumDates(const std::string& a_path, const std::string& b_path) {
  const std::string a = ReadBytes(a_path), b = ReadBytes(b_path);
  ASSERT_FALSE(a.empty()) << a_path;
  ASSERT_EQ(a.size(), b.size()) << a_path << " vs " << b_path;
  for (std::size_t off = 0; off < a.size(); off += 80) {
    if (a.compare(off, 80, b, off, 80) == 0) continue;
    const std::string card_a = a.substr(off, 80), card_b = b.substr(off, 80);
    if (card_a.compare(0, 9, "CHECKSUM=") == 0 && card_b.compare(0, 9, "CHECKSUM=") == 0) continue;
    const bool datasum = card_a.compare(0, 9, "DATASUM =") == 0 &&
                         card_a.substr(0, card_a.find('/')) == card_b.substr(0, card_b.find('/'));
    ASSERT_TRUE(datasum) << a_path << " vs " << b_path << " differ at byte " << off << ":\n  "
                         << card_a << "\n  " << card_b;
  }
}

// Fails the extraction at its second bundle, after the first has been streamed.
class FailingBackend : public core::Backend {
 public:
  explicit FailingBackend(std::unique_ptr<core::Backend> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return inner_->name(); }
  absl::StatusOr<core::ExtractionSummary> Extract(const core::ExtractionJob& job,
                                                  const core::BundleSink& sink) override {
    int n = 0;
    return inner_->Extract(job, [&](core::BundleResult&& b) {
      if (++n == 2) return absl::InternalError("test: the backend fails at the second bundle");
      return sink(std::move(b));
    });
  }

 private:
  std::unique_ptr<core::Backend> inner_;
};

// A server whose backend is `wrap(cpu backend)`.
template <typename Wrap>
std::unique_ptr<server::SpexdServer> ServerWith(Wrap wrap) {
  server::ServerOptions o = TestServerOptions();
  o.workers.backend_factory = [wrap](std::string* reason)
      -> absl::StatusOr<std::vector<std::unique_ptr<core::Backend>>> {
    auto inner = core::CreateBackend(core::BackendOptions{});
    if (!inner.ok()) return inner.status();
    *reason = "test backend";
    std::vector<std::unique_ptr<core::Backend>> out;
    out.push_back(wrap(*std::move(inner)));
    return out;
  };
  return StartServer(o);
}

class StreamedFrameFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = MakeTempDir();
    models_ = MakeTempDir();
  }
  std::string Args(const server::SpexdServer& s) const {
    return absl::StrCat("extract -i ", Inputs().frame_path, " -p ", Inputs().psf_copy,
                        " -w 5760.0,5800.0,0.8 -n 50 -q --retries 1 --server 127.0.0.1:", s.port());
  }
  // spexctl writes -o after the stream, from the whole frame, when -m asks for the model
  // too: the reference the streamed file is compared with. The model goes to models_.
  std::string WholeFile(const std::string& output) const {
    const std::string name = std::filesystem::path(output).filename().string();
    return absl::StrCat(" -m ", models_, "/model-", name, " -o ", output);
  }
  std::string out_, models_;
};

TEST_F(StreamedFrameFileTest, SameBytesAsTheWholeFilePath) {
  auto server = StartServer(TestServerOptions());
  ASSERT_NE(server, nullptr);
  struct Case {
    const char* name;
    const char* flags;
  };
  const Case cases[] = {
      {"f32", ""},
      {"f64", "--wire-precision float64 --snr"},
      {"f32-snr", "--wire-precision float32 --snr"},
      {"f32-bundle1", "--bundles 1"},
      {"f64-bundle1", "--bundles 1 --wire-precision float64"},
      {"f32-noscores", "--no-scores --mask-policy desispec-exact"},
      {"f64-noscores", "--no-scores --wire-precision float64"},
  };
  std::vector<std::string> files;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string streamed = absl::StrCat(out_, "/", c.name, "-streamed.fits");
    const std::string whole = absl::StrCat(out_, "/", c.name, "-whole.fits");
    const CliRun a = Spexctl(absl::StrCat(Args(*server), " ", c.flags, " -o ", streamed));
    ASSERT_EQ(a.code, 0) << a.output;
    EXPECT_NE(a.output.find("(rows while streaming)"), std::string::npos) << a.output;
    const CliRun b =
        Spexctl(absl::StrCat(Args(*server), " ", c.flags, WholeFile(whole)));
    ASSERT_EQ(b.code, 0) << b.output;
    EXPECT_NE(b.output.find("(whole file)"), std::string::npos) << b.output;
    ExpectSameButChecksumDates(whole, streamed);
    files.push_back(absl::StrCat(c.name, "-streamed.fits"));
    files.push_back(absl::StrCat(c.name, "-whole.fits"));
  }
  // An existing output is replaced, as by the whole-file path.
  const std::string again = absl::StrCat(out_, "/f64-streamed.fits");
  ASSERT_TRUE(WriteBytes(again, "an older file"));
  const CliRun c = Spexctl(absl::StrCat(Args(*server), " --wire-precision float64 -o ", again));
  ASSERT_EQ(c.code, 0) << c.output;
  ExpectSameButChecksumDates(out_ + "/f64-whole.fits", again);
  // No temporary left beside the outputs.
  std::sort(files.begin(), files.end());
  EXPECT_EQ(DirEntries(out_), files);
}

// Bundles that come in several parts (messages smaller than a bundle): a float32
// stream's parts are joined as they came, a float64 one's widened; the same file.
TEST_F(StreamedFrameFileTest, BundlesInSeveralPartsGiveTheSameBytes) {
  server::ServerOptions o = TestServerOptions();
  o.limits.max_message_bytes = 1280 << 10;  // above an upload chunk (1 MiB), below a bundle
  auto server = StartServer(o);
  ASSERT_NE(server, nullptr);
  for (const char* flags : {"", "--wire-precision float64"}) {
    SCOPED_TRACE(flags);
    const std::string streamed = absl::StrCat(out_, "/parts-streamed.fits");
    const std::string whole = absl::StrCat(out_, "/parts-whole.fits");
    const std::string args = absl::StrCat(Args(*server), " -w 5760.0,7000.0,0.8 ", flags);
    const CliRun a = Spexctl(absl::StrCat(args, " -v -o ", streamed));
    ASSERT_EQ(a.code, 0) << a.output;
    EXPECT_NE(a.output.find("(rows while streaming)"), std::string::npos) << a.output;
    const CliRun b = Spexctl(absl::StrCat(args, WholeFile(whole)));
    ASSERT_EQ(b.code, 0) << b.output;
    ExpectSameButChecksumDates(whole, streamed);
  }
}

// A .fits.gz -o is deflated chunk by chunk while the rows come: one gzip member whose
// bytes inflate to the whole-file path's (CHECKSUM dates aside), itself the .fits's.
TEST_F(StreamedFrameFileTest, GzipOutputInflatesToTheWholeFilePathsBytes) {
  auto server = StartServer(TestServerOptions());
  ASSERT_NE(server, nullptr);
  for (const char* flags : {"", "--wire-precision float64 --bundles 1"}) {
    SCOPED_TRACE(flags);
    const std::string streamed = out_ + "/streamed.fits.gz", whole = out_ + "/whole.fits.gz";
    const CliRun a = Spexctl(absl::StrCat(Args(*server), " ", flags, " -o ", streamed));
    ASSERT_EQ(a.code, 0) << a.output;
    EXPECT_NE(a.output.find("(rows while streaming)"), std::string::npos) << a.output;
    const CliRun b =
        Spexctl(absl::StrCat(Args(*server), " ", flags, WholeFile(whole)));
    ASSERT_EQ(b.code, 0) << b.output;
    EXPECT_NE(b.output.find("(whole file)"), std::string::npos) << b.output;
    const std::string gz = ReadBytes(streamed);
    ASSERT_TRUE(core::IsGzip(gz));
    {  // one member (ISA-L's count), whose ISIZE is the inflated size
      core::GzipDecoder d("gz");
      absl::string_view in(gz);
      const std::size_t isize = core::GzipTrailerSize(gz);
      std::string buf(isize + 1, '\0');  // a byte to spare: the trailer is read with room left
      std::size_t at = 0;
      while (!in.empty() && at < buf.size()) {
        auto n = d.Decode(&in, buf.data() + at, buf.size() - at);
        ASSERT_TRUE(n.ok()) << n.status();
        at += *n;
      }
      EXPECT_TRUE(in.empty());
      EXPECT_TRUE(d.Finish().ok());
      EXPECT_EQ(d.members(), 1);
      EXPECT_EQ(at, isize);
    }
    // Inflated by zlib (core::GzipInflater), one member.
    auto inflate = [](const std::string& bytes, const std::string& to) {
      std::string out;
      core::GzipInflater z("gz", [&](absl::string_view piece) {
        out.append(piece.data(), piece.size());
        return absl::OkStatus();
      });
      EXPECT_TRUE(z.Feed(bytes).ok());
      EXPECT_TRUE(z.Finish().ok());
      EXPECT_TRUE(WriteBytes(to, out));
    };
    inflate(gz, out_ + "/streamed.fits");
    inflate(ReadBytes(whole), out_ + "/whole.fits");
    ExpectSameButChecksumDates(out_ + "/whole.fits", out_ + "/streamed.fits");
    for (const std::string& f : DirEntries(out_)) std::filesystem::remove(out_ + "/" + f);
  }
}

TEST_F(StreamedFrameFileTest, ServerErrorMidStreamLeavesNoFile) {
  auto server = ServerWith([](std::unique_ptr<core::Backend> inner) {
    return std::make_unique<FailingBackend>(std::move(inner));
  });
  ASSERT_NE(server, nullptr);
  for (const char* wire : {"float32", "float64"}) {
    SCOPED_TRACE(wire);
    const std::string name = std::string(wire) == "float32" ? "/frame.fits" : "/frame.fits.gz";
    const CliRun r = Spexctl(
        absl::StrCat(Args(*server), " --wire-precision ", wire, " -o ", out_, name));
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find("fails at the second bundle"), std::string::npos) << r.output;
    EXPECT_TRUE(DirEntries(out_).empty()) << absl::StrJoin(DirEntries(out_), " ");
  }
}

TEST_F(StreamedFrameFileTest, InterruptedSpexctlLeavesNoFile) {
  auto server = ServerWith([](std::unique_ptr<core::Backend> inner) {
    return std::make_unique<SlowBackend>(std::move(inner), 2.0);
  });
  ASSERT_NE(server, nullptr);
  const std::string cmd = absl::StrCat(SPEXCTL_BINARY, " ", Args(*server), " -o ", out_, "/frame.fits");
  std::vector<std::string> argv_s = absl::StrSplit(cmd, ' ', absl::SkipEmpty());
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  // The first bundle is out after ~2.5 s, the second after ~4.5 s: its rows are written.
  std::this_thread::sleep_for(std::chrono::milliseconds(3200));
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  EXPECT_TRUE(DirEntries(out_).empty()) << absl::StrJoin(DirEntries(out_), " ");
}

// Where the filesystem has no O_TMPFILE the temporary has a name: dropped uncommitted or
// interrupted by a signal, it is removed.
v1::FrameHeader TinyHeader() {
  v1::FrameHeader h;
  h.set_specmin(0);
  h.set_nspec(10);
  h.set_bundlesize(5);
  h.set_ndiag(2);
  for (int i = 0; i < 20; ++i) h.add_wave(5760.0 + 0.8 * i);
  h.add_bundles(0);
  h.add_bundles(1);
  return h;
}

TEST(StreamedFrameFileNamedTemporaryTest, DroppedOrInterruptedLeavesNothing) {
  const std::string dir = MakeTempDir();
  core::FrameMetadata meta;
  {
    auto file = client::StreamedFrameFile::Create(dir + "/frame.fits", TinyHeader(), meta, false,
                                                  {}, /*unnamed_temporary=*/false);
    ASSERT_TRUE(file.ok()) << file.status();
    ASSERT_FALSE((*file)->temporary_name().empty());
    EXPECT_EQ(DirEntries(dir).size(), 1u);
  }
  EXPECT_TRUE(DirEntries(dir).empty());
  // "fast" (fork): the child writes into this test's `dir`, which is checked here.
  GTEST_FLAG_SET(death_test_style, "fast");
  EXPECT_EXIT(
      {
        auto file = client::StreamedFrameFile::Create(dir + "/frame.fits", TinyHeader(), meta,
                                                      false, {}, false);
        if (!file.ok() || !std::filesystem::exists((*file)->temporary_name())) ::_exit(3);
        ::raise(SIGINT);
        ::_exit(4);
      },
      ::testing::KilledBySignal(SIGINT), "");
  EXPECT_TRUE(DirEntries(dir).empty()) << absl::StrJoin(DirEntries(dir), " ");
}

}  // namespace
}  // namespace spexd::testing
