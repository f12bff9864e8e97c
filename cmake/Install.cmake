# Installation: libtilejit, the public headers (include/tilejit), the CMake package (find_package(tilejit)
# → tilejit::tilejit) and the tilejit CLI.
include(CMakePackageConfigHelpers)

# The public headers need C++20 (std::source_location, concepts); consumers inherit the requirement.
target_compile_features(tilejit PUBLIC cxx_std_20)

install(TARGETS tilejit EXPORT tilejitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/tilejit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tilejitTargets NAMESPACE tilejit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tilejit)
# The config files are generated in a subfolder find_package does not search: the build tree is not a package
# (its top level has no targets file), so `-DCMAKE_PREFIX_PATH=<build dir>` must say "not found", not fail.
configure_package_config_file(cmake/tilejitConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/package-config/tilejitConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tilejit)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/package-config/tilejitConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/package-config/tilejitConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/package-config/tilejitConfigVersion.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tilejit)
if(TARGET tilejit_cli)
  # The installed CLI finds libtilejit next to it, in ../lib, wherever the prefix is moved.
  set_target_properties(tilejit_cli PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  install(TARGETS tilejit_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
