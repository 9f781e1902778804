#!/usr/bin/env bash
# apt-repo-check: the fleet apt repository (scripts/apt-repo.sh) as a box
# sees it, in a Debian bookworm booted with systemd as PID 1 in namespaces
# of its own (the tree and the boot of packaging/test-deb.sh), with the
# repository served over HTTP on that box's 127.0.0.1 (make apt-repo-check):
#
#   1. the repository: version V1 (amd64 and arm64) published, signed by a
#      key generated for it; the box gets the key (/etc/apt/keyrings) and
#      edgellmd.sources (Signed-By), nothing else (no Debian mirror);
#   2. apt-get install edgellmd: V1, started by its postinst;
#   3. the config edited (draft.mode tree), a few completions (prefix cache);
#   4. a repository signed by another key and one not signed: apt-get update
#      refuses both (apt's error text checked) and their newer version is
#      not installable;
#   5. V2 published (its default config changed, as a release that changes
#      a default does); apt-get update && apt-get upgrade, non-interactive,
#      --force-confdef --force-confold: the edited config kept (V2's default
#      beside it as .dpkg-dist), the service restarted by the maintainer
#      scripts under systemd (a new main process running V2), the prefix
#      cache persisted by V1 restored by V2 and hit by the same request;
#   6. pinning back: apt-get install edgellmd=V1 --allow-downgrades, then a
#      Pin-Priority 1001 in /etc/apt/preferences.d that holds it there
#      against apt-get upgrade.
#
# Needs root, debootstrap, aptly, gpg, python3, curl, unshare and nsenter.
# DEB_CHROOT_CACHE as for test-deb (the pristine tree; the one with systemd
# beside it, made here when test-deb has not made it): packaging/check-lib.sh
# makes and boots the tree for both. APT_CHECK_DEBS: V1's
# two .debs already built (CI passes the ones make test-deb just built);
# else they are built here.
# shellcheck disable=SC2016 # awk programs single-quoted on purpose
set -euo pipefail
cd "$(dirname "$0")/.."

TMP=$(mktemp -d /tmp/apt-repo-check.XXXXXX)
CHECK_NAME=apt-repo-check
# shellcheck source=packaging/check-lib.sh
. packaging/check-lib.sh
HTTPD=""
die() {
	echo "apt-repo-check: $*" >&2
	exit 1
}

cleanup() {
	if [ -n "$HTTPD" ]; then
		kill "$HTTPD" 2>/dev/null || true
		wait "$HTTPD" 2>/dev/null || true
	fi
	boot_cleanup
	for g in "$TMP"/*/gnupg; do
		if [ -d "$g" ]; then GNUPGHOME=$g gpgconf --kill gpg-agent 2>/dev/null || true; fi
	done
	rm -rf --one-file-system "$TMP"
}
trap cleanup EXIT INT TERM

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, namespaces)"
for t in debootstrap aptly gpg gpgv python3 curl unshare nsenter dpkg-deb; do
	command -v "$t" >/dev/null || die "$t not found (apt-get install debootstrap aptly gnupg python3 curl util-linux dpkg)"
done
t0=$(date +%s)

# The bookworm tree with systemd: test-deb's, or made here the same way.
if [ ! -x "$BOOT_SDCACHE/lib/systemd/systemd" ]; then
	if [ ! -x "$BOOT_CACHE/usr/bin/dpkg" ]; then
		boot_debootstrap "$TMP/debootstrap.log" ||
			{ tail -20 "$TMP/debootstrap.log"; die "debootstrap bookworm failed"; }
	fi
	boot_add_systemd "$TMP/apt.log" ||
		{ tail -20 "$TMP/apt.log"; die "apt-get install systemd in the bookworm tree failed"; }
	echo "made the bookworm tree with systemd at $BOOT_SDCACHE"
fi

# 1. Packages: V1 for amd64 and arm64, V2 (amd64) with a changed default
# config.
if [ -n "${APT_CHECK_DEBS:-}" ]; then
	read -r -a v1debs <<<"$APT_CHECK_DEBS"
else
	base=$(sed -n '1s/^[a-z0-9.+-]* (\([^)]*\)).*/\1/p' debian/changelog)
	mapfile -t v1debs < <(DEB_VERSION="$base+fleet1" DEB_OUT="$TMP/v1" sh packaging/build-deb.sh amd64 arm64)
fi
v1amd=""
for d in "${v1debs[@]}"; do
	case "$(dpkg-deb --field "$d" Architecture)" in amd64) v1amd=$d ;; esac
