#!/bin/sh
# Unpacks an arm64 Vulkan loader and lavapipe (Debian's libvulkan1 and
# mesa-vulkan-drivers for arm64, with their dependencies) into a folder, so
# that the arm64 test binaries run the GPU engine under qemu-aarch64-static
# (make test-arm64). It leaves the system's dpkg alone: the arm64 package
# lists go to a private apt state.
#   sh engine/gpu/arm64-lavapipe.sh ROOT
# prints the environment to run with (QEMU_LD_PREFIX, LD_LIBRARY_PATH,
# VK_DRIVER_FILES).
set -eu
R=$(realpath -m "${1:?usage: arm64-lavapipe.sh ROOT}")
if [ -e "$R/.done" ]; then exit 0; fi
mkdir -p "$R" "$R/.debs"
L=$(mktemp -d)
mkdir -p "$L/lists/partial" "$L/cache/archives/partial"
o="-q -oAPT::Architecture=arm64 -oAPT::Architectures=arm64 -oDir::State::Lists=$L/lists -oDir::Cache=$L/cache -oDir::State::status=/dev/null"
apt-get $o update >/dev/null
pkgs=$(apt-cache $o depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances --no-pre-depends \
	libc6 libvulkan1 mesa-vulkan-drivers | grep -E '^[a-z0-9]' | sort -u | grep -v -E '^(debconf|perl-base|dpkg|sensible-utils|gcc-12-base|libc-bin|tar|install-info)$')
cd "$R/.debs"
# shellcheck disable=SC2086
apt-get $o download $pkgs >/dev/null 2>&1 || for p in $pkgs; do apt-get $o download "$p" >/dev/null 2>&1 || true; done
for f in ./*.deb; do dpkg-deb -x "$f" "$R"; done
icd=$(ls "$R"/usr/share/vulkan/icd.d/lvp_icd.aarch64.json)
sed "s|\"library_path\": *\"[^\"]*\"|\"library_path\": \"$R/usr/lib/aarch64-linux-gnu/libvulkan_lvp.so\"|" "$icd" > "$R/lvp_icd.json"
rm -rf "$L"
touch "$R/.done"
