// A retried server-written frame gets the same answer (docs/service.md, "Server-written
// frames"): without overwrite, a file already at server_output_path (or
// server_model_path) that is the frame this request writes, checksum dates aside, is kept
// untouched and the reply names it as the first reply did; any other file refuses the
// request (ALREADY_EXISTS) with nothing written. CPU backend, the small test frame.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/platform/content_id.h"
#include "tests/integration/service_fixture.h"
#include "tests/integration/spawned_server.h"
#include "tests/test_support.h"

namespace spexd::testing {
namespace {

// What must not change when a file is kept: the inode, the modification time, the bytes.
struct FileState {
  ino_t ino = 0;
  int64_t mtime_ns = -1;
  std::string bytes;
  bool operator==(const FileState& o) const {
    return ino == o.ino && mtime_ns == o.mtime_ns && bytes == o.bytes;
  }
};

FileState StateOf(const std::string& path) {
  FileState s;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return s;
  s.ino = st.st_ino;
  s.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  s.bytes = ReadBytes(path);
  return s;
}

// Waits for the wall clock's next second: the CHECKSUM/DATASUM comments record the time
// of writing to the second, so a frame written after this differs from one written
// before in those cards (the comparison must look past them).
void NextSecond() {
  const std::time_t now = std::time(nullptr);
  while (std::time(nullptr) == now) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

void ExpectSameAnswer(const v1::ExtractSummary& a, const v1::ExtractSummary& b) {
  EXPECT_EQ(a.server_output_path(), b.server_output_path());
  EXPECT_EQ(a.server_output_bytes(), b.server_output_bytes());
  EXPECT_EQ(a.server_output_sha256(), b.server_output_sha256());
  EXPECT_EQ(a.server_model_path(), b.server_model_path());
  EXPECT_EQ(a.server_model_bytes(), b.server_model_bytes());
  EXPECT_EQ(a.server_model_sha256(), b.server_model_sha256());
}

class IdempotentOutputTest : public LoadedServerTest {
 protected:
  static std::string Out(const std::string& name) {
    const std::string path = Inputs().output_dir + "/idem-" + name;
    std::remove(path.c_str());
    return path;
  }
  v1::ExtractHeader FileHeader(const std::string& out, const std::string& model = "") const {
    v1::ExtractHeader h = SmallHeader(psf_id_);
    h.set_server_path(Inputs().frame_path);
    h.set_in_img_name("frame.fits");
    h.set_in_psf_name("psf.fits");
    h.set_server_output_path(out);
    h.set_server_model_path(model);
    return h;
  }
  absl::StatusOr<v1::ExtractSummary> Run(const v1::ExtractHeader& h, bool subset = false) {
    return client_->ExtractToServerFile(h, nullptr, subset);
  }
  static double Outcome(const char* outcome) {
    return std::max(0.0, MetricValue(*server_, absl::StrCat("spexd_output_files_total{outcome=\"",
                                                            outcome, "\"}")));
  }
  // The request refused with ALREADY_EXISTS, saying why, and `path` as it was.
  void ExpectRefused(const v1::ExtractHeader& h, const std::string& path, bool subset = false) {
    const FileState before = StateOf(path);
    const std::vector<std::string> entries = DirEntries(Inputs().output_dir);
    const double refused = Outcome("refused_different");
    auto r = Run(h, subset);
    ASSERT_EQ(r.status().code(), absl::StatusCode::kAlreadyExists) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "exists with different content"))
        << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), "set overwrite")) << r.status();
    EXPECT_TRUE(StateOf(path) == before) << path << " was changed";
    EXPECT_EQ(DirEntries(Inputs().output_dir), entries) << "a file was written or left behind";
    EXPECT_EQ(Outcome("refused_different"), refused + 1);
  }
};

// (a), (c): the same request twice, a plain and a gzip-compressed frame.
TEST_F(IdempotentOutputTest, TheSameRequestAgainKeepsTheFileAndGivesTheFirstAnswer) {
  for (const char* name : {"same.fits", "same.fits.gz"}) {
    SCOPED_TRACE(name);
    const std::string out = Out(name);
    auto first = Run(FileHeader(out));
    ASSERT_TRUE(first.ok()) << first.status();
    const FileState written = StateOf(out);
    EXPECT_EQ(first->server_output_sha256(), server::Sha256Hex(written.bytes));
    NextSecond();
    const double kept = Outcome("kept_identical");
    auto again = Run(FileHeader(out));
    ASSERT_TRUE(again.ok()) << again.status();
    ExpectSameAnswer(*first, *again);
    EXPECT_TRUE(StateOf(out) == written) << "the file was replaced or changed";
    EXPECT_EQ(Outcome("kept_identical"), kept + 1);
    // What the second job wrote differs from the kept file in its bytes (the checksum
    // dates): a byte-for-byte comparison would have refused it.
    const std::string fresh = Out(absl::StrCat("fresh-", name));
    auto other = Run(FileHeader(fresh));
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_NE(ReadBytes(fresh), written.bytes);
  }
}

