#!/bin/bash
# tools/win-deps.sh — orakul's dependencies built for 64-bit Windows
# (x86_64-w64-mingw32, static libraries) from Debian bookworm's source
# packages, Debian's patches applied (`apt-get source` through a private
# sources list: no change to the machine's apt setup, no root needed beyond
# having dpkg-dev and the MinGW compiler), installed into a prefix that later
# runs reuse: when <prefix>/.complete-v1 exists nothing is done; a run that
# stopped half way resumes (the sources in <prefix>.work, a stamp per library).
#   tools/win-deps.sh [prefix]     (default: build-mingw/deps)
# Builds: zlib, libpng, libjpeg-turbo (no SIMD: no nasm needed), libwebp,
# libyaml, jansson, oniguruma, utf8proc, CUnit; writes a pkg-config file for
# each (the static-library defines — YAML_DECLARE_STATIC, ONIG_STATIC,
# UTF8PROC_STATIC — in Cflags). Needs: gcc-mingw-w64-x86-64, cmake, make,
# dpkg-dev, and deb.debian.org reachable. Runs under `nice` (a shared machine).
# cmake/mingw-w64.cmake is the toolchain file for these and for orakul.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
prefix=$(realpath -m "${1:-$here/build-mingw/deps}")
stamp=$prefix/.complete-v1
if [ -f "$stamp" ]; then
  echo "== win-deps: $prefix already built (remove it to rebuild)"
  exit 0
fi
jobs=${ORAKUL_WIN_DEPS_JOBS:-$(nproc)}
triple=x86_64-w64-mingw32
cc=$(command -v $triple-gcc-posix || command -v $triple-gcc || true)
[ -n "$cc" ] || { echo "win-deps: no $triple-gcc (apt-get install gcc-mingw-w64-x86-64)" >&2; exit 1; }
command -v dpkg-source >/dev/null || { echo "win-deps: no dpkg-source (apt-get install dpkg-dev)" >&2; exit 1; }
work=$prefix.work
mkdir -p "$work/lists/partial" "$work/cache/archives/partial" "$work/src" "$prefix/lib/pkgconfig" "$prefix/include"
t0=$(date +%s)

# -- sources: bookworm's, through a private apt configuration --------------------
echo "deb-src http://deb.debian.org/debian bookworm main" >"$work/sources.list"
apt=(-o "Dir::Etc::SourceList=$work/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$work/lists" -o "Dir::Cache=$work/cache" -o Debug::NoLocking=1
     -o APT::Sandbox::User=root)
pkgs=(zlib libpng1.6 libjpeg-turbo libwebp libyaml jansson libonig utf8proc cunit)
if [ ! -f "$work/src/.complete" ]; then
  echo "== win-deps: apt-get source (bookworm, deb.debian.org)"
  rm -rf "$work/src" && mkdir -p "$work/src"
  apt-get "${apt[@]}" -qq update
  (cd "$work/src" && apt-get "${apt[@]}" -qq source "${pkgs[@]}" >/dev/null 2>"$work/source.log") ||
    { cat "$work/source.log" >&2; exit 1; }
  touch "$work/src/.complete"
fi
src() { find "$work/src" -maxdepth 1 -mindepth 1 -type d -name "$1-*" | head -1; }
# a library is built once: `todo <name>` is false when its stamp exists
todo() { [ ! -f "$prefix/.done-$1" ]; }
did() { touch "$prefix/.done-$1"; }

# -- a CMake project, static, with the toolchain file -----------------------------
cm() { # cm <source dir> [cmake args...]
  local s=$1; shift
  echo "== win-deps: $(basename "$s")"
  nice -n 10 cmake -S "$s" -B "$s/_win" -G "Unix Makefiles" -DCMAKE_TOOLCHAIN_FILE="$here/cmake/mingw-w64.cmake" \
    -DORAKUL_WIN_PREFIX="$prefix" -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF -DCMAKE_POLICY_DEFAULT_CMP0077=NEW "$@" >"$s/_win.log" 2>&1 ||
    { tail -30 "$s/_win.log" >&2; exit 1; }
  nice -n 10 cmake --build "$s/_win" -j"$jobs" >>"$s/_win.log" 2>&1 || { tail -30 "$s/_win.log" >&2; exit 1; }
  cmake --install "$s/_win" >>"$s/_win.log" 2>&1 || { tail -30 "$s/_win.log" >&2; exit 1; }
}

pc() { # pc <name> <version> <libs> [cflags] [requires]
  rm -f "$prefix/lib/pkgconfig/$1.pc" # libpng's is a link to libpng16.pc: never write through it
  cat >"$prefix/lib/pkgconfig/$1.pc" <<EOF
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include
Name: $1
Description: $1 (static, x86_64-w64-mingw32, tools/win-deps.sh)
Version: $2
Requires.private: ${5:-}
Libs: -L\${libdir} $3
Cflags: -I\${includedir} ${4:-}
EOF
}

