// DataRoots' policy for request paths: reads inside the roots, refusals outside (the same
// answer for a missing and an existing file), output paths checked, whole files written,
// output roots probed at startup (outputs written through a temporary:
// data_roots_output_test.cc).
#include "server/platform/data_roots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fcntl.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"
#include "tests/server/platform/scratch_files.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

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

}  // namespace
}  // namespace spexd::server
