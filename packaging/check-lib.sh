# check-lib.sh: the shell that packaging/test-deb.sh (sh) and
# scripts/apt-repo-check.sh (bash) share, sourced from the repository's
# root; POSIX sh, so that both shells run it. Two parts:
#
# The checks: pass, fail and check print one line a check ("ok    ..." or
# "FAIL  ...", a failing check's output indented below it) and count the
# failures in fails.
#
# A Debian bookworm tree booted with systemd as PID 1 in namespaces of its
# own (PID, mount, network, UTS, IPC, cgroup):
#
#   boot_debootstrap LOG   the pristine tree at BOOT_CACHE, made anew;
#   boot_add_systemd LOG   BOOT_SDCACHE: a copy of it with systemd added;
#   boot_tree              SDROOT: a copy of BOOT_SDCACHE made bootable;
#   boot_start             boot SDROOT, wait for the boot to end;
#   in_sd, http, sd_*      reach the booted tree;
#   ns_stop                end its namespaces (boot_cleanup also removes
#                          SDROOT).
#
# The caller sets CHECK_NAME (its name: in its messages, the container= of
# the booted systemd and the cgroups made for it) before sourcing this, and
# TMP (a directory of its own) before calling anything here, and calls
# boot_cleanup on exit.
#
# DEB_CHROOT_CACHE (default ~/.cache/edgellmd/chroot-bookworm, outside the
# module so `go test ./...` never walks it) is where the pristine tree is
# kept between runs, DEB_CHROOT_CACHE-systemd the one with systemd;
# DEB_MIRROR picks the mirror.
# shellcheck shell=sh
# shellcheck disable=SC2034 # BOOT_STATE and BOOT_SECONDS are the caller's to read

fails=0
pass() { echo "ok    $*"; }
fail() {
	echo "FAIL  $*"
	fails=$((fails + 1))
}
# check DESCRIPTION COMMAND...: COMMAND's exit status is the check's.
check() {
	_check_d=$1
	shift
	if "$@" >"$TMP/check.out" 2>&1; then
		pass "$_check_d"
	else
		fail "$_check_d"
		sed 's/^/      /' "$TMP/check.out"
	fi
}

BOOT_CACHE=${DEB_CHROOT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgellmd/chroot-bookworm}
BOOT_SDCACHE=$BOOT_CACHE-systemd
NS_UNSHARE="" # the booted tree's namespaces: unshare's pid,
NS_INIT=""    # and their PID 1 (systemd) as this machine numbers it
SDROOT=""     # the tree booted (boot_tree's copy)
BOOT_STATE="" # what systemctl is-system-running said (boot_start)
BOOT_SECONDS=0

# boot_debootstrap LOG: debootstrap a minimal bookworm (with adduser) into
# BOOT_CACHE, by way of BOOT_CACHE.tmp so that a failed run leaves no tree
# behind; debootstrap's output goes to LOG.
boot_debootstrap() {
	mkdir -p "$(dirname "$BOOT_CACHE")"
	rm -rf --one-file-system "$BOOT_CACHE.tmp"
	debootstrap --variant=minbase --include=adduser bookworm "$BOOT_CACHE.tmp" \
		"${DEB_MIRROR:-http://deb.debian.org/debian}" >"$1" 2>&1 || return 1
	mv "$BOOT_CACHE.tmp" "$BOOT_CACHE"
}

# boot_add_systemd LOG: BOOT_SDCACHE, a copy of BOOT_CACHE with systemd
# installed (without Recommends: still no procps, so no /bin/kill); apt's
# output goes to LOG.
boot_add_systemd() {
	rm -rf --one-file-system "$BOOT_SDCACHE.tmp"
	cp -a "$BOOT_CACHE" "$BOOT_SDCACHE.tmp"
	cp -L /etc/resolv.conf "$BOOT_SDCACHE.tmp/etc/resolv.conf"
	chroot "$BOOT_SDCACHE.tmp" sh -c 'apt-get update &&
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends systemd && apt-get clean' \
		>"$1" 2>&1 || return 1
	rm -f "$BOOT_SDCACHE.tmp/etc/resolv.conf"
	mv "$BOOT_SDCACHE.tmp" "$BOOT_SDCACHE"
}

