# cmake -DSOURCE_DIR=... -P CheckRoomOrder.cmake
# Fails (listing every offence) when the rooms of cuda/, server/ and client/ are entered
# the wrong way. Each folder's rooms are in order, lowest first (docs/design.md, "Where
# things are"); a file may include headers of its own room and of the rooms before it:
#  1. a header of a room after its own is an upward arrow;
#  2. a header of a room at the same place (client's spexctl/ and tools/) crosses beside;
#  3. a header of another of the three folders crosses folders (the CUDA module, the
#     service and the clients meet only in core/ and proto/);
#  4. a file, or an included header, in no room of its folder has no place in the order;
#  5. within a room, a part includes its whole: x.cc includes a header that includes x.h,
#     directly or not (a job stage that includes the job made of its stages).
# Run by ctest (room_include_order) on the tree, and on a copy with seeded offences that
# must fail (tests/scripts/room_order_test.sh).
include(${CMAKE_CURRENT_LIST_DIR}/CoreIncludes.cmake)

# The rooms of each folder, lowest first; "a|b": two rooms at one place; ".": the files
# directly in the folder.
set(rooms_cuda "kernels;host")
set(rooms_server "platform;state;jobs;rpc;.")
set(rooms_client "lib;spexctl|tools")
set(folders cuda server client)

# OUT_ROOM, OUT_PLACE: the room of PATH ("server/jobs/x.h": jobs) and its place in its
# folder's order; place -1 where the folder has no such room.
function(spexd_room path out_room out_place)
  string(REGEX MATCH "^([^/]+)/(.*)$" _ "${path}")
  set(folder ${CMAKE_MATCH_1})
  set(rest ${CMAKE_MATCH_2})
  if(rest MATCHES "/")
    string(REGEX REPLACE "/.*$" "" room "${rest}")
  else()
    set(room ".")
  endif()
  set(place -1)
  set(i 0)
  foreach(level IN LISTS rooms_${folder})
    string(REPLACE "|" ";" names "${level}")
    if(room IN_LIST names)
      set(place ${i})
    endif()
    math(EXPR i "${i} + 1")
  endforeach()
  set(${out_room} ${room} PARENT_SCOPE)
  set(${out_place} ${place} PARENT_SCOPE)
endfunction()

# OUT: the cuda/, server/ and client/ headers FILE (relative to SOURCE_DIR) includes
# directly; read once per file.
function(spexd_room_includes file out)
  string(MAKE_C_IDENTIFIER "${file}" key)
  get_property(known GLOBAL PROPERTY spexd_room_inc_${key} SET)
  if(NOT known)
    set(found)
    if(EXISTS ${SOURCE_DIR}/${file})
      file(STRINGS ${SOURCE_DIR}/${file} lines
           REGEX "^[ \t]*#[ \t]*include[ \t]+\"(cuda|server|client)/[^\"]+\"")
      foreach(line IN LISTS lines)
        string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]+\"([^\"]+)\".*$" "\\1" h "${line}")
        list(APPEND found ${h})
      endforeach()
    endif()
    set_property(GLOBAL PROPERTY spexd_room_inc_${key} "${found}")
  endif()
  get_property(v GLOBAL PROPERTY spexd_room_inc_${key})
  set(${out} "${v}" PARENT_SCOPE)
endfunction()

# OUT: TRUE when HEADER includes TARGET, directly or through other headers.
function(spexd_reaches header target out)
  set(seen)
  set(todo ${header})
  set(hit FALSE)
  while(todo)
    list(POP_FRONT todo h)
    if(h IN_LIST seen)
      continue()
    endif()
    list(APPEND seen ${h})
    spexd_room_includes(${h} more)
    if(target IN_LIST more)
      set(hit TRUE)
      break()
    endif()
    list(APPEND todo ${more})
  endwhile()
  set(${out} ${hit} PARENT_SCOPE)
endfunction()

set(offences)
set(count 0)
foreach(folder IN LISTS folders)
  spexd_code_files(${SOURCE_DIR} ${folder} files)
  foreach(f IN LISTS files)
    math(EXPR count "${count} + 1")
    spexd_room(${f} room place)
    if(place EQUAL -1)
      list(APPEND offences "${f} is in no room of ${folder}/")
      continue()
    endif()
    # x.cc and x.cu implement x.h (rule 5).
    string(REGEX REPLACE "\\.(cc|cu)$" ".h" own "${f}")
    if(own STREQUAL f OR NOT EXISTS ${SOURCE_DIR}/${own})
      set(own "")
    endif()
    spexd_room_includes(${f} includes)
    foreach(h IN LISTS includes)
      string(REGEX REPLACE "/.*$" "" h_folder "${h}")
      if(NOT h_folder STREQUAL folder)
        list(APPEND offences "${f} includes ${h}, a header of another folder")
        continue()
      endif()
      spexd_room(${h} h_room h_place)
      if(h_place EQUAL -1)
        list(APPEND offences "${f} includes ${h}, which is in no room of ${folder}/")
      elseif(h_place GREATER place)
        list(APPEND offences "${f} (room ${room}) includes ${h} of room ${h_room}, above it")
      elseif(h_place EQUAL place AND NOT h_room STREQUAL room)
        list(APPEND offences "${f} (room ${room}) includes ${h} of room ${h_room}, beside it")
      elseif(own AND NOT h STREQUAL own)
        spexd_reaches(${h} ${own} back)
        if(back)
          list(APPEND offences "${f} includes ${h}, which includes ${own} back")
        endif()
      endif()
    endforeach()
  endforeach()
endforeach()
if(offences)
  list(LENGTH offences n)
  list(JOIN offences "\n  " text)
  message(FATAL_ERROR "room order broken (${n} offences):\n  ${text}\n"
          "Include a file's own room and the rooms before it only, and a whole never from its "
          "parts (docs/design.md, \"Where things are\").")
endif()
message(STATUS "room order: clean (${count} files)")
