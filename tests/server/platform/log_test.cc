#include "server/platform/log.h"

#include <limits>
#include <map>
#include <string>

#include "gtest/gtest.h"

namespace spexd::server {
namespace {

TEST(LogFieldTest, NumberMapIsAJsonObjectWithQuotedKeys) {
  const std::map<std::string, double> stages = {
      {"load", 0.25}, {"output_file", 1.5e-3}, {"odd \"name\"", 2.0}};
  // std::map orders the keys; quotes in a key are escaped.
  EXPECT_EQ(LogField("stages", stages).json(),
            "{\"load\":0.25,\"odd \\\"name\\\"\":2,\"output_file\":0.0015}");
}

TEST(LogFieldTest, NumberMapEmptyAndNonFinite) {
  EXPECT_EQ(LogField("stages", std::map<std::string, double>{}).json(), "{}");
  const std::map<std::string, double> bad = {{"a", std::numeric_limits<double>::infinity()}};
  EXPECT_EQ(LogField("stages", bad).json(), "{\"a\":null}");  // JSON has no infinity
}

}  // namespace
}  // namespace spexd::server