# boot_tree: SDROOT, a fresh copy of BOOT_SDCACHE, with no gettys
# (/dev/console is a file there) and a journal that stays in memory and
# does not read this machine's kernel log.
boot_tree() {
	SDROOT=$(mktemp -d "${TMPDIR:-/tmp}/$CHECK_NAME-root.XXXXXX")
	cp -a "$BOOT_SDCACHE/." "$SDROOT/"
	for u in console-getty.service getty@.service serial-getty@.service getty.target; do
		ln -sf /dev/null "$SDROOT/etc/systemd/system/$u"
	done
	mkdir -p "$SDROOT/etc/systemd/journald.conf.d"
	printf '[Journal]\nStorage=volatile\nReadKMsg=no\n' >"$SDROOT/etc/systemd/journald.conf.d/$CHECK_NAME.conf"
}

# cgroup_dirs: this process's cgroup in each mounted cgroup hierarchy (the
# v1 ones and the v2 one), as a directory, one a line.
cgroup_dirs() {
	# shellcheck disable=SC2016 # an awk program
	awk '
		FNR == NR {
			i = index($0, ":"); rest = substr($0, i + 1); j = index(rest, ":")
			path[substr(rest, 1, j - 1)] = substr(rest, j + 1)
			next
		}
		{
			for (i = 7; i <= NF && $i != "-"; i++) { }
			fstype = $(i + 1); opts = "," $(i + 3) ","
			if (fstype == "cgroup2") {
				if (!("" in path)) next
				p = path[""]
			} else if (fstype == "cgroup") {
				p = ""
				for (c in path) {
					if (c == "") continue
					n = split(c, cs, ","); ok = 1
					for (k = 1; k <= n; k++) if (index(opts, "," cs[k] ",") == 0) ok = 0
					if (ok) { p = path[c]; break }
				}
				if (p == "") next
			} else next
			if ($4 != "/" && index(p, $4) == 1) p = substr(p, length($4) + 1)
			print $5 p
		}' /proc/self/cgroup /proc/self/mountinfo
}

# boot_start: boot SDROOT with systemd as PID 1 in namespaces of its own:
# PID and mount (its mounts never reach this machine), network (its
# 127.0.0.1 is its own), UTS, IPC, and cgroup, rooted in cgroups made for
# it (ns_stop removes them); then wait up to 60 s for the boot to end.
# Returns 0 when systemd says running or degraded, else 1; BOOT_STATE is
# what it said, BOOT_SECONDS how long it took, and $TMP/boot.log and
# $TMP/console what the boot wrote.
boot_start() {
	: >"$TMP/console"
	cat >"$TMP/boot.sh" <<'BOOT'
# boot.sh ROOT CONSOLE CONTAINER, run by unshare in the new namespaces: ROOT
# becomes a mount point (the unit's sandboxing builds a mount namespace from
# /), with /proc, a read-only /sys (as in a container), a /dev of its own
# (CONSOLE as /dev/console) and systemd as PID 1 (container=CONTAINER).
set -eu
r=$1
mount --bind "$r" "$r"
mount -t proc proc "$r/proc"
mount -t sysfs -o ro sysfs "$r/sys"
mount -t tmpfs -o mode=0755,nosuid dev "$r/dev"
for n in null:3 zero:5 full:7 random:8 urandom:9; do
	mknod -m 0666 "$r/dev/${n%:*}" c 1 "${n#*:}"
done
mknod -m 0666 "$r/dev/tty" c 5 0
mkdir -m 0755 "$r/dev/pts"
mkdir -m 1777 "$r/dev/shm"
mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$r/dev/pts"
ln -s pts/ptmx "$r/dev/ptmx"
ln -s /proc/self/fd "$r/dev/fd"
: >"$r/dev/console"
mount --bind "$2" "$r/dev/console"
exec chroot "$r" /usr/bin/env "container=$3" /lib/systemd/systemd --system --log-target=journal
BOOT
	cat >"$TMP/enter.sh" <<'ENTER'
# enter.sh CGROUPS CMD...: move into the cgroups listed in the file CGROUPS
# (where that is allowed), then run CMD.
while read -r d; do
	echo $$ >"$d/cgroup.procs" 2>/dev/null || true
done <"$1"
shift
exec "$@"
ENTER
	: >"$TMP/cgroups"
	for d in $(cgroup_dirs); do
		if mkdir "$d/edgellmd-$CHECK_NAME.$$" 2>/dev/null; then
			echo "$d/edgellmd-$CHECK_NAME.$$" >>"$TMP/cgroups"
		fi
	done
	_boot_t0=$(date +%s)
	sh "$TMP/enter.sh" "$TMP/cgroups" unshare --fork --kill-child --pid --mount --net --uts --ipc --cgroup \
		sh "$TMP/boot.sh" "$SDROOT" "$TMP/console" "edgellmd-$CHECK_NAME" </dev/null >"$TMP/boot.log" 2>&1 &
	NS_UNSHARE=$!
	while [ -z "$NS_INIT" ] && kill -0 "$NS_UNSHARE" 2>/dev/null; do
		NS_INIT=$(ns_child)
		[ -n "$NS_INIT" ] || sleep 0.05
	done
	# systemctl answers once systemd is PID 1 there; --wait until the boot
	# is over.
	BOOT_STATE=""
	while [ -n "$NS_INIT" ] && [ $(($(date +%s) - _boot_t0)) -lt 60 ] && kill -0 "$NS_INIT" 2>/dev/null; do
		BOOT_STATE=$(timeout 60 nsenter -t "$NS_INIT" -m -p chroot "$SDROOT" systemctl is-system-running --wait 2>/dev/null || true)
		case "$BOOT_STATE" in running | degraded) break ;; esac
		sleep 0.2
	done
	BOOT_SECONDS=$(($(date +%s) - _boot_t0))
	case "$BOOT_STATE" in running | degraded) return 0 ;; esac
	return 1
}