// (b): another request onto the existing frame: other options, other fibres.
TEST_F(IdempotentOutputTest, ADifferentRequestIsRefusedAndTheFileLeftAsItWas) {
  for (const char* name : {"diff.fits", "diff.fits.gz"}) {
    SCOPED_TRACE(name);
    const std::string out = Out(name);
    ASSERT_TRUE(Run(FileHeader(out)).ok());
    v1::ExtractHeader no_scores = FileHeader(out);
    no_scores.mutable_params()->set_no_scores(true);
    ExpectRefused(no_scores, out);
    v1::ExtractHeader subset = FileHeader(out);
    subset.add_bundles(1);
    ExpectRefused(subset, out, /*subset=*/true);
  }
  // The server keeps serving, and overwrite still replaces.
  const std::string out = Inputs().output_dir + "/idem-diff.fits";
  v1::ExtractHeader h = FileHeader(out);
  h.mutable_params()->set_no_scores(true);
  h.set_overwrite(true);
  auto replaced = Run(h);
  ASSERT_TRUE(replaced.ok()) << replaced.status();
  EXPECT_EQ(replaced->server_output_sha256(), server::Sha256Hex(ReadBytes(out)));
}

// (d): a file at the name that is not the frame: not FITS, truncated, one byte changed,
// the uncompressed frame under a .gz name, a corrupt or cut gzip stream.
TEST_F(IdempotentOutputTest, AnExistingFileThatIsNotTheFrameIsRefusedNotCrashed) {
  const std::string ref = Out("ref.fits"), ref_gz = Out("ref.fits.gz");
  ASSERT_TRUE(Run(FileHeader(ref)).ok());
  ASSERT_TRUE(Run(FileHeader(ref_gz)).ok());
  const std::string frame = ReadBytes(ref), gz = ReadBytes(ref_gz);
  std::string flipped = frame;
  flipped[flipped.size() / 2] ^= 0x01;  // a data byte, the size unchanged
  std::string datasum = frame;           // the first DATASUM's value, its comment left
  const std::size_t card = datasum.find("DATASUM = '");
  ASSERT_NE(card, std::string::npos);
  datasum[card + 12] = datasum[card + 12] == '1' ? '2' : '1';
  std::string gz_corrupt = gz;
  gz_corrupt[gz.size() / 2] ^= 0x55;
  struct Case {
    const char* what;
    const char* name;
    std::string bytes;
  };
  const std::vector<Case> cases = {
      {"not FITS", "bad-text.fits", "not a frame\n"},
      {"empty", "bad-empty.fits", ""},
      {"truncated", "bad-cut.fits", frame.substr(0, frame.size() / 2)},
      {"longer", "bad-long.fits", frame + std::string(2880, ' ')},
      {"one data byte", "bad-byte.fits", flipped},
      {"DATASUM value", "bad-datasum.fits", datasum},
      {"plain FITS under .gz", "bad-plain.fits.gz", frame},
      {"not gzip", "bad-text.fits.gz", "not a frame\n"},
      {"corrupt gzip", "bad-corrupt.fits.gz", gz_corrupt},
      {"cut gzip", "bad-cut.fits.gz", gz.substr(0, gz.size() - 100)},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string out = Out(c.name);
    ASSERT_TRUE(WriteBytes(out, c.bytes));
    ExpectRefused(FileHeader(out), out);
  }
  // A CHECKSUM value that differs is a checksum date (it covers the comments): kept.
  std::string checksum = frame;
  const std::size_t at = checksum.find("CHECKSUM= '");
  ASSERT_NE(at, std::string::npos);
  checksum[at + 11] = checksum[at + 11] == 'A' ? 'B' : 'A';
  const std::string out = Out("checksum.fits");
  ASSERT_TRUE(WriteBytes(out, checksum));
  auto kept = Run(FileHeader(out));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->server_output_sha256(), server::Sha256Hex(checksum));
}

