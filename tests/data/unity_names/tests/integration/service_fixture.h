// Fixture for tests/scripts/unity_names_check.py: a shared test header.
namespace spexd::testing {
bool WaitFor(int seconds);
}  // namespace spexd::testing
