# cmake -DSOURCE_DIR=... -P CheckCoreBoundary.cmake
# Fails (listing every offence) when the rooms of core/ are crossed the wrong way:
#  1. a file of cuda/, server/, client/ or examples/ includes a header of a room's
#     internal part (core/<room>/internal/): those are for core itself and its tests;
#  2. a public header of core (core/<room>/*.h) includes an internal one, which would
#     hand the internal header to every module that includes the public one.
# Run by ctest (core_include_boundary) on the tree, and on fixtures that must fail.
include(${CMAKE_CURRENT_LIST_DIR}/CoreIncludes.cmake)

# Appends to `offences` (in the caller's scope) every internal header FILE includes,
# each described as "<who> includes core internal header <header>".
function(spexd_internal_includes file who)
  spexd_core_includes(${SOURCE_DIR}/${file} inc)
  foreach(h IN LISTS inc)
    if(h MATCHES "^core/[^/]+/internal/")
      list(APPEND offences "${who} includes core internal header ${h}")
    endif()
  endforeach()
  set(offences ${offences} PARENT_SCOPE)
endfunction()

set(offences)
foreach(dir cuda server client examples)
  spexd_code_files(${SOURCE_DIR} ${dir} files)
  foreach(f IN LISTS files)
    spexd_internal_includes(${f} ${f})
  endforeach()
endforeach()
spexd_code_files(${SOURCE_DIR} core core_files)
foreach(f IN LISTS core_files)
  if(f MATCHES "^core/[^/]+/[^/]+\\.h$")
    spexd_internal_includes(${f} "public header ${f}")
  endif()
endforeach()
if(offences)
  list(JOIN offences "\n  " text)
  message(FATAL_ERROR "core room boundary crossed:\n  ${text}\n"
          "Include the room's public header instead (docs/design.md, \"Where things are\").")
endif()
list(LENGTH core_files n)
message(STATUS "core room boundary: clean (${n} core files)")
