# orakul_add_plugin(<name> SOURCES <files...> [LIBRARIES <libs...>])
# Builds orakul-<name>.so: a MODULE with hidden visibility, a version script
# that exports only orakul_plugin_entry, and -z defs (plugins never link the
# core: every host service arrives through the host table).
# Shared by the in-tree build and the installed CMake package.
include_guard(GLOBAL)
set(_ORK_PLUGIN_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")

function(orakul_add_plugin name)
  cmake_parse_arguments(P "" "" "SOURCES;LIBRARIES" ${ARGN})
  set(tgt orakul_plugin_${name})
  add_library(${tgt} MODULE ${P_SOURCES})
  set_target_properties(${tgt} PROPERTIES
    PREFIX "" OUTPUT_NAME "orakul-${name}" SUFFIX ".so"
    C_VISIBILITY_PRESET hidden CUDA_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  if(DEFINED ORAKUL_PLUGIN_BUILD_DIR)
    set_target_properties(${tgt} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ORAKUL_PLUGIN_BUILD_DIR}")
  endif()
  target_link_options(${tgt} PRIVATE
    "LINKER:--version-script=${_ORK_PLUGIN_CMAKE_DIR}/orakul-plugin.map" "LINKER:-z,defs")
  if(TARGET orakul::sdk)
    target_link_libraries(${tgt} PRIVATE orakul::sdk)
  elseif(TARGET orakul_sdk)
    target_link_libraries(${tgt} PRIVATE orakul_sdk)
  endif()
  if(P_LIBRARIES)
    target_link_libraries(${tgt} PRIVATE ${P_LIBRARIES})
  endif()
  if(DEFINED ORAKUL_PLUGIN_INSTALL_DIR)
    install(TARGETS ${tgt} LIBRARY DESTINATION "${ORAKUL_PLUGIN_INSTALL_DIR}")
  endif()
endfunction()
