// DataRoots' pending outputs: the temporary an output is written to, its commit under
// the overwrite rules, a file already at the name, and the directory moved meanwhile.
#include "server/platform/data_roots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "core/base/write_fully.h"
#include "gtest/gtest.h"
#include "tests/server/platform/scratch_files.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

// The progressive frame file's temporary: both kinds, named and
// unnamed, leave nothing when dropped uncommitted (an error or a cancelled job), and a
// commit follows the overwrite rules of WriteFile, including for a file that appeared
// while the temporary was being written.
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
