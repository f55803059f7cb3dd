# SPEXD_STATIC_SPEXCTL: spexctl links gRPC, protobuf, Abseil and the C libraries under them
# (and CFITSIO, zlib, bzip2, libdeflate, ERFA) from Debian's static archives; ISA-L, which
# Debian ships shared only, stays a shared library.
#
# Why: pipeline workers start one `spexctl extract --server ...` per frame, and a start with
# the 93 shared objects of the dynamic link cost ~60 ms of CPU, nearly all of it the dynamic
# loader mapping them and resolving their symbols across that long search list (docs/performance.md,
# "spexctl start-up"). Statically, what is left dynamic is glibc and the GCC runtime.
# CFITSIO's archive calls libcurl for its https/ftps drivers; client/spexctl/cfitsio_without_curl.cc
# stands in (spexctl opens local files only), which drops libcurl-gnutls and its ~30 libraries.
#
# How: CMake names the shared libraries by full path (imported targets), so a link launcher
# (cmake/static_link_launcher.sh) substitutes the archives of the libraries listed here and
# fails when one has none; the spexctl_startup_link test checks the result (no shared
# gRPC/protobuf/Abseil/curl/LAPACK: a static and a shared copy of protobuf or Abseil in one
# process would break their registries).
#
# Off by default in sanitizer builds: the TSan build interposes Abseil's lock functions
# (tests/sanitizers/), which needs the shared Abseil.
set(SPEXD_STATIC_SPEXCTL_NAMES grpc++ grpc gpr upb address_sorting re2 cares ssl crypto protobuf
    z bz2 cfitsio deflate erfa "absl_*")
set(spexd_static_default ON)
set(spexd_static_missing)
foreach(name grpc++ grpc gpr upb address_sorting re2 cares ssl crypto protobuf z bz2 cfitsio
             deflate erfa absl_base absl_strings absl_status absl_synchronization)
  find_library(SPEXD_STATIC_ARCHIVE_${name} NAMES lib${name}.a NO_CACHE)
  if(NOT SPEXD_STATIC_ARCHIVE_${name})
    list(APPEND spexd_static_missing lib${name}.a)
  endif()
endforeach()
if(spexd_static_missing OR SPEXD_SANITIZE)
  set(spexd_static_default OFF)
endif()
option(SPEXD_STATIC_SPEXCTL "Link spexctl's libraries statically (faster process start)"
       ${spexd_static_default})
if(SPEXD_STATIC_SPEXCTL AND spexd_static_missing)
  message(FATAL_ERROR "SPEXD_STATIC_SPEXCTL: no static archive for ${spexd_static_missing} "
                      "(scripts/install-deps.sh installs them); or -DSPEXD_STATIC_SPEXCTL=OFF")
endif()
if(SPEXD_STATIC_SPEXCTL)
  list(JOIN SPEXD_STATIC_SPEXCTL_NAMES "," spexd_static_names)
  set_target_properties(spexctl PROPERTIES RULE_LAUNCH_LINK
    "${PROJECT_SOURCE_DIR}/cmake/static_link_launcher.sh ${spexd_static_names}")
  # `spexctl extract --local --backend cuda` loads the CUDA module, which links Debian's
  # shared Abseil, and C++ objects (absl::Status, absl::Mutex inside core types) cross that
  # boundary. Exported, spexctl's static Abseil is the copy the module's references bind
  # to (the executable comes first in the lookup scope), so one Abseil serves both sides.
  target_link_options(spexctl PRIVATE "LINKER:--export-dynamic-symbol=*absl*"
                      "LINKER:--export-dynamic-symbol=Absl*")
  # CFITSIO's archive also calls bzip2 (its .so names it itself; pkg-config does not).
  target_link_libraries(spexctl PRIVATE bz2)
  target_sources(spexctl PRIVATE ${PROJECT_SOURCE_DIR}/client/spexctl/cfitsio_without_curl.cc)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/client/spexctl/cfitsio_without_curl.cc
    PROPERTIES COMPILE_OPTIONS -fvisibility=hidden)
else()
  message(STATUS "spexctl links its libraries dynamically (SPEXD_STATIC_SPEXCTL=OFF)")
endif()
