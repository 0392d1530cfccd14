# Installing ember: the programs, the library (static and shared) with its C header, the CUDA
# module, a CMake package (find_package(ember): ember::ember, ember::ember_static), ember.pc
# for pkg-config, and a Debian package through CPack (cpack -G DEB). Included from the
# top-level CMakeLists.txt after every target is defined.
include(CMakePackageConfigHelpers)

set(EMBER_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ember)
# 0.x: every minor version may break the ABI, so it is part of the soname (libember.so.0.1).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(EMBER_SOVERSION 0.${PROJECT_VERSION_MINOR})
  set(EMBER_VERSION_COMPAT SameMinorVersion)
else()
  set(EMBER_SOVERSION ${PROJECT_VERSION_MAJOR})
  set(EMBER_VERSION_COMPAT SameMajorVersion)
endif()

# libxxhash has no CMake package on Debian 12: one imported target of the same name here and
# in emberConfig.cmake, so that the exported static library names it and not a path.
if(NOT TARGET ember::xxhash)
  add_library(ember::xxhash UNKNOWN IMPORTED)
  set_target_properties(ember::xxhash PROPERTIES IMPORTED_LOCATION ${XXHASH_LIBRARY})
endif()

# --- the library: kernels + runtime + C API, from the objects ember_runtime is made of
set(EMBER_LIB_OBJECTS $<TARGET_OBJECTS:ember_kernels_objects> $<TARGET_OBJECTS:ember_runtime_objects>)
# What the objects need at link time (readelf -d build/lib/libember.so): libxxhash, libcrypto,
# libstdc++, libm, libgcc_s, libc (pthread and dl are in glibc 2.36's libc). FlatBuffers is
# header-only here, zlib and libzip belong to the converter and the firmware, not the runtime.
set(EMBER_LIB_DEPS ember::xxhash OpenSSL::Crypto Threads::Threads ${CMAKE_DL_LIBS})

add_library(ember_shared SHARED ${EMBER_LIB_OBJECTS})
target_link_libraries(ember_shared PRIVATE ${EMBER_LIB_DEPS})
target_link_options(ember_shared PRIVATE -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/ember.map)
if(NOT EMBER_SANITIZE)
  # Every symbol resolved at link time (a sanitizer's runtime is the executable's to bring).
  target_link_options(ember_shared PRIVATE -Wl,--no-undefined)
endif()
set_property(TARGET ember_shared APPEND PROPERTY LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/ember.map)

add_library(ember_static STATIC ${EMBER_LIB_OBJECTS})
# A C program linking libember.a also needs the C++ runtime.
target_link_libraries(ember_static PRIVATE ${EMBER_LIB_DEPS} stdc++ m)

foreach(t ember_shared ember_static)
  target_include_directories(${t} INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                             $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  set_target_properties(${t} PROPERTIES OUTPUT_NAME ember LINKER_LANGUAGE CXX
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/lib)
endforeach()
set_target_properties(ember_shared PROPERTIES EXPORT_NAME ember VERSION ${PROJECT_VERSION} SOVERSION ${EMBER_SOVERSION})
set_target_properties(ember_static PROPERTIES EXPORT_NAME ember_static)

# --- RPATH: installed programs look in ../<libdir> (the CUDA module sits there); the module
# keeps the directories it was linked against outside the build tree (the CUDA toolkit's).
set(EMBER_PROGRAMS)
foreach(t ember ember-console)
  if(TARGET ${t})
    list(APPEND EMBER_PROGRAMS ${t})
    set_target_properties(${t} PROPERTIES INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
  endif()
endforeach()

install(TARGETS ${EMBER_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT ember)
install(TARGETS ember_shared ember_static EXPORT emberTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ember NAMELINK_COMPONENT ember
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT ember)
install(FILES ${PROJECT_SOURCE_DIR}/include/ember/ember.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/ember COMPONENT ember)
if(TARGET ember-cuda)
  set_target_properties(ember-cuda PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
  install(TARGETS ember-cuda LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT cuda)
endif()

# --- CMake package
install(EXPORT emberTargets NAMESPACE ember:: DESTINATION ${EMBER_CMAKE_DIR} COMPONENT ember)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/emberConfig.cmake.in ${CMAKE_BINARY_DIR}/emberConfig.cmake
                              INSTALL_DESTINATION ${EMBER_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/emberConfigVersion.cmake COMPATIBILITY ${EMBER_VERSION_COMPAT})
install(FILES ${CMAKE_BINARY_DIR}/emberConfig.cmake ${CMAKE_BINARY_DIR}/emberConfigVersion.cmake
        DESTINATION ${EMBER_CMAKE_DIR} COMPONENT ember)

# --- pkg-config: the prefix is found from the .pc file's own place, so that an install under
# any --prefix (cmake --install --prefix, DESTDIR, the .deb) works unchanged.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(EMBER_PC_PREFIX ${CMAKE_INSTALL_PREFIX})
else()
  set(EMBER_PC_PREFIX "\${pcfiledir}/..")
  string(REGEX MATCHALL "[^/]+" _ember_libdir_parts "${CMAKE_INSTALL_LIBDIR}")
  foreach(_part IN LISTS _ember_libdir_parts)
    string(APPEND EMBER_PC_PREFIX "/..")
  endforeach()
endif()
set(EMBER_PC_DL)
foreach(_lib IN LISTS CMAKE_DL_LIBS)
  string(APPEND EMBER_PC_DL " -l${_lib}")
endforeach()
configure_file(${PROJECT_SOURCE_DIR}/cmake/ember.pc.in ${CMAKE_BINARY_DIR}/ember.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/ember.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig COMPONENT ember)

# --- Debian package: cpack -G DEB in the build directory. Package ember holds everything
# above; with EMBER_CUDA the module is package ember-cuda (its libcublasLt comes from NVIDIA's
# CUDA toolkit, not from Debian, so dpkg-shlibdeps is not run on it).
set(CPACK_PACKAGE_NAME ember)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "ember")
set(CPACK_PACKAGE_CONTACT "ember maintainers <ember@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Runtime for small GPT language models on edge devices (CLI, serial console, C library)")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_EMBER_PACKAGE_NAME ember)
set(CPACK_DEBIAN_EMBER_PACKAGE_SHLIBDEPS ON)
# `ember attn --png` opens libgd.so.3 with dlopen (its label font), which dpkg-shlibdeps cannot see.
set(CPACK_DEBIAN_EMBER_PACKAGE_RECOMMENDS "libgd3")
set(CPACK_COMPONENTS_ALL ember)
if(TARGET ember-cuda)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_NAME ember-cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS "ember (= ${PROJECT_VERSION})")
  set(CPACK_DEBIAN_CUDA_DESCRIPTION
      "CUDA backend module of ember (libember-cuda.so); needs libcublasLt.so.${CUDAToolkit_VERSION_MAJOR} of NVIDIA's CUDA toolkit")
endif()
include(CPack)
