# cmake/mingw-w64.cmake — toolchain file: cross-compile orakul for 64-bit
# Windows with Debian's MinGW-w64 (gcc-mingw-w64-x86-64, POSIX threads
# variant or win32: orakul's own threads are Win32 either way, through
# core/platform/platform_win32.c). Dependencies come from ORAKUL_WIN_PREFIX
# (tools/win-deps.sh builds them there); tests run under Wine
# (CMAKE_CROSSCOMPILING_EMULATOR), so ctest works unchanged.
#   cmake -S . -B build-mingw -DCMAKE_TOOLCHAIN_FILE=cmake/mingw-w64.cmake \
#         -DORAKUL_WIN_PREFIX=<prefix> -DORAKUL_CUDA=OFF
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(_ork_triple x86_64-w64-mingw32)
# the -posix variant when there is one: its libstdc++/libgcc carry winpthreads
foreach(_v posix win32 "")
  if(_v)
    set(_cc "/usr/bin/${_ork_triple}-gcc-${_v}")
  else()
    set(_cc "/usr/bin/${_ork_triple}-gcc")
  endif()
  if(EXISTS "${_cc}")
    set(CMAKE_C_COMPILER "${_cc}")
    break()
  endif()
endforeach()
set(CMAKE_RC_COMPILER ${_ork_triple}-windres)

if(NOT ORAKUL_WIN_PREFIX AND DEFINED ENV{ORAKUL_WIN_PREFIX})
  set(ORAKUL_WIN_PREFIX "$ENV{ORAKUL_WIN_PREFIX}")
endif()
set(ORAKUL_WIN_PREFIX "${ORAKUL_WIN_PREFIX}" CACHE PATH "where tools/win-deps.sh installed the Windows dependencies")
set(CMAKE_FIND_ROOT_PATH /usr/${_ork_triple} ${ORAKUL_WIN_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# pkg-config reads the prefix's .pc files only (never the build machine's).
# CMake reads this file more than once, the last time (CMakeSystem.cmake)
# without the -D cache: only a known prefix sets the variables.
if(ORAKUL_WIN_PREFIX)
  set(ENV{PKG_CONFIG_LIBDIR} "${ORAKUL_WIN_PREFIX}/lib/pkgconfig")
  set(ENV{PKG_CONFIG_PATH} "")
  set(ENV{PKG_CONFIG_SYSROOT_DIR} "")
endif()

# MinGW's own C99 printf family (%zu, %lld as on Linux), not msvcrt's; the
# format checks follow (ORK_PRINTF in <orakul/platform.h>)
set(CMAKE_C_FLAGS_INIT "-D__USE_MINGW_ANSI_STDIO=1")

# static dependencies and runtime: one orakul.exe and its plugins, no DLLs to ship
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static -static-libgcc")
set(CMAKE_MODULE_LINKER_FLAGS_INIT "-static-libgcc")
set(CMAKE_SHARED_LINKER_FLAGS_INIT "-static-libgcc")

# tests (ctest) and anything else that runs a built program: through Wine
find_program(ORAKUL_WINE NAMES wine64 wine PATHS /usr/lib/wine NO_CMAKE_FIND_ROOT_PATH)
if(ORAKUL_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR "${ORAKUL_WINE}")
endif()
