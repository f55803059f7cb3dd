// FieldCount<T>(): the number of fields of an aggregate, for compile-time checks that two
// hand-mirrored structs keep the same fields (cuda/host/geometry_state.cc: DevicePatch and
// PatchDesc; tests/proto/extraction_params_convert_test.cc: ExtractionParams and its proto).
// Counts the most initialisers T{...} accepts, so T's fields must be default-constructible
// and none may itself be an aggregate that brace elision would spread over several.
#ifndef SPEXD_CORE_FIELD_COUNT_H_
#define SPEXD_CORE_FIELD_COUNT_H_

#include <cstddef>
#include <utility>

namespace spexd::core {
namespace internal {

struct AnyField {
  template <typename F>
  constexpr operator F() const {
    return F{};
  }
};

template <typename T, std::size_t... I>
constexpr bool InitializableFrom(std::index_sequence<I...>) {
  return requires { T{(static_cast<void>(I), AnyField{})...}; };
}

}  // namespace internal

template <typename T, std::size_t N = 0>
constexpr std::size_t FieldCount() {
  if constexpr (internal::InitializableFrom<T>(std::make_index_sequence<N + 1>())) {
    return FieldCount<T, N + 1>();
  } else {
    return N;
  }
}

}  // namespace spexd::core

#endif  // SPEXD_CORE_FIELD_COUNT_H_
