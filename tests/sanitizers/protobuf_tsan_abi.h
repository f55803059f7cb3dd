// Force-included into every C++ file of a -DSPEXD_SANITIZE=thread build (CMakeLists.txt).
//
// protobuf 3.21's map_field.h gives MapFieldBase two extra members (seq1_, seq2_, ahead of
// arena_, repeated_field_, mutex_ and state_) when __SANITIZE_THREAD__ is defined. Debian's
// libprotobuf, and the generated code of spexd_proto (left uninstrumented), were compiled
// without it, so an instrumented file would see every map field at other offsets than the
// library: a TSan build crashed in protobuf::Map (ExtractionSummaryToProto's
// stage_seconds). The header is therefore read once here with the macro hidden, so that
// every file sees the library's layout. Everything else keeps __SANITIZE_THREAD__: the
// standard library's and Abseil's configuration are read first, with it.
#ifndef SPEXD_TESTS_SANITIZERS_PROTOBUF_TSAN_ABI_H_
#define SPEXD_TESTS_SANITIZERS_PROTOBUF_TSAN_ABI_H_

#ifdef __cplusplus
#include <atomic>
#include <memory>

#include "absl/base/config.h"

#pragma push_macro("__SANITIZE_THREAD__")
#undef __SANITIZE_THREAD__
#include <google/protobuf/map_field.h>
#pragma pop_macro("__SANITIZE_THREAD__")
#endif

#endif  // SPEXD_TESTS_SANITIZERS_PROTOBUF_TSAN_ABI_H_
