#!/bin/sh
# test-deb.sh: build the .debs and check them (make test-deb).
#
#   1. build edgellmd_<v>_amd64.deb and _arm64.deb (packaging/build-deb.sh);
#   2. dpkg-deb --info/--contents: control fields (Depends: libc6,
#      Recommends: libvulkan1), conffiles, paths, modes, owners, the ELF
#      machine of each binary and the libraries it needs (glibc only), the
#      shipped config and model byte-equal to packaging/edgellmd.yaml and
#      testdata/models/;
#   3. lintian: no errors and no warnings (overrides carry their reasons in
#      debian/edgellmd.lintian-overrides);
#   4. systemd-analyze verify on the unit, inside the unpacked package; the
#      unit runs only programs the package ships (no /bin/kill: procps is
#      not on a minimal Debian or a trimmed Jetson image);
#   5. sh -n and shellcheck on the maintainer scripts;
#   6. install test in a debootstrapped Debian bookworm (as root, when
#      debootstrap is there and DEB_CHROOT_TEST is not 0): install, user,
#      files, conffile, enabled unit, `edgellmd version`, a short
#      generation and `edgellmd devices` (no Vulkan loader there) inside
#      the chroot; remove keeps state; upgrade to a newer
#      build keeps a locally edited conffile; purge removes state and config;
#   7. the package under a real systemd: a copy of that tree with systemd
#      added (and still no procps) booted as PID 1 in namespaces of its own
#      (PID, mount, network, UTS, IPC, cgroup): dpkg -i starts the service,
#      a completion over HTTP, systemctl reload (SIGHUP arrives, logged),
#      a config edit applied, kill -9 of the main process and the restart,
#      a SIGSTOPped daemon aborted by the watchdog and restarted,
#      systemctl stop with the prefix cache persisted.
#
# Tools: dpkg-deb, lintian, shellcheck, systemd (systemd-analyze), binutils
# (readelf), debootstrap (the chroot tests), util-linux's unshare and nsenter
# and curl (the systemd test). A check whose tool is missing fails, except
# the chroot tests, which are skipped with their reason when not root, when
# DEB_CHROOT_TEST=0 (both) or DEB_SYSTEMD_TEST=0 (the systemd one).
# DEB_CHROOT_CACHE (default ~/.cache/edgellmd/chroot-bookworm, outside the
# module so `go test ./...` never walks it) keeps the pristine debootstrapped
# tree between runs, and DEB_CHROOT_CACHE-systemd the one with systemd;
# DEB_MIRROR picks the mirror. The checks' harness and the tree's making and
# booting are packaging/check-lib.sh's, shared with scripts/apt-repo-check.sh.
# awk programs and unit lines are single-quoted on purpose ($1, $MAINPID):
# shellcheck disable=SC2016
set -eu