done
[ -n "$v1amd" ] || die "no amd64 package among ${v1debs[*]}"
V1=$(dpkg-deb --field "$v1amd" Version)
V2="$V1+fleet2"
DEB_VERSION="$V2" DEB_OUT="$TMP/v2build" sh packaging/build-deb.sh amd64 >"$TMP/v2.path"
dpkg-deb -R "$(cat "$TMP/v2.path")" "$TMP/v2tree"
printf '\n# A default added in %s (apt-repo-check).\n' "$V2" >>"$TMP/v2tree/etc/edgellmd/edgellmd.yaml"
(cd "$TMP/v2tree" && find . -path ./DEBIAN -prune -o -type f -print | sed 's|^\./||' | LC_ALL=C sort |
	xargs md5sum) >"$TMP/v2tree/DEBIAN/md5sums"
mkdir -p "$TMP/v2"
v2deb="$TMP/v2/edgellmd_${V2}_amd64.deb"
dpkg-deb --root-owner-group -Zxz --build "$TMP/v2tree" "$v2deb" >/dev/null
echo "packages: V1 $V1 (${#v1debs[@]} files), V2 $V2 (amd64) in $(($(date +%s) - t0)) s"

# Repositories: the fleet's (V1 now, V2 later), one signed by another key
# and one not signed (both with V2).
check "make apt-repo's script publishes V1 ($V1, amd64 + arm64) with a generated key" \
	env APT_REPO_DIR="$TMP/repo" APT_REPO_URL=http://127.0.0.1:8080/fleet bash scripts/apt-repo.sh "${v1debs[@]}"
pub=$TMP/repo/public
check "the repository lists $V1 for amd64 and arm64" sh -c \
	"grep -qx 'Version: $V1' '$pub/dists/stable/main/binary-amd64/Packages' && grep -qx 'Version: $V1' '$pub/dists/stable/main/binary-arm64/Packages'"
check "dists/stable/InRelease and Release.gpg verify against edgellmd.gpg (gpgv)" sh -c \
	"gpgv --keyring '$pub/edgellmd.gpg' '$pub/dists/stable/InRelease' && gpgv --keyring '$pub/edgellmd.gpg' '$pub/dists/stable/Release.gpg' '$pub/dists/stable/Release'"
check "edgellmd.gpg is a binary OpenPGP key (not armoured)" sh -c "! grep -q 'BEGIN PGP' '$pub/edgellmd.gpg' && test -s '$pub/edgellmd.gpg'"
check "edgellmd.sources: deb822 with Signed-By /etc/apt/keyrings/edgellmd.gpg" sh -c \
	"grep -qx 'Types: deb' '$pub/edgellmd.sources' && grep -qx 'URIs: http://127.0.0.1:8080/fleet' '$pub/edgellmd.sources' &&
	 grep -qx 'Suites: stable' '$pub/edgellmd.sources' && grep -qx 'Signed-By: /etc/apt/keyrings/edgellmd.gpg' '$pub/edgellmd.sources'"
check "the signing key stays out of public/" sh -c "! grep -rl 'PRIVATE KEY' '$pub' && test ! -e '$pub/gnupg'"
check "a second run with the same package is accepted (nothing changes)" \
	env APT_REPO_DIR="$TMP/repo" APT_REPO_URL=http://127.0.0.1:8080/fleet bash scripts/apt-repo.sh "$v1amd"
check "a repository signed by another key (V2)" env APT_REPO_DIR="$TMP/wrong" bash scripts/apt-repo.sh "$v2deb"
mkdir -p "$TMP/www"
cp -a "$TMP/wrong/public" "$TMP/www/unsigned"
rm -f "$TMP/www/unsigned/dists/stable/InRelease" "$TMP/www/unsigned/dists/stable/Release.gpg"
ln -s "$pub" "$TMP/www/fleet"
ln -s "$TMP/wrong/public" "$TMP/www/wrongkey"

