# Every dependency comes from Debian's packages (see README.md); a missing one stops configuration with
# the package to install.
find_package(LLVM 19.1 REQUIRED CONFIG HINTS /usr/lib/llvm-19/lib/cmake/llvm)
message(STATUS "tilejit: LLVM ${LLVM_PACKAGE_VERSION} from ${LLVM_DIR}")
llvm_map_components_to_libnames(TILEJIT_LLVM_LIBS
  nvptxcodegen nvptxdesc nvptxinfo core support target mc analysis passes irreader)
add_library(tilejit_llvm INTERFACE)
target_include_directories(tilejit_llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIRS})
target_compile_definitions(tilejit_llvm INTERFACE ${LLVM_DEFINITIONS})
target_link_libraries(tilejit_llvm INTERFACE ${TILEJIT_LLVM_LIBS})

find_package(fmt REQUIRED)            # libfmt-dev (header-only use: Debian ships no static libfmt)
find_path(XXHASH_INCLUDE_DIR xxhash.h)  # libxxhash-dev (used header-only)
if(NOT XXHASH_INCLUDE_DIR)
  message(FATAL_ERROR "xxhash.h not found: apt-get install libxxhash-dev")
endif()
find_path(CLI11_INCLUDE_DIR CLI/CLI.hpp)  # libcli11-dev
if(TILEJIT_BUILD_TOOLS AND NOT CLI11_INCLUDE_DIR)
  message(FATAL_ERROR "CLI11 not found: apt-get install libcli11-dev")
endif()
