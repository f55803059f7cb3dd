#ifndef SPEXD_CORE_VERSION_H_
#define SPEXD_CORE_VERSION_H_

namespace spexd::core {
inline constexpr const char* kSpexdVersion = "0.1.0";
}  // namespace spexd::core

#endif  // SPEXD_CORE_VERSION_H_