# zlib: its fifteen sources built directly (Debian's dfsg tarball has no
# win32/ makefile; its CMake build names the static library oddly)
if todo zlib; then
z=$(src zlib)
echo "== win-deps: $(basename "$z")"
mkdir -p "$z/_win"
for f in adler32 compress crc32 deflate gzclose gzlib gzread gzwrite infback inffast inflate inftrees trees \
         uncompr zutil; do
  nice -n 10 "$cc" -O2 -I"$z" -c "$z/$f.c" -o "$z/_win/$f.o"
done
$triple-ar rcs "$prefix/lib/libz.a" "$z"/_win/*.o
cp "$z/zlib.h" "$z/zconf.h" "$prefix/include/"
zv=$(sed -n 's/^#define ZLIB_VERSION "\(.*\)"/\1/p' "$z/zlib.h")
pc zlib "$zv" -lz
did zlib
fi
zl=(-DZLIB_LIBRARY="$prefix/lib/libz.a" -DZLIB_INCLUDE_DIR="$prefix/include")

todo png && {
cm "$(src libpng1.6)" -DPNG_SHARED=OFF -DPNG_STATIC=ON -DPNG_TESTS=OFF -DPNG_EXECUTABLES=OFF "${zl[@]}"
pngv=$(sed -n 's/^#define PNG_LIBPNG_VER_STRING "\(.*\)"/\1/p' "$prefix/include/png.h")
pc libpng "$pngv" "-lpng16 -lz" "-I\${includedir}/libpng16"
did png; }

todo jpeg && {
cm "$(src libjpeg-turbo)" -DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DWITH_SIMD=OFF -DWITH_TURBOJPEG=OFF
jv=$(sed -n 's/^#define LIBJPEG_TURBO_VERSION *\([0-9.]*\).*/\1/p' "$prefix/include/jconfig.h")
pc libjpeg "${jv:-2.1}" -ljpeg
did jpeg; }

todo webp && {
cm "$(src libwebp)" -DWEBP_BUILD_ANIM_UTILS=OFF -DWEBP_BUILD_CWEBP=OFF -DWEBP_BUILD_DWEBP=OFF \
  -DWEBP_BUILD_GIF2WEBP=OFF -DWEBP_BUILD_IMG2WEBP=OFF -DWEBP_BUILD_VWEBP=OFF -DWEBP_BUILD_WEBPINFO=OFF \
  -DWEBP_BUILD_WEBPMUX=OFF -DWEBP_BUILD_EXTRAS=OFF -DWEBP_BUILD_LIBWEBPMUX=OFF
webplibs="-lwebp"
[ -f "$prefix/lib/libsharpyuv.a" ] && webplibs="-lwebp -lsharpyuv"
pc libwebp 1.2 "$webplibs"
did webp; }

todo yaml && { cm "$(src libyaml)" -DINSTALL_CMAKE_DIR=lib/cmake/yaml
pc yaml-0.1 0.2.5 -lyaml -DYAML_DECLARE_STATIC
did yaml; }

todo jansson && {
cm "$(src jansson)" -DJANSSON_BUILD_DOCS=OFF -DJANSSON_WITHOUT_TESTS=ON -DJANSSON_EXAMPLES=OFF \
  -DJANSSON_BUILD_SHARED_LIBS=OFF
pc jansson 2.14 -ljansson
did jansson; }

todo onig && {
cm "$(src libonig)" -DENABLE_BINARY_COMPATIBLE_POSIX_API=OFF -DENABLE_POSIX_API=OFF -DINSTALL_DOCUMENTATION=OFF \
  -DBUILD_TEST=OFF
pc oniguruma 6.9.8 -lonig -DONIG_STATIC
did onig; }

todo utf8proc && { cm "$(src utf8proc)" -DUTF8PROC_ENABLE_TESTING=OFF
pc libutf8proc 2.8.0 -lutf8proc -DUTF8PROC_STATIC
did utf8proc; }

# CUnit: autotools upstream; its nine sources built directly (the header is shipped)
if todo cunit; then
u=$(src cunit)
echo "== win-deps: $(basename "$u")"
mkdir -p "$u/_win" "$prefix/include/CUnit"
for f in Framework/CUError Framework/MyMem Framework/TestDB Framework/TestRun Framework/Util Basic/Basic \
         Automated/Automated Console/Console; do
  nice -n 10 "$cc" -O2 -I"$u/CUnit/Headers" -c "$u/CUnit/Sources/$f.c" -o "$u/_win/$(basename $f).o"
done
$triple-ar rcs "$prefix/lib/libcunit.a" "$u"/_win/*.o
cp "$u"/CUnit/Headers/*.h "$prefix/include/CUnit/"
pc cunit 2.1-3 -lcunit
did cunit
fi

# the libraries' own .pc files name DLL imports or miss the static defines: ours win
for f in "$prefix"/lib/pkgconfig/*.pc "$prefix"/share/pkgconfig/*.pc; do
  [ -f "$f" ] || continue
  case $(basename "$f" .pc) in zlib|libpng|libjpeg|libwebp|yaml-0.1|jansson|oniguruma|libutf8proc|cunit) ;;
  *) rm -f "$f" ;; esac
done
rm -rf "$work"
touch "$stamp"
echo "== win-deps: done in $(( $(date +%s) - t0 )) s: $prefix"
