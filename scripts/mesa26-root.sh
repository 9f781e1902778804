#!/bin/sh
# mesa26-root.sh: a second Vulkan stack for the GPU tests, Debian sid's
# Mesa 26 lavapipe (cooperative matrices: VK_KHR_cooperative_matrix and
# VK_NV_cooperative_matrix2's flexible dimensions) and sid's glslc (which
# compiles GL_KHR_cooperative_matrix; Debian 12's cannot), without touching
# the host (make mesa26-root):
#
#   sh scripts/mesa26-root.sh ROOT
#
# The packages (sid's libc6, libvulkan1, mesa-vulkan-drivers, glslc and
# what they depend on) are downloaded through a private apt state and
# unpacked into ROOT, never installed: the host's dpkg is left alone, and
# nothing is mounted, so ROOT is plain files that rm -rf removes safely.
# Programs run with sid's own dynamic loader and libraries (the host's
# glibc is older than sid's Mesa needs), through two wrappers it writes:
#
#   ROOT/run PROGRAM ARGS...   a host-built Go binary (engine/gpu's test
#                              binary, edgellmd) on Mesa 26 lavapipe
#   ROOT/glslc ARGS...         sid's glslc
#   ROOT/usr/include           sid's Vulkan headers
#
# A second run finds ROOT/.done with the same package list and does nothing
# (delete ROOT to refresh it). MIRROR overrides the Debian mirror (default: the one the host's apt
# uses). sid's Release file on a snapshot mirror is past its Valid-Until,
# so that check is off; the signatures are still checked against the host's
# Debian keyring.
set -eu
R=$(realpath -m "${1:?usage: mesa26-root.sh ROOT}")
# libvulkan-dev: sid's headers, against which engine/gpu/internal/vk checks
# its cooperative-matrix struct mirrors (Debian 12's predate them).
want="libc6 libvulkan1 libvulkan-dev mesa-vulkan-drivers glslc"
if [ -e "$R/.done" ] && [ "$(cat "$R/.done")" = "$want" ]; then exit 0; fi
if [ -z "${MIRROR:-}" ]; then
	MIRROR=$(grep -h -o -E 'https?://[^ ]*debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | tr -d ' ' || true)
	MIRROR=${MIRROR:-http://deb.debian.org/debian}
fi
# Only a root this script made (its .done) or an empty folder is replaced.
if [ "$R" = / ] || { [ -d "$R" ] && [ ! -e "$R/.done" ] && [ -n "$(ls -A "$R")" ]; }; then
	echo "mesa26-root: $R is not empty and was not made by this script: give an empty or new folder" >&2
	exit 1
fi
rm -rf "$R"
mkdir -p "$R/.debs"
L=$(mktemp -d)
trap 'rm -rf "$L"' EXIT
mkdir -p "$L/lists/partial" "$L/cache/archives/partial"
echo "deb $MIRROR sid main" >"$L/sources.list"
o="-q -oDir::Etc::SourceList=$L/sources.list -oDir::Etc::SourceParts=$L/none -oDir::State::Lists=$L/lists -oDir::Cache=$L/cache -oDir::State::status=/dev/null -oAcquire::Check-Valid-Until=false -oAPT::Sandbox::User=root"
echo "mesa26-root: sid from $MIRROR -> $R"
# shellcheck disable=SC2086
apt-get $o update >/dev/null
# shellcheck disable=SC2086
pkgs=$(apt-cache $o depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks --no-replaces --no-enhances --no-pre-depends \
	$want | grep -E '^[a-z0-9]' | sort -u |
	grep -v -E '^(debconf|perl-base|dpkg|sensible-utils|gcc-.*-base|libc-bin|tar|install-info)$')
cd "$R/.debs"
# shellcheck disable=SC2086
apt-get $o download $pkgs >/dev/null
for f in ./*.deb; do dpkg-deb -x "$f" "$R"; done
cd "$R"
ld=$R/usr/lib64/ld-linux-x86-64.so.2
lib=$R/usr/lib/x86_64-linux-gnu
[ -x "$ld" ] && [ -e "$lib/libvulkan_lvp.so" ] && [ -x "$R/usr/bin/glslc" ] || {
	echo "mesa26-root: the unpacked packages lack $ld, libvulkan_lvp.so or glslc" >&2
	exit 1
}
# The loader finds lavapipe through this file alone (the library by its
# name, on the run wrapper's library path): the host's Mesa 22.3 and any
# real GPU's driver stay out of the test.
cp usr/share/vulkan/icd.d/lvp_icd.json "$R/lvp_icd.json"
# The wrappers find the root from where they are, so that it may move.
cat >"$R/run" <<'EOF'
#!/bin/sh
# Runs a host-built program on Mesa 26 lavapipe (scripts/mesa26-root.sh).
R=$(cd "$(dirname "$0")" && pwd)
exec env -u VK_ICD_FILENAMES -u VK_ADD_DRIVER_FILES VK_DRIVER_FILES="$R/lvp_icd.json" \
	"$R/usr/lib64/ld-linux-x86-64.so.2" --library-path "$R/usr/lib/x86_64-linux-gnu" "$@"
EOF
cat >"$R/glslc" <<'EOF'
#!/bin/sh
# sid's glslc (scripts/mesa26-root.sh).
R=$(cd "$(dirname "$0")" && pwd)
exec "$R/usr/lib64/ld-linux-x86-64.so.2" --library-path "$R/usr/lib/x86_64-linux-gnu" "$R/usr/bin/glslc" "$@"
EOF
chmod +x "$R/run" "$R/glslc"
rm -rf "$R/.debs"
"$R/glslc" --version | head -1
echo "mesa26-root: $(ls "$lib"/libvulkan_lvp.so) from mesa-vulkan-drivers $(apt-cache $o show mesa-vulkan-drivers | sed -n 's/^Version: //p' | head -1)"
echo "$want" >"$R/.done"
