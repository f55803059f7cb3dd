// core::IsGzipName against the table the Python client's is_gzip_name is tested with too
// (tests/data/gzip_names.tsv): the two implementations of one rule cannot drift apart.
#include "core/io/gzip_name.h"

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/test_support.h"

namespace spexd::core {
namespace {

TEST(GzipNameTest, FollowsTheSharedTable) {
  std::ifstream table(testing::TestDataPath("gzip_names.tsv"));
  ASSERT_TRUE(table.good());
  std::string line;
  int rows = 0, gzip = 0;
  while (std::getline(table, line)) {
    if (!line.empty() && line[0] == '#') continue;
    const std::size_t tab = line.rfind('\t');
    ASSERT_NE(tab, std::string::npos) << "row without a tab: '" << line << "'";
    const std::string name = line.substr(0, tab), expected = line.substr(tab + 1);
    ASSERT_TRUE(expected == "gzip" || expected == "plain") << line;
    EXPECT_EQ(IsGzipName(name), expected == "gzip") << "'" << name << "'";
    ++rows;
    gzip += expected == "gzip";
  }
  // Both kinds are there, so neither a constant true nor a constant false passes.
  EXPECT_GE(rows, 10);
  EXPECT_GT(gzip, 0);
  EXPECT_GT(rows - gzip, 0);
}

}  // namespace
}  // namespace spexd::core