// (e): frame and model: both kept; one missing is written beside the other kept; a
// different one anywhere refuses the request before anything is written.
TEST_F(IdempotentOutputTest, FrameAndModelTogether) {
  const std::string out = Out("pair.fits"), model = Out("pair-model.fits");
  auto first = Run(FileHeader(out, model));
  ASSERT_TRUE(first.ok()) << first.status();
  const FileState frame0 = StateOf(out), model0 = StateOf(model);
  NextSecond();
  auto again = Run(FileHeader(out, model));
  ASSERT_TRUE(again.ok()) << again.status();
  ExpectSameAnswer(*first, *again);
  EXPECT_TRUE(StateOf(out) == frame0);
  EXPECT_TRUE(StateOf(model) == model0);
  // The model lost (the first attempt died between the two renames): written now, the
  // frame kept.
  ASSERT_EQ(std::remove(model.c_str()), 0);
  auto healed = Run(FileHeader(out, model));
  ASSERT_TRUE(healed.ok()) << healed.status();
  EXPECT_TRUE(StateOf(out) == frame0);
  EXPECT_EQ(healed->server_output_sha256(), first->server_output_sha256());
  EXPECT_EQ(healed->server_model_sha256(), server::Sha256Hex(ReadBytes(model)));
  EXPECT_EQ(healed->server_model_bytes(), first->server_model_bytes());
  // A stale model and no frame: refused, and the frame is not written either.
  ASSERT_EQ(std::remove(out.c_str()), 0);
  ASSERT_TRUE(WriteBytes(model, "stale model"));
  ExpectRefused(FileHeader(out, model), model);
  EXPECT_FALSE(std::filesystem::exists(out));
  // A different frame and no model: the model is not written.
  ASSERT_TRUE(WriteBytes(out, "other frame"));
  ASSERT_EQ(std::remove(model.c_str()), 0);
  ExpectRefused(FileHeader(out, model), out);
  EXPECT_FALSE(std::filesystem::exists(model));
}

// Two identical requests at once: whichever renames second finds the first's file
// (RENAME_NOREPLACE) and keeps it; both get the same answer.
TEST_F(IdempotentOutputTest, ConcurrentIdenticalRequestsBothSucceed) {
  const std::string out = Out("race.fits.gz");
  absl::StatusOr<v1::ExtractSummary> a, b;
  std::thread other([&] {
    auto c = Connect(*server_);
    a = c->ExtractToServerFile(FileHeader(out), nullptr, false);
  });
  b = Run(FileHeader(out));
  other.join();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ExpectSameAnswer(*a, *b);
  EXPECT_EQ(a->server_output_sha256(), server::Sha256Hex(ReadBytes(out)));
}

// (f): the reply lost after the file was written: the server dies just after the rename
// (a test preload SIGKILLs it there); SpexdClient::ExtractToServerFile retries the
// UNAVAILABLE on its own, reaches the restarted server, and gets the first file named.
TEST(LostReplyTest, TheClientRetryAfterTheServerDiedPastTheRenameSucceeds) {
  const std::string out_dir = MakeTempDir();
  const std::string out = out_dir + "/lost.fits";
  const int port = PickFreePort();
  ASSERT_GT(port, 0);
  const std::string listen = absl::StrCat("127.0.0.1:", port);
  const std::vector<std::string> args = {"--output_roots=" + out_dir,
                                         "--preload_psfs=" + Inputs().psf_path};
  std::string asan = "verify_asan_link_order=0";  // the preload precedes ASan's runtime
  if (const char* old = getenv("ASAN_OPTIONS")) asan = absl::StrCat(old, ":", asan);
  auto dying = std::make_unique<SpawnedServer>(
      args,
      std::vector<std::string>{absl::StrCat("LD_PRELOAD=", SPEXD_FS_FAULT_LIB),
                               "SPEXD_FAULT=kill_after_rename", "SPEXD_FAULT_DIR=" + out_dir,
                               "ASAN_OPTIONS=" + asan},
      listen);
  ASSERT_EQ(dying->WaitForPort(30), port) << dying->Log();
  client::ClientOptions o;
  o.target = listen;
  o.max_attempts = 100;
  o.initial_backoff_seconds = 0.1;
  o.max_backoff_seconds = 0.3;
  o.call_deadline_seconds = 30;
  o.extract_deadline_seconds = 120;
  auto c = client::SpexdClient::Create(o);
  ASSERT_TRUE(c.ok()) << c.status();
  v1::ExtractHeader h = SmallHeader(server::Sha256Hex(Inputs().psf_bytes));
  h.set_server_path(Inputs().frame_path);
  h.set_server_output_path(out);
  absl::StatusOr<v1::ExtractSummary> result = absl::UnknownError("not run");
  std::thread call([&] { result = (*c)->ExtractToServerFile(h, nullptr, false); });
  EXPECT_EQ(dying->WaitForExit(60), 128 + SIGKILL) << dying->Log();
  // The file is in place, and no reply went out.
  const FileState written = StateOf(out);
  EXPECT_FALSE(written.bytes.empty()) << "the first server did not write the frame";
  auto restarted = std::make_unique<SpawnedServer>(args, std::vector<std::string>{}, listen);
  ASSERT_EQ(restarted->WaitForPort(30), port) << restarted->Log();
  call.join();
  ASSERT_TRUE(result.ok()) << result.status() << "\n" << restarted->Log();
  EXPECT_EQ(result->server_output_path(), out);
  EXPECT_EQ(result->server_output_bytes(), static_cast<int64_t>(written.bytes.size()));
  EXPECT_EQ(result->server_output_sha256(), server::Sha256Hex(written.bytes));
  EXPECT_TRUE(StateOf(out) == written);
  EXPECT_TRUE(absl::StrContains(restarted->Log(), "output_already_identical"))
      << restarted->Log();
}

}  // namespace
}  // namespace spexd::testing
