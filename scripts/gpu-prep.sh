#!/bin/sh
# gpu-prep.sh: readies this checkout, on the development machine, for one
# run of scripts/gpu-check.sh on a GPU machine that has no Go toolchain,
# no network and maybe no Vulkan loader (the device tool's machines):
# bin/edgellmd and the test binaries (make gpu-test), and the amd64
# libvulkan1 and GL dispatch .debs in .gl/ (git-ignored; gpu-check.sh unpacks it there when
# the loader is missing). Then, with the device tool:
#   run(command="sh scripts/gpu-check.sh", carry=["bin/edgellmd", "bin/gpu.test", "bin/gpu-vk.test", ".gl"], timeout_s=540)
set -eu
cd "$(dirname "$0")/.."
make gpu-test
grep -qx '/.gl/' .git/info/exclude 2>/dev/null || echo '/.gl/' >> .git/info/exclude
mkdir -p .gl
L=$(mktemp -d)
mkdir -p "$L/lists/partial"
o="-q -oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$L/lists"
# shellcheck disable=SC2086 # $o is a list of options
apt-get $o update >/dev/null
# shellcheck disable=SC2086
# NVIDIA's ICD (libGLX_nvidia.so.0) needs the GL dispatch libraries too.
(cd .gl && apt-get $o download libvulkan1 libglvnd0 libegl1 libgl1 libglx0 libopengl0 libgles2 >/dev/null)
rm -rf "$L"
ls -l bin/edgellmd bin/gpu.test bin/gpu-vk.test .gl/
