#include "core/backend/backend_options.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace spexd::core {
namespace {

// The one table per option: parse and print use the same spellings.
template <typename E, std::size_t N>
absl::StatusOr<E> ParseEnum(absl::string_view what, absl::string_view text,
                            const std::pair<E, const char*> (&names)[N]) {
  std::string accepted;
  for (const auto& [value, name] : names) {
    if (text == name) return value;
    absl::StrAppend(&accepted, accepted.empty() ? "" : " or ", "'", name, "'");
  }
  return absl::InvalidArgumentError(
      absl::StrCat(what, " must be ", accepted, " (got '", text, "')"));
}

template <typename E, std::size_t N>
absl::string_view NameOf(E value, const std::pair<E, const char*> (&names)[N]) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return "?";
}

constexpr std::pair<BackendKind, const char*> kBackendKinds[] = {
    {BackendKind::kCpu, "cpu"}, {BackendKind::kCuda, "cuda"}};
constexpr std::pair<CudaHostWait, const char*> kHostWaits[] = {
    {CudaHostWait::kAuto, "auto"}, {CudaHostWait::kBlock, "block"}};

}  // namespace

absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view text) {
  return ParseEnum("backend", text, kBackendKinds);
}
absl::string_view Name(BackendKind kind) { return NameOf(kind, kBackendKinds); }
absl::string_view Name(CudaHostWait wait) { return NameOf(wait, kHostWaits); }

}  // namespace spexd::core
