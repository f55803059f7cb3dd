// Fixture for tests/scripts/unity_names_check.py: the same name in another namespace is no
// clash; the same name in the same one is.
namespace spexd::other {
namespace {

int Helper(int x) {
  return x + 1;
}

}  // namespace
}  // namespace spexd::other

namespace spexd::testing {
namespace {

struct Helper {
  int x;
};

}  // namespace
}  // namespace spexd::testing