# ns_child: unshare's child, PID 1 in the namespaces.
ns_child() { awk '{ print $1 }' "/proc/$NS_UNSHARE/task/$NS_UNSHARE/children" 2>/dev/null || true; }

# ns_stop ends the booted tree's namespaces (SIGKILL to their PID 1 ends
# every process in them, and their mounts go with them) and removes the
# cgroups made for them.
ns_stop() {
	if [ -z "$NS_INIT" ] && [ -n "$NS_UNSHARE" ]; then
		NS_INIT=$(ns_child)
	fi
	if [ -n "$NS_INIT" ]; then
		kill -9 "$NS_INIT" 2>/dev/null || true
		NS_INIT=""
	fi
	if [ -n "$NS_UNSHARE" ]; then
		wait "$NS_UNSHARE" 2>/dev/null || true
		NS_UNSHARE=""
	fi
	if [ -s "$TMP/cgroups" ]; then
		while read -r d; do
			for _ in 1 2 3 4 5 6 7 8 9 10; do
				find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
				[ -d "$d" ] || break
				sleep 0.2
			done
			if [ -d "$d" ]; then echo "$CHECK_NAME: could not remove the cgroup $d" >&2; fi
		done <"$TMP/cgroups"
		: >"$TMP/cgroups"
	fi
}

# boot_cleanup: ns_stop, and SDROOT removed.
boot_cleanup() {
	ns_stop
	if [ -n "$SDROOT" ]; then
		rm -rf --one-file-system "$SDROOT"
		SDROOT=""
	fi
}

# in_sd CMD...: CMD in the booted tree (its namespaces, chrooted).
in_sd() { nsenter -t "$NS_INIT" -m -p -n -u -i chroot "$SDROOT" "$@"; }
# http URL [CURL ARGS]: this machine's curl in the tree's network namespace.
http() { nsenter -t "$NS_INIT" -n curl -sS -m 30 "$@"; }
# sd_show PROPERTY: edgellmd.service's PROPERTY (systemctl show -P).
sd_show() { in_sd systemctl show -P "$1" edgellmd; }
# sd_health_ok: the daemon in the tree answers /health with status ok.
sd_health_ok() { http http://127.0.0.1:8001/health 2>/dev/null | grep -q '"status":"ok"'; }
# sd_until SECONDS CMD...: run CMD every 0.2 s until it succeeds, for up to
# SECONDS.
sd_until() {
	_sd_tries=$(($1 * 5))
	shift
	while ! "$@" >/dev/null 2>&1; do
		_sd_tries=$((_sd_tries - 1))
		[ "$_sd_tries" -gt 0 ] || return 1
		sleep 0.2
	done
}
