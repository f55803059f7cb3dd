# Helpers shared by BoundaryChecksum.cmake and CheckCoreBoundary.cmake (include()d by
# both, in script mode): how a file names core's headers.
cmake_policy(VERSION 3.25)   # script mode: IN_LIST, POP_FRONT

# OUT: the core headers (paths relative to the source root, "core/<room>/...") that FILE
# includes directly.
function(spexd_core_includes file out)
  file(STRINGS ${file} lines REGEX "^[ \t]*#[ \t]*include[ \t]+\"core/[^\"]+\"")
  set(found)
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"(core/[^\"]+)\".*$" "\\1" h "${line}")
    list(APPEND found ${h})
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

# OUT: the C++/CUDA sources and headers under SOURCE_DIR/DIR (recursively).
function(spexd_code_files source_dir dir out)
  file(GLOB_RECURSE files RELATIVE ${source_dir}
       ${source_dir}/${dir}/*.h ${source_dir}/${dir}/*.cc ${source_dir}/${dir}/*.cu
       ${source_dir}/${dir}/*.cuh)
  set(${out} ${files} PARENT_SCOPE)
endfunction()

# OUT: ROOTS and every core header they include, directly or through each other (only
# headers that exist under SOURCE_DIR; the compiler reports the others).
function(spexd_core_include_closure source_dir roots out)
  set(seen)
  set(todo ${roots})
  while(todo)
    list(POP_FRONT todo h)
    if(h IN_LIST seen OR NOT EXISTS ${source_dir}/${h})
      continue()
    endif()
    list(APPEND seen ${h})
    spexd_core_includes(${source_dir}/${h} more)
    list(APPEND todo ${more})
  endwhile()
  set(${out} ${seen} PARENT_SCOPE)
endfunction()
