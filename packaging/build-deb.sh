#!/bin/sh
# build-deb.sh: build edgellmd_<version>_<arch>.deb for each architecture,
# from any machine with Go and dpkg-deb (pure-Go cross build, no cgo).
#
#   packaging/build-deb.sh [ARCH...]        (default: amd64 arm64)
#
# Environment:
#   GO           go command (default: go)
#   DEB_OUT      output folder (default: bin/deb)
#   DEB_VERSION  package version (default: from git, see deb_version below)
#
# Layout, control fields and maintainer scripts come from debian/; the unit
# and default config from packaging/. Prints the path of each .deb built.
set -eu

cd "$(dirname "$0")/.."
GO=${GO:-go}
OUT=${DEB_OUT:-bin/deb}
PKG=edgellmd
umask 022

die() { echo "build-deb: $*" >&2; exit 1; }

command -v dpkg-deb >/dev/null || die "dpkg-deb not found (apt-get install dpkg)"

# Version of the newest debian/changelog entry.
changelog_version() {
	sed -n '1s/^[a-z0-9.+-]* (\([^)]*\)).*/\1/p' debian/changelog
}

# deb_version derives the package version from git:
#   HEAD tagged vX.Y.Z          -> X.Y.Z
#   N commits after vX.Y.Z      -> X.Y.Z+gitN.HASH
#   no tag                      -> C~gitN.HASH (C: newest debian/changelog
#                                  version, N: commits in HEAD; sorts before C)
#   uncommitted changes         -> the above + "+dirty"
#   not a git checkout          -> C
deb_version() {
	base=$(changelog_version)
	[ -n "$base" ] || die "debian/changelog: no version in its first line"
	if ! git rev-parse --git-dir >/dev/null 2>&1; then
		echo "$base"
		return
	fi
	hash=$(git rev-parse --short=7 HEAD)
	dirty=""
	if ! git diff --quiet HEAD -- 2>/dev/null; then
		dirty="+dirty"
	fi
	if desc=$(git describe --tags --long --match 'v[0-9]*' 2>/dev/null); then
		# v1.2.3-4-gabcdef0
		tag=${desc%-*-g*}
		n=${desc#"$tag"-}
		n=${n%%-g*}
		v=${tag#v}
		if [ "$n" = 0 ]; then
			echo "$v$dirty"
		else
			echo "$v+git$n.$hash$dirty"
		fi
		return
	fi
	n=$(git rev-list --count HEAD)
	echo "$base~git$n.$hash$dirty"
}

VERSION=${DEB_VERSION:-$(deb_version)}
case "$VERSION" in
[0-9]*) ;;
*) die "version $VERSION does not start with a digit" ;;
esac
case "$VERSION" in
*[!0-9A-Za-z.+~]*) die "version $VERSION has characters a native Debian version cannot hold" ;;
esac

# Reproducible timestamps: the commit time (dpkg-deb and gzip honour it).
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH
CHANGE_DATE=$(date -u -R -d "@$SOURCE_DATE_EPOCH")

# field NAME: a field of the binary package's stanza in debian/control.
field() {
	awk -v f="$1" '
		/^Package:/ { inpkg = 1 }
		inpkg && index($0, f ":") == 1 { sub("^" f ":[ \t]*", ""); print; exit }
	' debian/control
}
# The Description field with its continuation lines.
description() {
	awk '
		/^Package:/ { inpkg = 1 }
		inpkg && /^Description:/ { on = 1; print; next }
		on && /^ / { print; next }
		on { exit }
	' debian/control
}
source_field() {
	awk -v f="$1" '
		/^$/ { exit }
		index($0, f ":") == 1 { sub("^" f ":[ \t]*", ""); print; exit }
	' debian/control
}

# changelog: debian/changelog, with a snapshot entry on top when the build's
# version is not the newest entry's.
write_changelog() {
	if [ "$VERSION" != "$(changelog_version)" ]; then
		rev=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
		printf '%s (%s) UNRELEASED; urgency=medium\n\n' "$PKG" "$VERSION"
		printf '  * Snapshot build from git %s.\n\n' "$rev"
		printf ' -- %s  %s\n\n' "$(source_field Maintainer)" "$CHANGE_DATE"
	fi
	cat debian/changelog
}