# 2. Boot the tree (packaging/check-lib.sh, as test-deb does): PID, mount,
# network, UTS, IPC and cgroup namespaces, systemd as PID 1; its 127.0.0.1
# is its own, and the repository is served there.
boot_tree
# Only the fleet repository: the box's network namespace reaches nothing else.
rm -f "$SDROOT/etc/apt/sources.list" "$SDROOT"/etc/apt/sources.list.d/*
boot_start || {
	sed 's/^/      /' "$TMP/boot.log" "$TMP/console"
	die "systemd did not boot (state \"$BOOT_STATE\")"
}
pass "the box boots (systemd as PID 1 in namespaces of its own): $BOOT_STATE in $BOOT_SECONDS s"
apt_in() { in_sd env DEBIAN_FRONTEND=noninteractive apt-get -q -y "$@" </dev/null; }
UPGRADE_OPTS=(-o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold)

nsenter -t "$NS_INIT" -n ip link set lo up 2>/dev/null || true
nsenter -t "$NS_INIT" -n python3 -m http.server --bind 127.0.0.1 --directory "$TMP/www" 8080 >"$TMP/httpd.log" 2>&1 &
HTTPD=$!
for _ in $(seq 50); do
	http -o /dev/null http://127.0.0.1:8080/fleet/KEY 2>/dev/null && break
	sleep 0.1
done
check "the repository is served over HTTP in the box (http://127.0.0.1:8080/fleet)" http -f -o /dev/null http://127.0.0.1:8080/fleet/dists/stable/InRelease

# The box's setup, as packaging/fleet/README.md gives it.
mkdir -p "$SDROOT/etc/apt/keyrings"
cp "$pub/edgellmd.gpg" "$SDROOT/etc/apt/keyrings/edgellmd.gpg"
chmod 0644 "$SDROOT/etc/apt/keyrings/edgellmd.gpg"
cp "$pub/edgellmd.sources" "$SDROOT/etc/apt/sources.list.d/edgellmd.sources"
check "apt-get update (the fleet repository only)" apt_in update
check "apt-get install edgellmd" apt_in install edgellmd
check "installed $V1" sh -c "chroot '$SDROOT' dpkg-query -W -f='\${Version}' edgellmd | grep -qxF '$V1'"
check "apt-cache policy: $V1 from http://127.0.0.1:8080/fleet stable/main" sh -c \
	"chroot '$SDROOT' apt-cache policy edgellmd | grep -q 'http://127.0.0.1:8080/fleet stable/main'"

sd_until 30 sd_health_ok || true
check "postinst started edgellmd.service, /health ok" sd_health_ok
pid1=$(sd_show MainPID || echo 0)

# 3. The config edited, then requests that fill the prefix cache.
sed -i 's/^  mode: "off"$/  mode: "tree"/' "$SDROOT/etc/edgellmd/edgellmd.yaml"
check "the config edit is in place (draft.mode: tree)" grep -qx '  mode: "tree"' "$SDROOT/etc/edgellmd/edgellmd.yaml"
PROMPT="Once upon a time, there was a little dog named Max who liked to run in the park with his friends. One day, Max saw a big red ball under a tree and he wanted to play with it. He ran to the ball and"
complete() {
	http -H 'content-type: application/json' -d "{\"prompt\":\"$PROMPT\",\"max_tokens\":4,\"temperature\":0}" \
		http://127.0.0.1:8001/v1/completions
}
cached() { sed -n 's/.*"cached_tokens":\([0-9]*\).*/\1/p'; }
complete >"$TMP/c1" 2>&1 || true
complete >"$TMP/c2" 2>&1 || true
check "V1 serves completions; the second one hits its prefix cache ($(cached <"$TMP/c2") cached tokens)" \
	test "$(cached <"$TMP/c2")" -gt 0

# 4. Refused: another key, and no signature.
refused() { # refused NAME WANT: apt-get update on http://127.0.0.1:8080/NAME fails with WANT in its output
	printf 'Types: deb\nURIs: http://127.0.0.1:8080/%s\nSuites: stable\nComponents: main\nSigned-By: /etc/apt/keyrings/edgellmd.gpg\n' \
		"$1" >"$SDROOT/etc/apt/sources.list.d/edgellmd.sources"
	if apt_in update >"$TMP/refused.$1" 2>&1; then
		echo "apt-get update succeeded:"
		cat "$TMP/refused.$1"
		return 1
	fi
	grep -F "$2" "$TMP/refused.$1" || {
		cat "$TMP/refused.$1"
		return 1
	}
}
wrongkey=$(cut -c25-40 "$TMP/wrong/public/KEY")
check "a repository signed by another key is refused: NO_PUBKEY $wrongkey" \
	refused wrongkey "The following signatures couldn't be verified because the public key is not available: NO_PUBKEY $wrongkey"
check "... and apt says it is not signed" grep -F "E: The repository 'http://127.0.0.1:8080/wrongkey stable InRelease' is not signed." "$TMP/refused.wrongkey"
check "... and its $V2 cannot be installed" sh -c "! chroot '$SDROOT' apt-get -s install edgellmd='$V2' </dev/null"
check "an unsigned repository is refused: \"is not signed\"" \
	refused unsigned "E: The repository 'http://127.0.0.1:8080/unsigned stable Release' is not signed."
check "... and its $V2 cannot be installed" sh -c "! chroot '$SDROOT' apt-get -s install edgellmd='$V2' </dev/null"
cp "$pub/edgellmd.sources" "$SDROOT/etc/apt/sources.list.d/edgellmd.sources"
check "$V1 still installed and running" sh -c "chroot '$SDROOT' dpkg-query -W -f='\${Version}' edgellmd | grep -qxF '$V1'"

# 5. V2 published; the fleet's upgrade.
check "V2 ($V2) published to the fleet repository" \
	env APT_REPO_DIR="$TMP/repo" APT_REPO_URL=http://127.0.0.1:8080/fleet bash scripts/apt-repo.sh "$v2deb"
