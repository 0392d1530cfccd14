#!/usr/bin/env bash
# Installs a built tree into a temporary prefix and uses it as a consumer would:
#   tests/install/run.sh BUILD_DIR
# cmake --install; examples/ built with find_package(ember) against libember.so and
# libember.a, and with the pkg-config line against each; every program run on the default
# model converted by the installed `ember convert`; the installed ember and ember-console run;
# then cpack -G DEB and the package's contents. One line per step; exit 1 on the first failure.
# ctest registers it as install_example (tests/CMakeLists.txt).
set -euo pipefail
if [[ $# -ne 1 ]]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ember-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
log=$tmp/step.log
cc=${CC:-cc}

step() { echo "--- $*"; }
fail() { echo "FAIL: $*"; [[ -s $log ]] && tail -40 "$log"; exit 1; }
# run_logged WHAT CMD...: runs CMD with its output in $log, shown only when it fails.
run_logged() {
  local what=$1; shift
  "$@" > "$log" 2>&1 || fail "$what (exit $?)"
}
# check_generate PROGRAM: runs PROGRAM on the model with a prompt and without one; each must
# exit 0 and print more than its prompt.
check_generate() {
  local prog=$1 out
  out=$("$prog" "$tmp/m.ember" "ROMEO:" 40 2> "$log") || fail "$prog exited $?"
  [[ $out == ROMEO:* && ${#out} -gt 20 ]] || fail "$prog printed '$out'"
  echo "    with a prompt: ${out//$'\n'/ }"
  out=$("$prog" "$tmp/m.ember" 2> "$log") || fail "$prog (no prompt) exited $?"
  [[ ${#out} -gt 50 ]] || fail "$prog (no prompt) printed '$out'"
  echo "    without a prompt: ${#out} bytes, $(tail -1 "$log")"
}
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' '; }

step "cmake --install $build --prefix $prefix"
run_logged "cmake --install" cmake --install "$build" --prefix "$prefix"
pc=$(find "$prefix" -name ember.pc -path '*/pkgconfig/*' | head -1)
[[ -n $pc ]] || fail "no ember.pc installed"
libdir=$(dirname "$(dirname "$pc")")
for f in bin/ember bin/ember-console include/ember/ember.h; do
  [[ -f $prefix/$f ]] || fail "$prefix/$f not installed"
done
for f in libember.a libember.so cmake/ember/emberConfig.cmake cmake/ember/emberConfigVersion.cmake cmake/ember/emberTargets.cmake; do
  [[ -e $libdir/$f ]] || fail "$libdir/$f not installed"
done
if [[ -f $build/lib/libember-cuda.so ]]; then
  [[ -f $libdir/libember-cuda.so ]] || fail "libember-cuda.so built but not installed"
fi
echo "    installed: $(cd "$prefix" && find . -type f -o -type l | sed 's|^\./||' | sort | tr '\n' ' ')"

step "libember.so: soname, dependencies, exported symbols"
so=$(readlink -f "$libdir/libember.so")
soname=$(readelf -d "$so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ -n $soname && -e $libdir/$soname ]] || fail "libember.so has no SONAME or $libdir/$soname is missing"
echo "    SONAME $soname; NEEDED $(needed "$so")"
syms=$(nm -D --defined-only "$so" | awk '{print $3}' | sort -u)
others=$(grep -v '^ember_' <<< "$syms" || true)
[[ -z $others ]] || fail "libember.so exports more than ember_*: $(head -5 <<< "$others" | tr '\n' ' ')"
grep -qx ember_generate <<< "$syms" || fail "libember.so does not export ember_generate"
echo "    exports $(wc -l <<< "$syms") symbols, all ember_*"
runpath=$(readelf -d "$prefix/bin/ember" | sed -n 's/.*(R.*PATH).*\[\(.*\)\]/\1/p')
echo "    bin/ember RUNPATH: $runpath"
[[ $runpath == "\$ORIGIN/../"* ]] || fail "bin/ember has no \$ORIGIN RUNPATH"

step "libember.a: every strong global symbol is ember_* or in namespace ember"
# A program that links the archive gets these names: an unprefixed C name (on_bus_error was
# one) can collide with the embedder's own. Weak symbols (inline and template code) may repeat.
strong=$(nm -g --defined-only "$libdir/libember.a" 2>/dev/null | awk 'NF==3 && $2 ~ /^[TDBRG]$/ {print $3}' | sort -u)
[[ -n $strong ]] || fail "nm lists no symbols in libember.a"
foreign=$(grep -v -e '^ember_' -e '^_ZN5ember' -e '^_ZNK5ember' -e '^_ZT[VIS]N5ember' <<< "$strong" || true)
[[ -z $foreign ]] || fail "libember.a defines global symbols outside ember: $(head -5 <<< "$foreign" | tr '\n' ' ')"
echo "    $(wc -l <<< "$strong") strong global symbols, all ember_* or ember::"

step "installed ember convert models/shakespeare_char.pt"
run_logged "ember convert" "$prefix/bin/ember" convert "$src/models/shakespeare_char.pt" \
  --vocab-text "$src/models/shakespeare_char.vocab.txt" -o "$tmp/m.ember"
echo "    $(tail -1 "$log")"

step "examples/ with find_package(ember): ember::ember (libember.so)"
run_logged "configure examples/" cmake -S "$src/examples" -B "$tmp/ex-shared" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release
run_logged "build examples/" cmake --build "$tmp/ex-shared"
[[ " $(needed "$tmp/ex-shared/generate") " == *" $soname "* ]] || fail "generate does not link $soname"
check_generate "$tmp/ex-shared/generate"

step "examples/ with find_package(ember): ember::ember_static (libember.a)"
run_logged "configure examples/ (static)" cmake -S "$src/examples" -B "$tmp/ex-static" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release -DEMBER_EXAMPLE_STATIC=ON
run_logged "build examples/ (static)" cmake --build "$tmp/ex-static"
[[ " $(needed "$tmp/ex-static/generate") " != *" libember"* ]] || fail "the static generate needs libember.so"
echo "    NEEDED $(needed "$tmp/ex-static/generate")"
check_generate "$tmp/ex-static/generate"

export PKG_CONFIG_PATH=$libdir/pkgconfig
step "$cc generate.c \$(pkg-config --cflags --libs ember)"
cflags=$(pkg-config --cflags ember) || fail "pkg-config --cflags ember"
libs=$(pkg-config --libs ember) || fail "pkg-config --libs ember"
echo "    pkg-config: $cflags $libs"
# shellcheck disable=SC2086
run_logged "$cc (shared)" "$cc" -std=c11 -Wall -Wextra "$src/examples/generate.c" $cflags $libs \
  -Wl,-rpath,"$(pkg-config --variable=libdir ember)" -o "$tmp/generate-pc"
check_generate "$tmp/generate-pc"

step "$cc generate.c \$(pkg-config --static --cflags --libs ember), libember.a"
slibs=$(pkg-config --static --libs ember) || fail "pkg-config --static --libs ember"
# libember.so lies beside libember.a, and -lember would take it: name the archive.
slibs=${slibs/-lember /-l:libember.a }
echo "    pkg-config --static: $cflags $slibs"
# shellcheck disable=SC2086
run_logged "$cc (static)" "$cc" -std=c11 -Wall -Wextra "$src/examples/generate.c" $cflags $slibs -o "$tmp/generate-pc-static"
[[ " $(needed "$tmp/generate-pc-static") " != *" libember"* ]] || fail "the static generate needs libember.so"
echo "    NEEDED $(needed "$tmp/generate-pc-static")"
check_generate "$tmp/generate-pc-static"

step "$cc generate.c ... -static: no shared library at all"
# shellcheck disable=SC2086
run_logged "$cc (-static)" "$cc" -std=c11 -Wall -Wextra "$src/examples/generate.c" $cflags $slibs -static -o "$tmp/generate-all-static"
[[ -z $(needed "$tmp/generate-all-static") ]] || fail "the -static generate needs $(needed "$tmp/generate-all-static")"
readelf -l "$tmp/generate-all-static" | grep -q INTERP && fail "the -static generate has a program interpreter"
echo "    NEEDED none, no interpreter"
check_generate "$tmp/generate-all-static"

step "installed ember generate -m m.ember -n 20"
out=$("$prefix/bin/ember" generate -m "$tmp/m.ember" -n 20 2> "$log") || fail "ember generate exited $?"
[[ ${#out} -ge 20 ]] || fail "ember generate printed '$out'"
echo "    ${out//$'\n'/ }"

if [[ -f $libdir/libember-cuda.so ]]; then
  step "installed ember generate --backend cuda: finds $libdir/libember-cuda.so"
  readelf -d "$libdir/libember-cuda.so" | grep -q 'libcublasLt' || fail "libember-cuda.so does not link libcublasLt"
  echo "    libember-cuda.so RUNPATH: $(readelf -d "$libdir/libember-cuda.so" | sed -n 's/.*(R.*PATH).*\[\(.*\)\]/\1/p')"
  if out=$("$prefix/bin/ember" generate -m "$tmp/m.ember" -n 20 --backend cuda 2> "$log"); then
    [[ ${#out} -ge 20 ]] || fail "ember generate --backend cuda printed '$out'"
    echo "    on the GPU: ${out//$'\n'/ }"
  else
    # Without a GPU the module must still load: the error is then that no device was found.
    grep -q "no CUDA device found" "$log" || fail "ember generate --backend cuda"
    echo "    module loaded, no GPU here: $(tail -1 "$log")"
  fi
fi

step "installed ember-console --help"
run_logged "ember-console --help" "$prefix/bin/ember-console" --help
grep -q -- --port "$log" || fail "ember-console --help does not name --port"
echo "    $(head -1 "$log")"

if command -v cpack > /dev/null && command -v dpkg-deb > /dev/null && command -v dpkg-shlibdeps > /dev/null; then
  step "cpack -G DEB"
  run_logged "cpack -G DEB" cpack -G DEB --config "$build/CPackConfig.cmake" -B "$tmp/deb"
  debs=("$tmp"/deb/ember_*.deb)
  deb=${debs[0]}
  [[ -f $deb ]] || fail "cpack made no ember_*.deb"
  dpkg-deb -I "$deb" > "$log" || fail "dpkg-deb -I"
  depends=$(sed -n 's/^ Depends: //p' "$log")
  [[ $depends == *libc6* && $depends == *libxxhash0* ]] || fail "$deb Depends: '$depends'"
  echo "    $(basename "$deb"):$(sed -n 's/^ \(Package\|Version\|Architecture\|Installed-Size\): / \1 /p' "$log" | tr '\n' ',')"
  echo "    Depends: $depends"
  dpkg-deb -c "$deb" > "$log" || fail "dpkg-deb -c"
  for f in ./usr/bin/ember ./usr/bin/ember-console ./usr/include/ember/ember.h /libember.a /libember.so /ember.pc /emberConfig.cmake; do
    grep -q -- "$f\( \|$\)" "$log" || fail "$deb lacks $f"
  done
  echo "    holds bin/ember, bin/ember-console, ember.h, libember.a, libember.so, ember.pc, the CMake package"
  if [[ -f $libdir/libember-cuda.so ]]; then
    debs=("$tmp"/deb/ember-cuda_*.deb)
    cdeb=${debs[0]}
    [[ -f $cdeb ]] || fail "cpack made no ember-cuda_*.deb"
    dpkg-deb -c "$cdeb" | grep -q '/libember-cuda.so$' || fail "$cdeb lacks libember-cuda.so"
    echo "    $(basename "$cdeb"): libember-cuda.so, Depends: $(dpkg-deb -f "$cdeb" Depends)"
  fi
else
  echo "--- cpack -G DEB: skipped (cpack, dpkg-deb or dpkg-shlibdeps missing)"
fi
echo "install_example: all steps passed"