build_one() {
	arch=$1
	case "$arch" in
	amd64 | arm64) ;;
	*) die "unsupported architecture $arch (want amd64 or arm64)" ;;
	esac
	stage="$OUT/stage-$arch"
	rm -rf "$stage"
	mkdir -p "$stage/DEBIAN" "$stage/usr/bin" "$stage/lib/systemd/system" \
		"$stage/etc/$PKG/trusted.d" "$stage/usr/share/$PKG/models" \
		"$stage/usr/share/doc/$PKG" "$stage/usr/share/man/man1" \
		"$stage/usr/share/lintian/overrides"

	# -s -w: no symbol table or DWARF (Debian ships stripped binaries);
	# -buildmode=pie and -bindnow: position-independent with immediate
	# binding (relro), as Debian's hardening flags ask. Still no cgo: the
	# Vulkan binding (engine/gpu, through purego) makes Go's own linker
	# name libc.so.6, libdl.so.2 and libpthread.so.0 as DT_NEEDED, all of
	# them glibc's (Depends: libc6); libvulkan.so.1 is opened at run time
	# only when present (Recommends: libvulkan1).
	GOOS=linux GOARCH=$arch CGO_ENABLED=0 "$GO" build -trimpath -buildmode=pie \
		-ldflags "-s -w -bindnow -X main.version=$VERSION" \
		-o "$stage/usr/bin/$PKG" ./cmd/edgellmd
	chmod 0755 "$stage/usr/bin/$PKG"

	install -m 0644 packaging/edgellmd.service "$stage/lib/systemd/system/$PKG.service"
	install -m 0644 packaging/edgellmd.yaml "$stage/etc/$PKG/$PKG.yaml"
	install -m 0644 testdata/models/stories260K.gguf "$stage/usr/share/$PKG/models/stories260K.gguf"
	install -m 0644 debian/copyright "$stage/usr/share/doc/$PKG/copyright"
	# Policy 12.3: documentation over 4 KiB is compressed.
	gzip -9n <README.md >"$stage/usr/share/doc/$PKG/README.md.gz"
	gzip -9n <packaging/README.md >"$stage/usr/share/doc/$PKG/README.packaging.md.gz"
	write_changelog | gzip -9n >"$stage/usr/share/doc/$PKG/changelog.gz"
	gzip -9n <debian/edgellmd.1 >"$stage/usr/share/man/man1/$PKG.1.gz"
	install -m 0644 debian/edgellmd.lintian-overrides "$stage/usr/share/lintian/overrides/$PKG"
	# The Go modules linked into the binary (copyright's Comment points here).
	"$GO" version -m "$stage/usr/bin/$PKG" | awk '$1 == "dep" { print $2, $3 }' \
		>"$stage/usr/share/doc/$PKG/go-modules.txt"
	chmod 0644 "$stage/usr/share/doc/$PKG/"*

	for s in postinst prerm postrm; do
		install -m 0755 "debian/$PKG.$s" "$stage/DEBIAN/$s"
	done
	install -m 0644 debian/conffiles "$stage/DEBIAN/conffiles"
	(cd "$stage" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' |
		LC_ALL=C sort | xargs md5sum) >"$stage/DEBIAN/md5sums"
	chmod 0644 "$stage/DEBIAN/md5sums"

	size=$(du -sk --apparent-size --exclude=DEBIAN "$stage" | cut -f1)
	{
		echo "Package: $PKG"
		echo "Version: $VERSION"
		echo "Architecture: $arch"
		echo "Maintainer: $(source_field Maintainer)"
		echo "Installed-Size: $size"
		echo "Depends: $(field Depends)"
		rec=$(field Recommends)
		if [ -n "$rec" ]; then echo "Recommends: $rec"; fi
		sug=$(field Suggests)
		if [ -n "$sug" ]; then echo "Suggests: $sug"; fi
		echo "Section: $(source_field Section)"
		echo "Priority: $(source_field Priority)"
		echo "Homepage: $(source_field Homepage)"
		description
	} >"$stage/DEBIAN/control"

	# Directories 0755, whatever the umask of the checkout.
	find "$stage" -type d -exec chmod 0755 {} +
	# Timestamps no later than the commit (dpkg-deb clamps the tar members).
	deb="$OUT/${PKG}_${VERSION}_${arch}.deb"
	dpkg-deb --root-owner-group -Zxz --build "$stage" "$deb" >/dev/null
	rm -rf "$stage"
	echo "$deb"
}

mkdir -p "$OUT"
ARCHS=${*:-amd64 arm64}
for a in $ARCHS; do
	build_one "$a"
done
