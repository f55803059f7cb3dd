// Fixture for tests/scripts/unity_names_check.py: a helper that another file also defines,
// and one that hides the shared header's.
namespace spexd::testing {
namespace {

int Helper(int x) {
  return x;
}

bool WaitFor(int seconds) {
  return seconds > 0;
}

}  // namespace
}  // namespace spexd::testing
