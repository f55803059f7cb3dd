#include "server/data_roots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::server {
namespace {

void Touch(const std::string& path, const std::string& text = "data") {
  std::ofstream(path) << text;
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
  auto ok = roots_.ResolveForWrite(root_ + "/sub/out.fits");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(*ok, root_ + "/sub/out.fits");
  EXPECT_EQ(roots_.ResolveForWrite(outside_ + "/out.fits").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(roots_.ResolveForWrite(root_ + "/missing/out.fits").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(roots_.ResolveForWrite(root_ + "/sub/").status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_EQ(symlink(outside_.c_str(), (root_ + "/out-dir").c_str()), 0);
  EXPECT_EQ(roots_.ResolveForWrite(root_ + "/out-dir/x.fits").status().code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_EQ(symlink((outside_ + "/secret.fits").c_str(), (root_ + "/sub/trap.fits").c_str()), 0);
  EXPECT_EQ(roots_.ResolveForWrite(root_ + "/sub/trap.fits").status().code(),
            absl::StatusCode::kPermissionDenied);
}

}  // namespace
}  // namespace spexd::server
