# Cross build for aarch64 (Jetson's CPU) with Debian's cross toolchain (g++-aarch64-linux-gnu)
# and arm64 libraries installed through multiarch (libssl-dev:arm64, ...); see
# scripts/cross-aarch64.sh. Tests run under qemu-user (CMAKE_CROSSCOMPILING_EMULATOR).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Multiarch: arm64 libraries in /usr/lib/aarch64-linux-gnu, arch headers in
# /usr/include/aarch64-linux-gnu; programs (flatc) from the build machine.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
# pkg-config (FindOpenSSL uses it) must see the arm64 .pc files, not the build machine's.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
