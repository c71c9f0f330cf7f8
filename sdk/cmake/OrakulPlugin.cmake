# orakul_add_plugin(<name> SOURCES <files...> [LIBRARIES <libs...>]
#                   [OUTPUT_DIRECTORY <dir>] [NO_INSTALL])
# Builds orakul-<name>.so (orakul-<name>.dll on Windows) as the target
# orakul_plugin_<name>: a MODULE with hidden visibility, a version script that
# exports only orakul_plugin_entry, and -z defs (plugins never link the core:
# every host service arrives through the host table). On Windows the entry is
# exported by ORK_EXPORT (__declspec(dllexport)) alone, which also exports
# nothing else, and a DLL never has undefined symbols. It is installed into ORAKUL_PLUGIN_INSTALL_DIR (relative to
# the install prefix) unless NO_INSTALL. OUTPUT_DIRECTORY overrides where the
# build puts it (default: ORAKUL_PLUGIN_BUILD_DIR when set, else CMake's).
# Shared by the in-tree build and the installed CMake package.
#
# Also: ORAKUL_PLUGIN_WARNINGS, the C warnings orakul's own plugins build with;
# orakul_enable_cuda(), for a plugin whose CUDA sources are optional.
include_guard(GLOBAL)
set(_ORK_PLUGIN_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
set(ORAKUL_PLUGIN_WARNINGS -Wall -Wextra -Wno-unused-parameter)

# orakul_enable_cuda(): in the orakul tree this follows its ORAKUL_CUDA; in a
# plugin project of its own, ORAKUL_CUDA is an option, ON where nvcc is found.
# When ON: the CUDA language (C++17; CMAKE_CUDA_ARCHITECTURES defaults to the
# core's 89-real;90-real;90-virtual) and the CUDA::cudart target.
macro(orakul_enable_cuda)
  if(NOT DEFINED ORAKUL_CUDA)
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
      option(ORAKUL_CUDA "Build the plugin's CUDA kernels" ON)
    else()
      option(ORAKUL_CUDA "Build the plugin's CUDA kernels" OFF)
    endif()
  endif()
  if(ORAKUL_CUDA AND NOT CMAKE_CUDA_COMPILER_LOADED)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "89-real;90-real;90-virtual")
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 17)
  endif()
  if(ORAKUL_CUDA AND NOT TARGET CUDA::cudart)
    find_package(CUDAToolkit REQUIRED)
  endif()
endmacro()

function(orakul_add_plugin name)
  cmake_parse_arguments(P "NO_INSTALL" "OUTPUT_DIRECTORY" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT P_SOURCES)
    message(FATAL_ERROR "orakul_add_plugin(${name}): no SOURCES")
  endif()
  set(tgt orakul_plugin_${name})
  add_library(${tgt} MODULE ${P_SOURCES})
  set_target_properties(${tgt} PROPERTIES
    PREFIX "" OUTPUT_NAME "orakul-${name}" SUFFIX "${CMAKE_SHARED_MODULE_SUFFIX}"
    C_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  if(P_OUTPUT_DIRECTORY)
    set_target_properties(${tgt} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${P_OUTPUT_DIRECTORY}")
  elseif(DEFINED ORAKUL_PLUGIN_BUILD_DIR)
    set_target_properties(${tgt} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ORAKUL_PLUGIN_BUILD_DIR}")
  endif()
  if(WIN32)
    # a DLL is a RUNTIME output (the OUTPUT_DIRECTORY applies to it as well)
    get_target_property(_dir ${tgt} LIBRARY_OUTPUT_DIRECTORY)
    if(_dir)
      set_target_properties(${tgt} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${_dir}")
    endif()
    if(MINGW)
      # static runtime and libraries: no libgcc_s or libwinpthread DLL to ship beside it
      # (a static jansson built by the -posix toolchain calls winpthread's sched_yield)
      target_link_options(${tgt} PRIVATE "-static")
    endif()
  else()
    target_link_options(${tgt} PRIVATE
      "LINKER:--version-script=${_ORK_PLUGIN_CMAKE_DIR}/orakul-plugin.map" "LINKER:-z,defs")
  endif()
  if(TARGET orakul::sdk)
    target_link_libraries(${tgt} PRIVATE orakul::sdk)
  elseif(TARGET orakul_sdk)
    target_link_libraries(${tgt} PRIVATE orakul_sdk)
  endif()
  if(P_LIBRARIES)
    target_link_libraries(${tgt} PRIVATE ${P_LIBRARIES})
  endif()
  if(DEFINED ORAKUL_PLUGIN_INSTALL_DIR AND NOT P_NO_INSTALL)
    install(TARGETS ${tgt} LIBRARY DESTINATION "${ORAKUL_PLUGIN_INSTALL_DIR}"
                           RUNTIME DESTINATION "${ORAKUL_PLUGIN_INSTALL_DIR}")
  endif()
endfunction()
