# The CMake package of what runtime/ and jit/ install (their targets join
# the export set flashcTargets): find_package(flashc) in a user's project.
include(CMakePackageConfigHelpers)
include(GNUInstallDirs)
set(FLASHC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/flashc)
install(EXPORT flashcTargets NAMESPACE flashc:: DESTINATION ${FLASHC_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/flashcConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/flashcConfig.cmake
                              INSTALL_DESTINATION ${FLASHC_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/flashcConfigVersion.cmake
                                 VERSION ${FLASHC_RUNTIME_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/flashcConfig.cmake ${CMAKE_BINARY_DIR}/flashcConfigVersion.cmake
        DESTINATION ${FLASHC_CMAKE_DIR})