check "the repository keeps $V1 beside $V2" sh -c \
	"grep -qx 'Version: $V1' '$pub/dists/stable/main/binary-amd64/Packages' && grep -qx 'Version: $V2' '$pub/dists/stable/main/binary-amd64/Packages'"
check "apt-get update" apt_in update
apt_in "${UPGRADE_OPTS[@]}" upgrade >"$TMP/upgrade.log" 2>&1 && up=0 || up=$?
check "apt-get upgrade -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold (exit $up)" test "$up" = 0
[ "$up" = 0 ] || sed 's/^/      /' "$TMP/upgrade.log"
check "upgraded to $V2" sh -c "chroot '$SDROOT' dpkg-query -W -f='\${Version}' edgellmd | grep -qxF '$V2'"
check "edgellmd version prints $V2" sh -c "chroot '$SDROOT' edgellmd version | grep -qxF 'edgellmd $V2'"
check "the edited config kept (draft.mode: tree)" grep -qx '  mode: "tree"' "$SDROOT/etc/edgellmd/edgellmd.yaml"
check "V2's default config beside it as edgellmd.yaml.dpkg-dist" grep -qF "A default added in $V2" "$SDROOT/etc/edgellmd/edgellmd.yaml.dpkg-dist"
check "dpkg said it kept the edited config" grep -qF "Keeping old config file as default." "$TMP/upgrade.log"
sd_until 30 sd_health_ok || true
pid2=$(sd_show MainPID || echo 0)
restarted() { [ "$pid2" != 0 ] && [ "$pid2" != "$pid1" ] && in_sd systemctl is-active --quiet edgellmd; }
check "the maintainer scripts restarted the service: main process $pid1 -> $pid2, active" restarted
in_sd journalctl -u edgellmd -o cat --no-pager >"$TMP/journal" 2>&1 || true
check "the journal: V1 stopped and V2 started" sh -c \
	"grep -q 'Stopping edgellmd' '$TMP/journal' && grep -c 'Started edgellmd' '$TMP/journal' | grep -qx 2"
status_tree() { http http://127.0.0.1:8001/status.json | grep -qF '"mode":"tree"'; }
check "the new process runs the edited config (/status.json: draft mode tree)" status_tree
http http://127.0.0.1:8001/metrics >"$TMP/metrics" 2>&1 || true
restored=$(awk '/^edgellmd_prefix_cache_restored_entries/ { print $2 }' "$TMP/metrics")
check "V2 restored the prefix cache V1 persisted on stop (edgellmd_prefix_cache_restored_entries ${restored:-missing})" \
	awk -v v="${restored:-0}" 'BEGIN { exit !(v + 0 > 0) }'
complete >"$TMP/c3" 2>&1 || true
check "V2's first request is served from that cache ($(cached <"$TMP/c3") cached tokens)" test "$(cached <"$TMP/c3")" -gt 0

# 6. Pinning back.
apt_in "${UPGRADE_OPTS[@]}" --allow-downgrades install "edgellmd=$V1" >"$TMP/down.log" 2>&1 && dn=0 || dn=$?
check "apt-get install edgellmd=$V1 --allow-downgrades (exit $dn)" test "$dn" = 0
[ "$dn" = 0 ] || sed 's/^/      /' "$TMP/down.log"
check "back on $V1, config still edited" sh -c \
	"chroot '$SDROOT' dpkg-query -W -f='\${Version}' edgellmd | grep -qxF '$V1' && grep -qx '  mode: \"tree\"' '$SDROOT/etc/edgellmd/edgellmd.yaml'"
sd_until 30 sd_health_ok || true
check "the service restarted on $V1, /health ok" sd_health_ok
check "without a pin, apt-get upgrade would take it to $V2 again" sh -c \
	"chroot '$SDROOT' apt-get -s upgrade </dev/null | grep -q '^Inst edgellmd \[$V1\] ($V2 '"
printf 'Package: edgellmd\nPin: version %s\nPin-Priority: 1001\n' "$V1" >"$SDROOT/etc/apt/preferences.d/edgellmd"
check "with Pin: version $V1 (Pin-Priority 1001), apt-cache policy's candidate is $V1" sh -c \
	"chroot '$SDROOT' apt-cache policy edgellmd | grep -qx '  Candidate: $V1'"
apt_in "${UPGRADE_OPTS[@]}" upgrade >"$TMP/pinned.log" 2>&1 || true
check "... and apt-get upgrade leaves it on $V1" sh -c "chroot '$SDROOT' dpkg-query -W -f='\${Version}' edgellmd | grep -qxF '$V1'"

ns_stop
echo "apt-repo-check took $(($(date +%s) - t0)) s"
if [ "$fails" -ne 0 ]; then
	echo "apt-repo-check: $fails check(s) failed"
	exit 1
fi
echo "apt-repo-check: all checks passed"