cd "$(dirname "$0")/.."
OUT=${DEB_OUT:-bin/deb}
export DEB_OUT="$OUT"
TMP=$(mktemp -d)
ROOT=""
CHECK_NAME=test-deb
# shellcheck source=packaging/check-lib.sh
. packaging/check-lib.sh
cleanup() {
	boot_cleanup
	if [ -n "$ROOT" ]; then
		if mountpoint -q "$ROOT/proc" && ! umount "$ROOT/proc"; then
			echo "test-deb: could not unmount $ROOT/proc; leaving $ROOT" >&2
		else
			rm -rf --one-file-system "$ROOT"
		fi
	fi
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

need() {
	command -v "$1" >/dev/null || {
		echo "test-deb: $1 not found: $2" >&2
		exit 1
	}
}
need dpkg-deb "apt-get install dpkg"
need lintian "apt-get install lintian"
need shellcheck "apt-get install shellcheck"
need systemd-analyze "apt-get install systemd"
need qemu-aarch64-static "apt-get install qemu-user-static"
need readelf "apt-get install binutils"
# The arm64 binary is a PIE: its loader comes from the cross libc.
QEMU_LD_PREFIX=${QEMU_LD_PREFIX:-/usr/aarch64-linux-gnu}
export QEMU_LD_PREFIX
[ -e "$QEMU_LD_PREFIX/lib/ld-linux-aarch64.so.1" ] || {
	echo "test-deb: no arm64 loader under $QEMU_LD_PREFIX: apt-get install libc6-arm64-cross" >&2
	exit 1
}

# 1. Build.
rm -f "$OUT"/edgellmd_*.deb
start=$(date +%s)
sh packaging/build-deb.sh amd64 arm64 >"$TMP/built"
echo "built in $(($(date +%s) - start)) s:"
sed 's/^/      /' "$TMP/built"
[ "$(wc -l <"$TMP/built")" = 2 ] || {
	echo "test-deb: expected 2 packages" >&2
	exit 1
}

# shellcheck disable=SC2013 # one path per line, no spaces (checked by build-deb.sh)
for deb in $(cat "$TMP/built"); do
	arch=${deb##*_}
	arch=${arch%.deb}
	version=${deb##*/edgellmd_}
	version=${version%_*}
	echo "== $deb ($(du -k "$deb" | cut -f1) KiB)"

	# 2. Metadata and contents.
	field() { dpkg-deb --field "$deb" "$1"; }
	check "Package is edgellmd" test "$(field Package)" = edgellmd
	check "Version is $version" test "$(field Version)" = "$version"
	check "Architecture is $arch" test "$(field Architecture)" = "$arch"
	check "Depends on adduser" sh -c "dpkg-deb --field '$deb' Depends | grep -qw adduser"
	check "Depends on libc6 (>= 2.31)" sh -c "dpkg-deb --field '$deb' Depends | grep -qF 'libc6 (>= 2.31)'"
	check "Recommends libvulkan1" sh -c "dpkg-deb --field '$deb' Recommends | grep -qw libvulkan1"
	check "Suggests a Vulkan driver" sh -c "dpkg-deb --field '$deb' Suggests | grep -q 'nvidia-l4t-3d-core | nvidia-vulkan-icd | mesa-vulkan-drivers'"
	for f in Maintainer Installed-Size Section Priority Homepage Description; do
		check "has $f" test -n "$(field "$f")"
	done
	check "dpkg-deb --info lists the maintainer scripts and conffiles" sh -c \
		"dpkg-deb --info '$deb' | grep -q ' postinst ' && dpkg-deb --info '$deb' | grep -q ' prerm ' &&
		 dpkg-deb --info '$deb' | grep -q ' postrm ' && dpkg-deb --info '$deb' | grep -q ' conffiles '"
	rm -rf "$TMP/ctl" "$TMP/root"
	dpkg-deb --control "$deb" "$TMP/ctl"
	dpkg-deb --extract "$deb" "$TMP/root"
	check "conffiles is exactly /etc/edgellmd/edgellmd.yaml" test "$(cat "$TMP/ctl/conffiles")" = /etc/edgellmd/edgellmd.yaml
	dpkg-deb --contents "$deb" >"$TMP/contents"
	for p in \
		'-rwxr-xr-x root/root ./usr/bin/edgellmd' \
		'-rw-r--r-- root/root ./lib/systemd/system/edgellmd.service' \
		'-rw-r--r-- root/root ./etc/edgellmd/edgellmd.yaml' \
		'drwxr-xr-x root/root ./etc/edgellmd/trusted.d/' \
		'-rw-r--r-- root/root ./usr/share/edgellmd/models/stories260K.gguf' \
		'-rw-r--r-- root/root ./usr/share/doc/edgellmd/copyright' \
		'-rw-r--r-- root/root ./usr/share/doc/edgellmd/changelog.gz' \
		'-rw-r--r-- root/root ./usr/share/doc/edgellmd/README.md.gz' \
		'-rw-r--r-- root/root ./usr/share/doc/edgellmd/README.packaging.md.gz' \
		'-rw-r--r-- root/root ./usr/share/doc/edgellmd/go-modules.txt' \
		'-rw-r--r-- root/root ./usr/share/man/man1/edgellmd.1.gz' \
		'-rw-r--r-- root/root ./usr/share/lintian/overrides/edgellmd'; do
		mode=${p%% *}
		rest=${p#* }
		owner=${rest%% *}
		path=${rest#* }
		check "contents: $path $mode $owner" awk -v m="$mode" -v o="$owner" -v p="$path" \
			'$1 == m && $2 == o && $6 == p { found = 1 } END { exit !found }' "$TMP/contents"
	done
	check "every entry is owned by root/root" awk '$2 != "root/root" { bad = 1; print } END { exit bad }' "$TMP/contents"
	check "shipped config equals packaging/edgellmd.yaml" cmp "$TMP/root/etc/edgellmd/edgellmd.yaml" packaging/edgellmd.yaml
	check "shipped unit equals packaging/edgellmd.service" cmp "$TMP/root/lib/systemd/system/edgellmd.service" packaging/edgellmd.service
	check "shipped model equals testdata/models/stories260K.gguf" cmp "$TMP/root/usr/share/edgellmd/models/stories260K.gguf" testdata/models/stories260K.gguf
	# ELF e_machine, little endian, at byte 18: 0x3e x86-64, 0xb7 AArch64.
	case "$arch" in
	amd64) want=3e ;;
	arm64) want=b7 ;;
	esac
	machine=$(od -An -tx1 -j18 -N1 "$TMP/root/usr/bin/edgellmd" | tr -d ' ')
	check "binary is ELF for $arch (e_machine 0x$want)" test "$machine" = "$want"
	check "md5sums match the files" sh -c "cd '$TMP/root' && md5sum --quiet -c '$TMP/ctl/md5sums'"
	# purego (the Vulkan binding) links glibc, and nothing else: libvulkan
	# is opened at run time, so the binary starts where it is missing.
	readelf -d "$TMP/root/usr/bin/edgellmd" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | LC_ALL=C sort >"$TMP/needed"
	check "binary needs only glibc (libc.so.6 libdl.so.2 libpthread.so.0), not libvulkan" \
		test "$(tr '\n' ' ' <"$TMP/needed")" = "libc.so.6 libdl.so.2 libpthread.so.0 "
	check "binary is a PIE bound now (hardening)" sh -c \
		"readelf -d '$TMP/root/usr/bin/edgellmd' | grep -q 'FLAGS_1.*NOW.*PIE\|FLAGS_1.*PIE.*NOW'"
	if [ "$arch" = amd64 ] && [ "$(uname -m)" = x86_64 ]; then
		check "edgellmd version prints $version" sh -c \
			"'$TMP/root/usr/bin/edgellmd' version | grep -qxF 'edgellmd $version'"
	fi

	# 3. lintian.
	if lintian --fail-on error,warning --display-info "$deb" >"$TMP/lintian" 2>&1; then
		pass "lintian: no errors or warnings ($(grep -c '^[EWIP]: ' "$TMP/lintian" || true) info/pedantic tags)"
	else
		fail "lintian"
	fi
	grep -v 'root privileges' "$TMP/lintian" | sed 's/^/      /' || true

	# 5. Maintainer scripts as shipped.
	for s in postinst prerm postrm; do
		check "sh -n DEBIAN/$s" sh -n "$TMP/ctl/$s"
		check "shellcheck DEBIAN/$s" shellcheck -s sh "$TMP/ctl/$s"
	done
	check "maintainer scripts equal debian/edgellmd.*" sh -c \
		"cmp '$TMP/ctl/postinst' debian/edgellmd.postinst && cmp '$TMP/ctl/prerm' debian/edgellmd.prerm && cmp '$TMP/ctl/postrm' debian/edgellmd.postrm"
done

# 4. The unit, from the unpacked amd64 tree. systemd-analyze verify runs on
# this machine's systemd units; a copy of the unit with /usr/bin/edgellmd
# pointed at the unpacked binary lets it check the Exec*= commands, and
# MANPATH at the unpacked man page lets it check Documentation=man:.
rm -rf "$TMP/root"
dpkg-deb --extract "$(grep _amd64.deb "$TMP/built")" "$TMP/root"
unit="$TMP/root/lib/systemd/system/edgellmd.service"
mkdir -p "$TMP/unit"
sed "s|/usr/bin/edgellmd|$TMP/root/usr/bin/edgellmd|g" "$unit" >"$TMP/unit/edgellmd.service"
man=yes
if ! command -v man >/dev/null; then
	man=no
	echo "note  man not installed: systemd-analyze verify --man=no (Documentation=man: unchecked)"
fi
if MANPATH="$TMP/root/usr/share/man" systemd-analyze verify --man=$man "$TMP/unit/edgellmd.service" >"$TMP/verify" 2>&1 &&
	! grep 'edgellmd' "$TMP/verify" >/dev/null; then
	pass "systemd-analyze verify edgellmd.service ($(systemd-analyze --version | head -1))"
else
	fail "systemd-analyze verify edgellmd.service"
fi
sed 's/^/      /' "$TMP/verify"
for k in 'Type=notify' 'ExecStartPre=+/usr/bin/edgellmd power pin' 'ExecStart=/usr/bin/edgellmd serve' \
	'ExecReload=/usr/bin/edgellmd reload --pid $MAINPID' 'WatchdogSec=120s' 'Restart=on-failure' 'User=_edgellmd' \
	'StateDirectory=edgellmd' 'CacheDirectory=edgellmd' 'ConfigurationDirectory=edgellmd' \
	'ProtectSystem=strict' 'ProtectHome=yes' 'PrivateTmp=yes' 'NoNewPrivileges=yes' \
	'LimitMEMLOCK=infinity' 'After=network.target nvpmodel.service'; do
	check "unit has $k" grep -qxF "$k" "$unit"
done
check "unit has no PrivateDevices= (the GPU is in /dev)" sh -c "! grep -q '^PrivateDevices' '$unit'"
# Depends names libc6 and adduser only: a program the unit runs from
# another package may be missing, as /bin/kill (procps) was on minimal
# systems, where systemctl reload then failed with 203/EXEC.
check "unit does not run /bin/kill (procps)" sh -c "! grep -n '^[^#]*bin/kill' '$unit'"
sed -n 's/^Exec[A-Za-z]*=[-+@!:|]*\([^ ]*\).*/\1/p' "$unit" | LC_ALL=C sort -u >"$TMP/exec"
check "unit has Exec*= lines" test -s "$TMP/exec"
while read -r prog; do
	check "unit's Exec*= program $prog is in the package" test -f "$TMP/root$prog" -a -x "$TMP/root$prog"
done <"$TMP/exec"
check "unit has no DevicePolicy=" sh -c "! grep -q '^DevicePolicy' '$unit'"
if systemd-analyze security --offline=yes "$TMP/unit/edgellmd.service" >"$TMP/security" 2>&1; then :; fi
if grep -q 'Overall exposure level' "$TMP/security"; then
	echo "info  systemd-analyze security: $(grep 'Overall exposure level' "$TMP/security" | sed 's/.*: //')"
fi

# 5b. Source copies of the scripts, and this tooling.
for s in debian/edgellmd.postinst debian/edgellmd.prerm debian/edgellmd.postrm \
	packaging/build-deb.sh packaging/test-deb.sh packaging/check-lib.sh; do
	check "sh -n $s" sh -n "$s"
	check "shellcheck $s" shellcheck -x -s sh "$s"
done

# 5c. The arm64 package's binary runs (under qemu user emulation, here
# on any machine) and decodes the bundled model as llama.cpp does: the
# first golden of testdata/golden/stories260K-greedy64.jsonl.
mkdir -p "$TMP/arm64root"
dpkg-deb --extract "$(grep _arm64.deb "$TMP/built")" "$TMP/arm64root"
golden=$(head -n 1 testdata/golden/stories260K-greedy64.jsonl)
prompt=$(printf '%s' "$golden" | sed 's/^{"prompt":"\([^"]*\)".*/\1/')
want=$(printf '%s' "$golden" | grep -o '"tokens":\[[^]]*\]')
check "arm64 edgellmd run (qemu-aarch64-static) gives llama.cpp's greedy tokens for \"$prompt\"" sh -c \
	"qemu-aarch64-static '$TMP/arm64root/usr/bin/edgellmd' run -m '$TMP/arm64root/usr/share/edgellmd/models/stories260K.gguf' \
		-p '$prompt' -n 64 --threads 1 --json | grep -o '\"tokens\":\\[[^]]*\\]' | grep -qxF '$want'"

# 6. Install test in a debootstrapped bookworm.
chroot_test() {
	deb=$(grep _amd64.deb "$TMP/built")
	version=${deb##*/edgellmd_}
	version=${version%_*}
	if [ ! -x "$BOOT_CACHE/usr/bin/dpkg" ]; then
		t0=$(date +%s)
		boot_debootstrap "$TMP/debootstrap.log" || {
			fail "debootstrap bookworm (log below)"
			tail -20 "$TMP/debootstrap.log" | sed 's/^/      /'
			return
		}
		pass "debootstrap --variant=minbase bookworm in $(($(date +%s) - t0)) s"
	fi
	ROOT=$(mktemp -d)
	cp -a "$BOOT_CACHE/." "$ROOT/"
	mount -t proc proc "$ROOT/proc" 2>/dev/null || true
	in_root() { chroot "$ROOT" "$@"; }

	cp "$deb" "$ROOT/tmp/new.deb"
	check "dpkg -i (first install)" in_root dpkg -i /tmp/new.deb
	check "user _edgellmd: system, home /var/lib/edgellmd" sh -c \
		"chroot '$ROOT' getent passwd _edgellmd | awk -F: '\$3 < 1000 && \$6 == \"/var/lib/edgellmd\" { ok = 1 } END { exit !ok }'"
	check "group _edgellmd exists" in_root getent group _edgellmd
	check "/var/lib/edgellmd owned by _edgellmd, 0750" sh -c \
		"test \"\$(chroot '$ROOT' stat -c '%U:%G %a' /var/lib/edgellmd)\" = '_edgellmd:_edgellmd 750'"
	check "/var/cache/edgellmd owned by _edgellmd" sh -c \
		"test \"\$(chroot '$ROOT' stat -c '%U' /var/cache/edgellmd)\" = _edgellmd"
	for f in /usr/bin/edgellmd /lib/systemd/system/edgellmd.service /etc/edgellmd/edgellmd.yaml \
		/usr/share/edgellmd/models/stories260K.gguf; do
		check "installed $f" test -f "$ROOT$f"
	done
	check "dpkg knows /etc/edgellmd/edgellmd.yaml as a conffile" sh -c \
		"chroot '$ROOT' dpkg-query -W -f='\${Conffiles}' edgellmd | grep -q '^ /etc/edgellmd/edgellmd.yaml '"
	check "unit enabled (multi-user.target.wants link)" test -L "$ROOT/etc/systemd/system/multi-user.target.wants/edgellmd.service"
	check "edgellmd version in the chroot prints $version" sh -c \
		"chroot '$ROOT' /usr/bin/edgellmd version | grep -qxF 'edgellmd $version'"
	check "edgellmd run on the bundled model in the chroot, as _edgellmd" sh -c \
		"chroot --userspec=_edgellmd:_edgellmd '$ROOT' /usr/bin/edgellmd run -m /usr/share/edgellmd/models/stories260K.gguf -p 'Once upon a time' -n 8 | grep -q ."
	# minbase has no libvulkan1: the binary still starts, and says so.
	check "edgellmd devices without libvulkan1 names the loader to install" sh -c \
		"chroot '$ROOT' /usr/bin/edgellmd devices >'$TMP/devices' && grep -q 'no Vulkan loader' '$TMP/devices' &&
		 grep -q 'apt-get install libvulkan1' '$TMP/devices'"

	# Remove keeps config and state.
	echo "# local edit by test-deb" >>"$ROOT/etc/edgellmd/edgellmd.yaml"
	mkdir -p "$ROOT/var/lib/edgellmd/cache"
	echo state >"$ROOT/var/lib/edgellmd/cache/marker"
	check "dpkg -r" in_root dpkg -r edgellmd
	check "remove kept the state" test -f "$ROOT/var/lib/edgellmd/cache/marker"
	check "remove kept the edited conffile" grep -q 'local edit by test-deb' "$ROOT/etc/edgellmd/edgellmd.yaml"
	check "remove deleted the binary" test ! -e "$ROOT/usr/bin/edgellmd"
	check "dpkg -i again (reinstall over removed)" in_root dpkg -i /tmp/new.deb </dev/null

	# Upgrade to a newer build keeps the edited conffile, without a prompt.
	newer="$version+upgradetest"
	DEB_VERSION="$newer" DEB_OUT="$TMP/newer" sh packaging/build-deb.sh amd64 >"$TMP/newer.path"
	cp "$(cat "$TMP/newer.path")" "$ROOT/tmp/newer.deb"
	check "dpkg -i newer build ($newer), stdin closed" in_root dpkg -i /tmp/newer.deb </dev/null
	check "upgraded: edgellmd version prints $newer" sh -c \
		"chroot '$ROOT' /usr/bin/edgellmd version | grep -qxF 'edgellmd $newer'"
	check "upgrade kept the edited conffile" grep -q 'local edit by test-deb' "$ROOT/etc/edgellmd/edgellmd.yaml"
	check "upgrade left no .dpkg-new/.dpkg-dist" sh -c "! ls '$ROOT'/etc/edgellmd/*.dpkg-* 2>/dev/null"
	check "upgrade kept the state" test -f "$ROOT/var/lib/edgellmd/cache/marker"

	# Purge removes state, cache, config and the enablement.
	check "dpkg --purge" in_root dpkg --purge edgellmd
	for d in /var/lib/edgellmd /var/cache/edgellmd /etc/edgellmd /usr/bin/edgellmd \
		/etc/systemd/system/multi-user.target.wants/edgellmd.service; do
		check "purge removed $d" test ! -e "$ROOT$d"
	done
	check "purge kept the system user (Debian practice)" in_root getent passwd _edgellmd
}
if [ "${DEB_CHROOT_TEST:-1}" = 0 ]; then
	echo "skip  chroot install test: DEB_CHROOT_TEST=0"
elif [ "$(id -u)" != 0 ]; then
	echo "skip  chroot install test: needs root (chroot, dpkg in the tree)"
elif ! command -v debootstrap >/dev/null; then
	echo "skip  chroot install test: debootstrap not found (apt-get install debootstrap)"
else
	t0=$(date +%s)
	chroot_test
	echo "chroot install test took $(($(date +%s) - t0)) s"
fi

# 7. The package under a real systemd. The bookworm tree gets systemd
# (without Recommends: still no procps, so no /bin/kill), and a copy of it
# boots with systemd as PID 1 in namespaces of its own: PID and mount (its
# mounts never reach this machine), network (its 127.0.0.1:8001 is its
# own), UTS, IPC, and cgroup, rooted in cgroups made for it and removed
# afterwards. Commands reach it through nsenter; HTTP goes from this
# machine's curl in its network namespace (packaging/check-lib.sh: the tree,
# its boot, in_sd, http, sd_show, sd_health_ok, sd_until).

sd_journal() { in_sd journalctl -u edgellmd -o cat --no-pager; }
sd_reloads() { sd_journal | grep -c '"message":"config reloaded"' || true; }
sd_more_reloads() { [ "$(sd_reloads)" -gt "$1" ]; } # sd_more_reloads N: more than N logged
sd_status_has() { http http://127.0.0.1:8001/status.json | grep -qF "$1"; }
sd_restarted() { # sd_restarted OLDPID: active, with a new main process
	p=$(sd_show MainPID) || return
	[ "$p" != 0 ] && [ "$p" != "$1" ] && in_sd systemctl is-active --quiet edgellmd
}
sd_same_main() { [ "$(sd_show MainPID)" = "$1" ] && in_sd systemctl is-active --quiet edgellmd; }
sd_stopped() { ! in_sd systemctl is-active --quiet edgellmd && [ "$(sd_show Result)" = success ]; }

systemd_test() {
	deb=$(grep _amd64.deb "$TMP/built")
	if [ ! -x "$BOOT_CACHE/usr/bin/dpkg" ]; then
		fail "systemd test: no bookworm tree at $BOOT_CACHE (the chroot install test makes it)"
		return
	fi
	if [ ! -x "$BOOT_SDCACHE/lib/systemd/systemd" ]; then
		ta=$(date +%s)
		if ! boot_add_systemd "$TMP/apt.log"; then
			fail "apt-get install systemd in the bookworm tree (log below)"
			tail -20 "$TMP/apt.log" | sed 's/^/      /'
			return
		fi
		pass "systemd added to the bookworm tree in $(($(date +%s) - ta)) s"
	fi
	check "no /bin/kill in the tree with systemd (procps not installed)" \
		test ! -e "$BOOT_SDCACHE/bin/kill" -a ! -e "$BOOT_SDCACHE/usr/bin/kill"
	boot_tree
	cp "$deb" "$SDROOT/root/new.deb" # not /tmp: systemd mounts a tmpfs there
	f0=$fails
	if boot_start; then
		pass "systemd boots as PID 1 in namespaces of its own: $BOOT_STATE in $BOOT_SECONDS s"
		if [ "$BOOT_STATE" = degraded ]; then
			echo "info  failed units: $(in_sd systemctl --failed --plain --no-legend | awk '{ printf "%s ", $1 }' || true)"
		fi
	else
		fail "systemd boots as PID 1 in namespaces of its own (state \"$BOOT_STATE\" after 60 s; log below)"
		sed 's/^/      /' "$TMP/boot.log" "$TMP/console"
		ns_stop
		return
	fi

	check "dpkg -i under systemd" in_sd dpkg -i /root/new.deb
	check "postinst started edgellmd.service" in_sd systemctl is-active --quiet edgellmd
	sd_show StatusText >"$TMP/statustext" 2>&1 || true
	check "the daemon's STATUS= reached systemd (serving stories260K)" grep -q 'serving stories260K' "$TMP/statustext"
	http -H 'content-type: application/json' -d '{"prompt":"Once upon a time","max_tokens":8}' \
		http://127.0.0.1:8001/v1/completions >"$TMP/completion" 2>&1 || true
	check "a completion over HTTP from the service (127.0.0.1:8001)" grep -q '"text":"[^"]' "$TMP/completion"

	# systemctl reload with the file unchanged: only the SIGHUP that
	# ExecReload= sends can make the daemon log a reload (its config watch
	# reloads on edits only).
	pid0=$(sd_show MainPID || true)
	n0=$(sd_reloads)
	check "systemctl reload edgellmd" in_sd systemctl reload edgellmd
	in_sd systemctl show -P ExecReload edgellmd >"$TMP/execreload" 2>&1 || true
	check "ExecReload= (edgellmd reload --pid \$MAINPID) exited 0" grep -q 'argv\[\]=/usr/bin/edgellmd reload --pid .*code=exited ; status=0 ' "$TMP/execreload"
	sd_until 10 sd_more_reloads "$n0" || true
	check "the daemon got SIGHUP and logged \"config reloaded\"" sd_more_reloads "$n0"
	check "the reload kept the main process ($pid0), active" sd_same_main "$pid0"
	# An edit, then systemctl reload: /status.json has the new draft mode.
	sed -i 's/^  mode: "off"$/  mode: "tree"/' "$SDROOT/etc/edgellmd/edgellmd.yaml" || true
	check "the config edit is in place (draft.mode: tree)" grep -qx '  mode: "tree"' "$SDROOT/etc/edgellmd/edgellmd.yaml"
	check "systemctl reload edgellmd after the edit" in_sd systemctl reload edgellmd
	sd_until 10 sd_status_has '"mode":"tree"' || true
	check "the edit applied: /status.json has draft mode tree" sd_status_has '"mode":"tree"'

	# kill -9 of the main process: Restart=on-failure starts it again.
	pid0=$(sd_show MainPID || true)
	check "kill -9 the main process ($pid0)" nsenter -t "$NS_INIT" -p sh -c "kill -9 $pid0"
	sd_until 30 sd_restarted "$pid0" || true
	check "systemd started it again (Restart=on-failure): active, a new main process" sd_restarted "$pid0"
	check "NRestarts=1" test "$(sd_show NRestarts)" = 1
	in_sd journalctl -u edgellmd --no-pager >"$TMP/journal" 2>&1 || true
	check "the journal has the kill (status=9/KILL)" grep -q 'status=9/KILL' "$TMP/journal"
	http http://127.0.0.1:8001/health >"$TMP/health" 2>&1 || true
	check "after the restart /health answers ok" grep -q '"status":"ok"' "$TMP/health"

	# A hung daemon (SIGSTOP): the watchdog (a 4 s drop-in instead of the
	# unit's 120 s) aborts it and Restart=on-failure starts it again.
	mkdir -p "$SDROOT/etc/systemd/system/edgellmd.service.d"
	printf '[Service]\nWatchdogSec=4s\n' >"$SDROOT/etc/systemd/system/edgellmd.service.d/watchdog-test.conf"
	in_sd systemctl daemon-reload || true
	check "systemctl restart edgellmd with WatchdogSec=4s" in_sd systemctl restart edgellmd
	sd_until 30 sd_health_ok || true
	check "serving again after the restart" sd_health_ok
	sleep 6 # longer than the watchdog: a daemon that pings is not killed
	pid1=$(sd_show MainPID || true)
	check "a live daemon outlasts the 4 s watchdog (main process $pid1 kept)" sd_same_main "$pid1"
	check "SIGSTOP the main process ($pid1)" nsenter -t "$NS_INIT" -p sh -c "kill -STOP $pid1"
	sd_until 40 sd_restarted "$pid1" || true
	check "the watchdog aborted the hung daemon and systemd started it again" sd_restarted "$pid1"
	in_sd journalctl -u edgellmd --no-pager >"$TMP/journal" 2>&1 || true
	check "the journal has the watchdog timeout" grep -qi 'watchdog timeout' "$TMP/journal"
	rm -f "$SDROOT/etc/systemd/system/edgellmd.service.d/watchdog-test.conf"
	in_sd systemctl daemon-reload || true
	sd_until 30 sd_health_ok || true

	# Stop: the prefix cache's snapshots are on disk (the completions
	# above published them), in cache.dir.
	http -X POST -H 'Content-Type: application/json' -d '{"prompt":"Once upon a time, there was a little dog","max_tokens":4}' \
		http://127.0.0.1:8001/v1/completions >"$TMP/completion2" 2>&1 || true
	check "systemctl stop edgellmd" in_sd systemctl stop edgellmd
	check "stopped: inactive, Result=success (SIGTERM drains, exit 0)" sd_stopped
	check "the prefix cache was persisted on stop (a non-empty segment in /var/lib/edgellmd/cache)" \
		sh -c "find '$SDROOT/var/lib/edgellmd/cache' -name '*.seg' -size +0 | grep -q ."
	if [ "$fails" -ne "$f0" ]; then
		echo "      edgellmd.service's journal (last 40 lines):"
		in_sd journalctl -u edgellmd --no-pager | tail -40 | cut -c1-240 | sed 's/^/      /'
	fi
	ns_stop
}
if [ "${DEB_CHROOT_TEST:-1}" = 0 ] || [ "${DEB_SYSTEMD_TEST:-1}" = 0 ]; then
	echo "skip  systemd test: DEB_CHROOT_TEST=0 or DEB_SYSTEMD_TEST=0"
elif [ "$(id -u)" != 0 ]; then
	echo "skip  systemd test: needs root (namespaces, chroot)"
elif ! command -v debootstrap >/dev/null; then
	echo "skip  systemd test: debootstrap not found (apt-get install debootstrap)"
elif ! command -v unshare >/dev/null || ! command -v nsenter >/dev/null || ! command -v curl >/dev/null; then
	echo "skip  systemd test: needs unshare and nsenter (util-linux) and curl"
elif ! unshare --fork --pid --mount --net --uts --ipc --cgroup true 2>"$TMP/unshare.err"; then
	echo "skip  systemd test: no new namespaces on this machine: $(head -n 1 "$TMP/unshare.err")"
else
	t0=$(date +%s)
	systemd_test
	echo "systemd test took $(($(date +%s) - t0)) s"
fi

if [ "$fails" -ne 0 ]; then
	echo "test-deb: $fails check(s) failed"
	exit 1
fi
echo "test-deb: all checks passed"
