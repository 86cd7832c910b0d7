#!/usr/bin/env bash
# Builds libpinframe (release) and installs it into a prefix:
#
#   bindings/c/install.sh [--prefix DIR] [--libdir DIR] [--destdir DIR] [--no-build]
#
#   --prefix   where it goes (default /usr/local): DIR/include/pinframe.h,
#              LIBDIR/libpinframe.so.MAJOR.MINOR.PATCH (+ the .so.MAJOR and .so links),
#              LIBDIR/libpinframe.a, LIBDIR/pkgconfig/pinframe.pc
#   --libdir   the library directory (default PREFIX/lib)
#   --destdir  staging root prepended to every path (packaging); the .pc keeps PREFIX
#   --no-build install what target/release already holds
#
# Then: cc app.c $(pkg-config --cflags --libs pinframe)   (PKG_CONFIG_PATH=LIBDIR/pkgconfig
# for a prefix pkg-config does not search; run with LD_LIBRARY_PATH=LIBDIR or an rpath).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

prefix=/usr/local
libdir=
destdir=
build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --libdir) libdir=$2; shift 2 ;;
    --libdir=*) libdir=${1#*=}; shift ;;
    --destdir) destdir=$2; shift 2 ;;
    --destdir=*) destdir=${1#*=}; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$prefix" in /*) ;; *) prefix=$(pwd)/$prefix ;; esac
libdir=${libdir:-$prefix/lib}
case "$libdir" in /*) ;; *) libdir=$(pwd)/$libdir ;; esac

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$here/Cargo.toml" | head -n 1)
major=${version%%.*}
target_dir=${CARGO_TARGET_DIR:-$root/target}
case "$target_dir" in /*) ;; *) target_dir=$root/$target_dir ;; esac

if [ "$build" = 1 ]; then
  (cd "$root" && cargo build --release -p pinframe-c)
fi
so=$target_dir/release/libpinframe_c.so
archive=$target_dir/release/libpinframe_c.a
for f in "$so" "$archive" "$here/include/pinframe.h"; do
  [ -f "$f" ] || { echo "install.sh: $f is missing (build first, or drop --no-build)" >&2; exit 1; }
done

# What a static link needs besides libpinframe.a (rustc's list for this target).
private_libs="-lgbm -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"

lib=$destdir$libdir
inc=$destdir$prefix/include
install -d "$lib/pkgconfig" "$inc"
install -m 755 "$so" "$lib/libpinframe.so.$version"
ln -sfn "libpinframe.so.$version" "$lib/libpinframe.so.$major"
ln -sfn "libpinframe.so.$major" "$lib/libpinframe.so"
install -m 644 "$archive" "$lib/libpinframe.a"
install -m 644 "$here/include/pinframe.h" "$inc/pinframe.h"
# Paths under the prefix are written relative to it (${prefix}), as pkg-config files are.
pc_libdir=$libdir
case "$libdir" in "$prefix"/*) pc_libdir="\${prefix}${libdir#"$prefix"}" ;; esac
sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$pc_libdir|" -e "s|@INCLUDEDIR@|\${prefix}/include|" \
    -e "s|@VERSION@|$version|" -e "s|@PRIVATE_LIBS@|$private_libs|" \
    "$here/pinframe.pc.in" > "$lib/pkgconfig/pinframe.pc"
chmod 644 "$lib/pkgconfig/pinframe.pc"
echo "installed libpinframe $version into ${destdir}$prefix (libdir $libdir)"
