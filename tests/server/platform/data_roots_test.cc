#include "server/platform/data_roots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "core/base/write_fully.h"
#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

void Touch(const std::string& path, const std::string& text = "data") {
  std::ofstream(path) << text;
}

int CountEntries(const std::string& dir) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) n += e.exists() ? 1 : 0;
  return n;
}

class DataRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir();
    outside_ = testing::MakeTempDir();
    mkdir((root_ + "/sub").c_str(), 0755);
    Touch(root_ + "/sub/a.fits");
    Touch(outside_ + "/secret.fits");
    auto roots = DataRoots::Create({root_});
    ASSERT_TRUE(roots.ok());
    roots_ = *roots;
  }
  std::string root_, outside_;
  DataRoots roots_;
};

TEST_F(DataRootsTest, ReadsFilesInsideARoot) {
  auto f = roots_.ReadFile(root_ + "/sub/a.fits", 100);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->bytes, "data");
  EXPECT_EQ(f->path, root_ + "/sub/a.fits");
}

TEST_F(DataRootsTest, RefusesPathsOutsideDotDotRelativeAndSymlinkEscapes) {
  EXPECT_EQ(roots_.ReadFile(outside_ + "/secret.fits", 100).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(roots_.ReadFile(root_ + "/sub/../sub/a.fits", 100).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(roots_.ReadFile("sub/a.fits", 100).status().code(), absl::StatusCode::kInvalidArgument);
  // A file symlink and a directory symlink that lead out of the root.
  ASSERT_EQ(symlink((outside_ + "/secret.fits").c_str(), (root_ + "/link.fits").c_str()), 0);
  ASSERT_EQ(symlink(outside_.c_str(), (root_ + "/dirlink").c_str()), 0);
  EXPECT_EQ(roots_.ReadFile(root_ + "/link.fits", 100).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(roots_.ReadFile(root_ + "/dirlink/secret.fits", 100).status().code(),
            absl::StatusCode::kPermissionDenied);
  // A symlink that stays inside is fine.
  ASSERT_EQ(symlink((root_ + "/sub/a.fits").c_str(), (root_ + "/inside.fits").c_str()), 0);
  EXPECT_TRUE(roots_.ReadFile(root_ + "/inside.fits", 100).ok());
  // A prefix that is not a path component is outside: /tmp/x-root2 vs /tmp/x-root.
  const std::string sibling = root_ + "2";
  mkdir(sibling.c_str(), 0755);
  Touch(sibling + "/b.fits");
  EXPECT_EQ(roots_.ReadFile(sibling + "/b.fits", 100).status().code(),
            absl::StatusCode::kPermissionDenied);
  unlink((sibling + "/b.fits").c_str());
  rmdir(sibling.c_str());
}

TEST_F(DataRootsTest, MissingTooLargeAndDirectories) {
  EXPECT_EQ(roots_.ReadFile(root_ + "/nope.fits", 100).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(roots_.ReadFile(root_ + "/sub/a.fits", 3).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(roots_.ReadFile(root_ + "/sub", 100).ok());
}

TEST_F(DataRootsTest, NoRootsRefuseEverything) {
  auto none = DataRoots::Create({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->ReadFile(root_ + "/sub/a.fits", 100).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(DataRoots::Create({root_ + "/does-not-exist"}).ok());
  EXPECT_FALSE(DataRoots::Create({root_ + "/sub/a.fits"}).ok());
}

TEST_F(DataRootsTest, OutputPaths) {
  const DataRoots::WritePolicy fresh;
  auto ok = roots_.CheckOutput(root_ + "/sub/out.fits", fresh);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, root_ + "/sub/out.fits");
  EXPECT_EQ(roots_.CheckOutput(outside_ + "/out.fits", fresh).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(roots_.CheckOutput(root_ + "/missing/out.fits", fresh).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(roots_.CheckOutput(root_ + "/sub/", fresh).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(symlink(outside_.c_str(), (root_ + "/out-dir").c_str()), 0);
  EXPECT_EQ(roots_.WriteFile(root_ + "/out-dir/x.fits", "x", fresh).status().code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_EQ(symlink((outside_ + "/secret.fits").c_str(), (root_ + "/sub/trap.fits").c_str()), 0);
  DataRoots::WritePolicy overwrite;
  overwrite.overwrite = true;
  EXPECT_EQ(roots_.WriteFile(root_ + "/sub/trap.fits", "x", overwrite).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(testing::ReadBytes(outside_ + "/secret.fits"), "data");
}

// Outside the roots, the answer must not tell whether a file exists
// (it was NOT_FOUND for a missing file, PERMISSION_DENIED for an existing one: an oracle
// for /etc, /proc/<pid>, ...). Refused lexically before any lookup; a symlink inside a
// root that leads out gets the same answer for a missing and an existing target.
TEST_F(DataRootsTest, OutsideTheRootsMissingAndExistingFilesGetTheSameAnswer) {
  const auto code = [&](const std::string& path) { return roots_.ReadFile(path, 100).status().code(); };
  const auto denied = absl::StatusCode::kPermissionDenied;
  for (const std::string& path :
       {std::string("/etc/passwd"), std::string("/etc/nonexistent"), std::string("/proc/1/environ"),
        std::string("/proc/999999/environ"), outside_ + "/secret.fits", outside_ + "/missing.fits",
        outside_ + "/no/such/dir/x.fits", root_ + "2/x.fits", std::string("/"),
        root_ + "//..hidden/../x"}) {
    if (path.find("/../") != std::string::npos) {
      EXPECT_EQ(code(path), absl::StatusCode::kInvalidArgument) << path;  // `..` stays malformed
    } else {
      EXPECT_EQ(code(path), denied) << path;
    }
  }
  // Symlinks inside the root leading out: existing and missing targets alike.
  ASSERT_EQ(symlink((outside_ + "/secret.fits").c_str(), (root_ + "/to-file").c_str()), 0);
  ASSERT_EQ(symlink((outside_ + "/missing.fits").c_str(), (root_ + "/dangling").c_str()), 0);
  ASSERT_EQ(symlink(outside_.c_str(), (root_ + "/to-dir").c_str()), 0);
  ASSERT_EQ(symlink("../../../../../../../../../etc/nonexistent", (root_ + "/relative").c_str()), 0);
  for (const std::string& path : {root_ + "/to-file", root_ + "/dangling", root_ + "/to-dir/secret.fits",
                                  root_ + "/to-dir/missing.fits", root_ + "/to-dir/a/b.fits",
                                  root_ + "/relative"}) {
    EXPECT_EQ(code(path), denied) << path;
  }
  // Inside, a missing file is still NOT_FOUND, however the path is spelled or linked.
  ASSERT_EQ(symlink((root_ + "/sub").c_str(), (root_ + "/sub-link").c_str()), 0);
  for (const std::string& path : {root_ + "/nope.fits", root_ + "//sub/./nope.fits",
                                  root_ + "/sub-link/nope.fits", root_ + "/sub/a.fits/x"}) {
    EXPECT_EQ(code(path), absl::StatusCode::kNotFound) << path;
  }
  EXPECT_TRUE(roots_.ReadFile(root_ + "//sub/./a.fits", 100).ok());
  // Output paths: a missing directory outside is as much outside as an existing one.
  const DataRoots::WritePolicy fresh;
  EXPECT_EQ(roots_.CheckOutput(outside_ + "/out.fits", fresh).status().code(), denied);
  EXPECT_EQ(roots_.CheckOutput(outside_ + "/no-dir/out.fits", fresh).status().code(), denied);
  EXPECT_EQ(roots_.CheckOutput("/etc/nonexistent/out.fits", fresh).status().code(), denied);
  EXPECT_EQ(roots_.CheckOutput(root_ + "/to-dir/no-dir/out.fits", fresh).status().code(), denied);
  EXPECT_EQ(roots_.CheckOutput(root_ + "/no-dir/out.fits", fresh).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(DataRootsTest, ARootGivenThroughASymlinkTakesPathsSpelledEitherWay) {
  const std::string alias = outside_ + "/alias";
  ASSERT_EQ(symlink(root_.c_str(), alias.c_str()), 0);
  auto roots = DataRoots::Create({alias});
  ASSERT_TRUE(roots.ok()) << roots.status();
  EXPECT_TRUE(roots->ReadFile(alias + "/sub/a.fits", 100).ok());
  EXPECT_TRUE(roots->ReadFile(root_ + "/sub/a.fits", 100).ok());
  EXPECT_EQ(roots->ReadFile(alias + "/sub/nope.fits", 100).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(roots->ReadFile(outside_ + "/secret.fits", 100).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST_F(DataRootsTest, WritesAtomicallyAndNeverReplacesWithoutOverwrite) {
  const std::string out = root_ + "/sub/out.fits";
  auto written = roots_.WriteFile(out, "first", {});
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_EQ(testing::ReadBytes(out), "first");
  // An existing file (here the request's own input) is refused by default...
  EXPECT_EQ(roots_.CheckOutput(root_ + "/sub/a.fits", {}).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(roots_.WriteFile(out, "second", {}).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(testing::ReadBytes(out), "first");
  // ...replaced with overwrite...
  DataRoots::WritePolicy overwrite;
  overwrite.overwrite = true;
  ASSERT_TRUE(roots_.WriteFile(out, "second", overwrite).ok());
  EXPECT_EQ(testing::ReadBytes(out), "second");
  // ...but never when it is protected (the input or the PSF of the request).
  auto input = roots_.Open(root_ + "/sub/a.fits", 100);
  ASSERT_TRUE(input.ok());
  auto id = DataRoots::IdOf(input->fd());
  ASSERT_TRUE(id.ok());
  overwrite.protected_.push_back(*id);
  EXPECT_EQ(roots_.WriteFile(root_ + "/sub/a.fits", "gone", overwrite).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(testing::ReadBytes(root_ + "/sub/a.fits"), "data");
  // No temporary files left behind.
  EXPECT_EQ(CountEntries(root_ + "/sub"), 2);
}

TEST_F(DataRootsTest, AFifoIsRefusedWithoutBlocking) {
  const std::string fifo = root_ + "/sub/pipe.fits";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  // Unblocks a reader stuck in open() after 2 s (the old code waited for a writer
  // forever), so that a regression fails on time instead of hanging the test.
  std::atomic<bool> done{false};
  std::thread unblock([&] {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    while (!done.load()) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(roots_.Open(fifo, 100).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(roots_.ReadFile(fifo, 100).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.5);
  done.store(true);
  unblock.join();
  EXPECT_EQ(roots_.WriteFile(fifo, "x", {}).status().code(), absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace spexd::server

namespace spexd::server {
namespace {

// The progressive frame file's temporary: both kinds, named and
// unnamed, leave nothing when dropped uncommitted (an error or a cancelled job), and a
// commit follows the overwrite rules of WriteFile, including for a file that appeared
// while the temporary was being written.
// Output roots are probed at startup: a probe file created, written and removed.
TEST(DataRootsWritableTest, ProbesEachRootAndLeavesNothing) {
  const std::string root = testing::MakeTempDir();
  auto roots = DataRoots::Create({root}, "--output_roots");
  ASSERT_TRUE(roots.ok());
  EXPECT_TRUE(roots->CheckWritable().ok()) << roots->CheckWritable();
  EXPECT_EQ(CountEntries(root), 0);
  auto proc = DataRoots::Create({root, "/proc"}, "--output_roots");
  ASSERT_TRUE(proc.ok()) << proc.status();
  const absl::Status st = proc->CheckWritable();
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("--output_roots /proc is not writable"), absl::string_view::npos)
      << st;
  if (::geteuid() != 0) {  // root writes a 0555 directory anyway
    const std::string ro = testing::MakeTempDir() + "/ro";
    ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
    auto read_only = DataRoots::Create({ro}, "--output_roots");
    ASSERT_TRUE(read_only.ok());
    EXPECT_EQ(read_only->CheckWritable().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(PendingOutputTest, DroppedLeavesNothingAndCommitKeepsTheRules) {
  const std::string root = testing::MakeTempDir();
  auto roots = DataRoots::Create({root});
  ASSERT_TRUE(roots.ok());
  const std::string out = root + "/frame.fits";
  for (bool unnamed : {true, false}) {
    SCOPED_TRACE(unnamed ? "unnamed temporary" : "named temporary");
    {
      auto pending = roots->CreateOutput(out, {}, unnamed);
      ASSERT_TRUE(pending.ok()) << pending.status();
      // (A filesystem without O_TMPFILE gets the named kind either way.)
      if (!unnamed) {
        EXPECT_TRUE(pending->named_temporary());
      }
      ASSERT_EQ(::pwrite(pending->fd(), "half", 4, 0), 4);
      EXPECT_EQ(CountEntries(root), pending->named_temporary() ? 1 : 0);
      auto moved = std::move(*pending);                 // moves keep one owner
      EXPECT_EQ(pending->fd(), -1);
    }
    EXPECT_EQ(CountEntries(root), 0);
    // Committed: the name, with the bytes written at their offsets.
    auto pending = roots->CreateOutput(out, {}, unnamed);
    ASSERT_TRUE(pending.ok()) << pending.status();
    ASSERT_EQ(::pwrite(pending->fd(), "tail", 4, 4), 4);
    ASSERT_EQ(::pwrite(pending->fd(), "head", 4, 0), 4);
    auto path = pending->Commit();
    ASSERT_TRUE(path.ok()) << path.status();
    EXPECT_EQ(*path, out);
    EXPECT_EQ(testing::ReadBytes(out), "headtail");
    EXPECT_EQ(pending->Commit().status().code(), absl::StatusCode::kFailedPrecondition);
    // A file that appears while the temporary is written is not replaced without overwrite.
    ASSERT_EQ(::unlink(out.c_str()), 0);
    auto racing = roots->CreateOutput(out, {}, unnamed);
    ASSERT_TRUE(racing.ok()) << racing.status();
    Touch(out, "theirs");
    EXPECT_EQ(racing->Commit().status().code(), absl::StatusCode::kAlreadyExists);
    EXPECT_EQ(testing::ReadBytes(out), "theirs");
    EXPECT_EQ(CountEntries(root), 1);
    // With overwrite it is.
    DataRoots::WritePolicy overwrite;
    overwrite.overwrite = true;
    auto replacing = roots->CreateOutput(out, overwrite, unnamed);
    ASSERT_TRUE(replacing.ok()) << replacing.status();
    ASSERT_EQ(::pwrite(replacing->fd(), "ours", 4, 0), 4);
    ASSERT_TRUE(replacing->Commit().ok());
    EXPECT_EQ(testing::ReadBytes(out), "ours");
    EXPECT_EQ(CountEntries(root), 1);
    ASSERT_EQ(::unlink(out.c_str()), 0);
  }
  // The output rules apply at creation: outside the roots, an existing file.
  EXPECT_EQ(roots->CreateOutput(testing::MakeTempDir() + "/x.fits", {}).status().code(),
            absl::StatusCode::kPermissionDenied);
  Touch(out);
  EXPECT_EQ(roots->CreateOutput(out, {}).status().code(), absl::StatusCode::kAlreadyExists);
}

// A file already at the name, with keep_same (a retried request, docs/service.md): not
// refused up front; KeepExisting (and a commit that finds one created meanwhile) hands
// it to the caller's check through a confined read-only descriptor, keeps it untouched
// and drops the pending output when the check accepts it, and never replaces it.
TEST(PendingOutputTest, KeepExistingAsksTheCheckAndNeverReplaces) {
  const std::string root = testing::MakeTempDir();
  auto roots = DataRoots::Create({root});
  ASSERT_TRUE(roots.ok());
  const std::string out = root + "/frame.fits";
  DataRoots::WritePolicy keep;
  keep.keep_same = true;
  // The check: the file holds `want` (read through the descriptor it is given).
  auto holds = [](const std::string& want) {
    return [want](int fd) -> absl::Status {
      char buf[64] = {0};
      const ssize_t n = ::pread(fd, buf, sizeof buf, 0);
      if (n >= 0 && std::string(buf, static_cast<std::size_t>(n)) == want) {
        return absl::OkStatus();
      }
      return absl::AlreadyExistsError("different");
    };
  };
  for (bool unnamed : {true, false}) {
    SCOPED_TRACE(unnamed ? "unnamed temporary" : "named temporary");
    Touch(out, "ours");
    struct stat before {};
    ASSERT_EQ(::stat(out.c_str(), &before), 0);
    ASSERT_TRUE(roots->CheckOutput(out, keep).ok());  // not refused up front
    {  // The same: kept, this output dropped, nothing else left.
      auto pending = roots->CreateOutput(out, keep, unnamed);
      ASSERT_TRUE(pending.ok()) << pending.status();
      ASSERT_EQ(::pwrite(pending->fd(), "new!", 4, 0), 4);
      auto kept = pending->KeepExisting(holds("ours"));
      ASSERT_TRUE(kept.ok()) << kept.status();
      EXPECT_TRUE(*kept);
      EXPECT_EQ(pending->fd(), -1);
      EXPECT_EQ(CountEntries(root), 1);
    }
    struct stat after {};
    ASSERT_EQ(::stat(out.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino);
    EXPECT_EQ(testing::ReadBytes(out), "ours");
    {  // Different: the check's error; the output stays pending (the caller drops it).
      auto pending = roots->CreateOutput(out, keep, unnamed);
      ASSERT_TRUE(pending.ok()) << pending.status();
      EXPECT_EQ(pending->KeepExisting(holds("other")).status().code(),
                absl::StatusCode::kAlreadyExists);
      EXPECT_GE(pending->fd(), 0);
      // ...and a commit never replaces the file.
      EXPECT_EQ(pending->Commit(holds("other")).status().code(), absl::StatusCode::kAlreadyExists);
    }
    EXPECT_EQ(testing::ReadBytes(out), "ours");
    EXPECT_EQ(CountEntries(root), 1);
    // A file that appears after KeepExisting: the commit's rename leaves it and asks.
    ASSERT_EQ(::unlink(out.c_str()), 0);
    {
      auto pending = roots->CreateOutput(out, keep, unnamed);
      ASSERT_TRUE(pending.ok()) << pending.status();
      auto none = pending->KeepExisting(holds("ours"));
      ASSERT_TRUE(none.ok());
      EXPECT_FALSE(*none);
      Touch(out, "ours");
      bool kept = false;
      auto path = pending->Commit(holds("ours"), &kept);
      ASSERT_TRUE(path.ok()) << path.status();
      EXPECT_EQ(*path, out);
      EXPECT_TRUE(kept);
      EXPECT_EQ(CountEntries(root), 1);
    }
    // A file changed while the check reads it: ABORTED, not kept.
    {
      auto pending = roots->CreateOutput(out, keep, unnamed);
      ASSERT_TRUE(pending.ok());
      auto changed = pending->KeepExisting([&](int) {
        std::ofstream(out, std::ios::app) << "+";
        return absl::OkStatus();
      });
      EXPECT_EQ(changed.status().code(), absl::StatusCode::kAborted) << changed.status();
    }
    ASSERT_EQ(::unlink(out.c_str()), 0);
    EXPECT_EQ(CountEntries(root), 0);
  }
  // Not a regular file at the name (a symlink, here to a file inside the root): refused
  // before the check is asked, and the link is never followed.
  Touch(root + "/target.fits", "ours");
  ASSERT_EQ(::symlink((root + "/target.fits").c_str(), out.c_str()), 0);
  EXPECT_EQ(roots->CheckOutput(out, keep).status().code(), absl::StatusCode::kPermissionDenied);
  ASSERT_EQ(::unlink(out.c_str()), 0);
  auto pending = roots->CreateOutput(out, keep);
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(::symlink((root + "/target.fits").c_str(), out.c_str()), 0);
  bool asked = false;
  auto link = pending->KeepExisting([&](int) {
    asked = true;
    return absl::OkStatus();
  });
  EXPECT_EQ(link.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_FALSE(asked);
  // With overwrite there is nothing to keep: the file is replaced at the commit.
  ASSERT_EQ(::unlink(out.c_str()), 0);
  Touch(out, "ours");
  keep.overwrite = true;
  auto replacing = roots->CreateOutput(out, keep);
  ASSERT_TRUE(replacing.ok());
  auto kept = replacing->KeepExisting(holds("ours"));
  ASSERT_TRUE(kept.ok());
  EXPECT_FALSE(*kept);
}

// Temporaries are never at a name another client can create first (the output roots are
// shared): files at every name the pid-and-counter scheme would give (".frame.fits.tmp-
// <pid>-<n>") neither fail the output nor are removed, named temporary or not.
TEST(PendingOutputTest, FilesAtGuessableTemporaryNamesAreNeitherFatalNorRemoved) {
  const std::string root = testing::MakeTempDir();
  auto roots = DataRoots::Create({root});
  ASSERT_TRUE(roots.ok());
  const std::string out = root + "/frame.fits";
  constexpr int kPlanted = 512;  // more than this process's outputs before here
  for (int n = 0; n < kPlanted; ++n) {
    Touch(absl::StrCat(root, "/.frame.fits.tmp-", ::getpid(), "-", n), "theirs");
  }
  DataRoots::WritePolicy overwrite;
  overwrite.overwrite = true;
  for (bool unnamed : {true, false}) {
    SCOPED_TRACE(unnamed ? "unnamed temporary" : "named temporary");
    for (int i = 0; i < 3; ++i) {
      auto pending = roots->CreateOutput(out, overwrite, unnamed);
      ASSERT_TRUE(pending.ok()) << pending.status();
      ASSERT_EQ(::pwrite(pending->fd(), "ours", 4, 0), 4);
      auto path = pending->Commit();
      ASSERT_TRUE(path.ok()) << path.status();
      EXPECT_EQ(testing::ReadBytes(out), "ours");
    }
    // Dropped uncommitted: only its own temporary goes.
    ASSERT_TRUE(roots->CreateOutput(out, overwrite, unnamed).ok());
  }
  for (int n = 0; n < kPlanted; ++n) {
    ASSERT_EQ(testing::ReadBytes(absl::StrCat(root, "/.frame.fits.tmp-", ::getpid(), "-", n)),
              "theirs")
        << n;
  }
  EXPECT_EQ(CountEntries(root), kPlanted + 1);
}

// Write failures for lack of space are the server's disk, not a bug: RESOURCE_EXHAUSTED.
// The output directory renamed while a file is written, and a symlink (to another
// directory, or to the moved one) or nothing put at its old name: the file's name in the
// reply would not hold it (the writes go through the directory opened once). The commit
// refuses (ABORTED) and leaves no file in either place; a kept existing file likewise.
TEST(PendingOutputTest, ADirectoryMovedWhileTheFileIsWrittenIsNotNamed) {
  const std::string root = testing::MakeTempDir();
  auto roots = DataRoots::Create({root});
  ASSERT_TRUE(roots.ok());
  const std::string dir = root + "/night", moved = root + "/night.old", other = root + "/other";
  ASSERT_EQ(::mkdir(other.c_str(), 0755), 0);
  enum class Swap { kSymlinkElsewhere, kSymlinkToMoved, kNothing };
  for (Swap swap : {Swap::kSymlinkElsewhere, Swap::kSymlinkToMoved, Swap::kNothing}) {
    for (bool unnamed : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "swap " << static_cast<int>(swap) << ", "
                                        << (unnamed ? "unnamed" : "named") << " temporary");
      ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
      auto pending = roots->CreateOutput(dir + "/frame.fits", {}, unnamed);
      ASSERT_TRUE(pending.ok()) << pending.status();
      ASSERT_EQ(::pwrite(pending->fd(), "data", 4, 0), 4);
      ASSERT_EQ(::rename(dir.c_str(), moved.c_str()), 0);
      if (swap == Swap::kSymlinkElsewhere) {
        ASSERT_EQ(::symlink(other.c_str(), dir.c_str()), 0);
      } else if (swap == Swap::kSymlinkToMoved) {
        ASSERT_EQ(::symlink(moved.c_str(), dir.c_str()), 0);
      }
      auto path = pending->Commit();
      EXPECT_EQ(path.status().code(), absl::StatusCode::kAborted) << path.status();
      EXPECT_NE(path.status().message().find("was moved or replaced"), absl::string_view::npos)
          << path.status();
      EXPECT_EQ(CountEntries(moved), 0);
      EXPECT_EQ(CountEntries(other), 0);
      ::unlink(dir.c_str());
      std::filesystem::remove_all(moved);
    }
  }
  // An existing identical file kept (keep_same) in a directory moved meanwhile: refused too.
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  Touch(dir + "/frame.fits", "same");
  DataRoots::WritePolicy keep;
  keep.keep_same = true;
  auto pending = roots->CreateOutput(dir + "/frame.fits", keep);
  ASSERT_TRUE(pending.ok()) << pending.status();
  ASSERT_EQ(::rename(dir.c_str(), moved.c_str()), 0);
  ASSERT_EQ(::symlink(other.c_str(), dir.c_str()), 0);
  auto kept = pending->KeepExisting([](int) { return absl::OkStatus(); });
  EXPECT_EQ(kept.status().code(), absl::StatusCode::kAborted) << kept.status();
  // In place, the same commit names the file.
  ::unlink(dir.c_str());
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  auto in_place = roots->CreateOutput(dir + "/frame.fits", {});
  ASSERT_TRUE(in_place.ok()) << in_place.status();
  auto path = in_place->Commit();
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, dir + "/frame.fits");
}

TEST(PendingOutputTest, AFullFilesystemIsResourceExhausted) {
  EXPECT_EQ(core::FileWriteError("x", "write", ENOSPC).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(core::FileWriteError("x", "flush", EDQUOT).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(core::FileWriteError("x", "write", EIO).code(), absl::StatusCode::kInternal);
  // /dev/full answers every write with ENOSPC.
  const int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) GTEST_SKIP() << "no /dev/full";
  const absl::Status st = core::WriteFully(fd, "abc", 3, -1, "/dev/full");
  ::close(fd);
  EXPECT_EQ(st.code(), absl::StatusCode::kResourceExhausted) << st;
  EXPECT_NE(st.message().find("No space left on device"), absl::string_view::npos) << st;
}

}  // namespace
}  // namespace spexd::server
