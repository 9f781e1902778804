#!/usr/bin/env bash
# apt-repo: a signed apt repository of edgellmd for a fleet (make apt-repo).
#
#   scripts/apt-repo.sh [DEB...]
#
# With no DEB, builds the amd64 and arm64 packages (packaging/build-deb.sh,
# into bin/deb) and adds them; with DEBs, adds those. Run it again after a
# new build: the repository keeps every version it was given (so that a box
# can be pinned back to an older one) and is signed again.
#
# Made with Debian's aptly (apt-get install aptly gnupg). Layout, under
# APT_REPO_DIR (default bin/apt-repo):
#   public/           what a web server serves (copy or rsync it anywhere):
#     dists/SUITE/{InRelease,Release,Release.gpg,main/binary-*/Packages*}
#     pool/main/e/edgellmd/edgellmd_VERSION_ARCH.deb
#     edgellmd.gpg       the public key, binary (for /etc/apt/keyrings/)
#     edgellmd.asc       the same, ASCII-armoured
#     edgellmd.sources   the deb822 source, Signed-By the key above
#     KEY                the key's fingerprint
#   aptly/, aptly.conf  aptly's database and pool (keep them: they hold the
#                       older versions)
#   gnupg/             the generated signing key, when none is given (0700;
#                       never under public/)
#
# Environment:
#   APT_REPO_DIR    where it all goes (default bin/apt-repo)
#   APT_REPO_KEY    fingerprint of the signing key, in GNUPGHOME (or gpg's
#                   default home); unset: a key generated once into
#                   APT_REPO_DIR/gnupg (ed25519, no passphrase) and reused,
#                   so that boxes that trust it keep trusting the next runs
#   APT_REPO_URL    the URL written into edgellmd.sources (default
#                   http://apt.example.invalid/edgellmd: set it to where
#                   public/ is served)
#   APT_REPO_SUITE  the suite (default stable); the component is main
#   GO, DEB_VERSION as packaging/build-deb.sh takes them
set -euo pipefail
cd "$(dirname "$0")/.."

DIR=${APT_REPO_DIR:-bin/apt-repo}
SUITE=${APT_REPO_SUITE:-stable}
URL=${APT_REPO_URL:-http://apt.example.invalid/edgellmd}
REPO=edgellmd # aptly's name for the local repository

die() {
	echo "apt-repo: $*" >&2
	exit 1
}
for t in aptly gpg; do
	command -v "$t" >/dev/null || die "$t not found (apt-get install aptly gnupg)"
done
case "$SUITE" in
*[!A-Za-z0-9._-]* | "") die "APT_REPO_SUITE=$SUITE: letters, digits, '.', '_' and '-' only" ;;
esac

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)

debs=("$@")
if [ ${#debs[@]} = 0 ]; then
	mapfile -t debs < <(sh packaging/build-deb.sh amd64 arm64)
fi
[ ${#debs[@]} -gt 0 ] || die "no packages to add"
for d in "${debs[@]}"; do
	[ -f "$d" ] || die "$d: no such file"
	case "$(dpkg-deb --field "$d" Package 2>/dev/null)" in
	edgellmd) ;;
	*) die "$d: not an edgellmd package" ;;
	esac
done

# The signing key.
generated=0
if [ -n "${APT_REPO_KEY:-}" ]; then
	KEY=$APT_REPO_KEY
	gpg --batch --list-secret-keys "$KEY" >/dev/null 2>&1 ||
		die "APT_REPO_KEY=$KEY: no such secret key in ${GNUPGHOME:-~/.gnupg} (gpg --list-secret-keys)"
else
	export GNUPGHOME=$DIR/gnupg
	mkdir -p "$GNUPGHOME"
	chmod 0700 "$GNUPGHOME"
	generated=1
	if ! gpg --batch --list-secret-keys --with-colons 2>/dev/null | grep -q '^sec'; then
		gpg --batch --pinentry-mode loopback --passphrase '' --quick-gen-key \
			"edgellmd fleet repository ($(hostname), made by make apt-repo) <edgellmd-apt@$(hostname)>" \
			ed25519 sign never 2>/dev/null || die "gpg could not generate a key in $GNUPGHOME"
		echo "apt-repo: generated a signing key in $GNUPGHOME (keep it: the boxes trust it)"
	fi
	KEY=$(gpg --batch --list-secret-keys --with-colons | awk -F: '$1 == "fpr" { print $10; exit }')
fi
# The full fingerprint, whatever form APT_REPO_KEY had.
FPR=$(gpg --batch --list-keys --with-colons "$KEY" 2>/dev/null | awk -F: '$1 == "fpr" { print $10; exit }')
[ -n "$FPR" ] || die "no fingerprint for key $KEY"
stop_agent() {
	if [ "$generated" = 1 ]; then gpgconf --kill gpg-agent 2>/dev/null || true; fi
}
trap stop_agent EXIT

# aptly: its database and pool under DIR/aptly, the published tree copied
# (hard-linked) to DIR/public.
cat >"$DIR/aptly.conf" <<EOF
{
  "rootDir": "$DIR/aptly",
  "architectures": ["amd64", "arm64"],
  "gpgProvider": "gpg2",
  "downloadSourcePackages": false,
  "FileSystemPublishEndpoints": {
    "fleet": {"rootDir": "$DIR/public", "linkMethod": "hardlink"}
  }
}
EOF
aptly() { command aptly -config="$DIR/aptly.conf" "$@"; }
if ! aptly repo show "$REPO" >/dev/null 2>&1; then
	aptly repo create -comment="edgellmd for the fleet" -distribution="$SUITE" -component=main "$REPO" >/dev/null
fi
# A version already there with other contents is refused (a version never
# changes once published): aptly names the package.
if ! aptly repo add "$REPO" "${debs[@]}" >"$DIR/add.log" 2>&1; then
	cat "$DIR/add.log" >&2
	die "aptly repo add failed (a version already in the repository with other contents? build a new version)"
fi
grep -v '^Loading packages' "$DIR/add.log" | sed 's/^/apt-repo: /'
sign=(-gpg-key="$FPR" -batch)
if aptly publish list -raw | grep -qx "filesystem:fleet:. $SUITE"; then
	aptly publish update "${sign[@]}" "$SUITE" "filesystem:fleet:." >"$DIR/publish.log" 2>&1 ||
		{ cat "$DIR/publish.log" >&2; die "aptly publish update failed"; }
else
	aptly publish repo "${sign[@]}" -origin=edgellmd -label=edgellmd -architectures=amd64,arm64 \
		"$REPO" "filesystem:fleet:." >"$DIR/publish.log" 2>&1 ||
		{ cat "$DIR/publish.log" >&2; die "aptly publish repo failed"; }
fi
aptly db cleanup >/dev/null 2>&1 || true

# What a box needs besides the URL.
gpg --batch --export "$FPR" >"$DIR/public/edgellmd.gpg"
gpg --batch --armor --export "$FPR" >"$DIR/public/edgellmd.asc"
echo "$FPR" >"$DIR/public/KEY"
cat >"$DIR/public/edgellmd.sources" <<EOF
# edgellmd's fleet repository: /etc/apt/sources.list.d/edgellmd.sources
# (the key: /etc/apt/keyrings/edgellmd.gpg, fingerprint $FPR)
Types: deb
URIs: $URL
Suites: $SUITE
Components: main
Signed-By: /etc/apt/keyrings/edgellmd.gpg
EOF

# A check of what was published: the signature, and the versions listed.
gpgv --keyring "$DIR/public/edgellmd.gpg" "$DIR/public/dists/$SUITE/InRelease" 2>/dev/null ||
	die "dists/$SUITE/InRelease does not verify against edgellmd.gpg"
echo "apt-repo: $DIR/public: suite $SUITE, signed by $FPR"
for arch in amd64 arm64; do
	p=$DIR/public/dists/$SUITE/main/binary-$arch/Packages
	v=$(awk '/^Version:/ { printf "%s%s", sep, $2; sep = ", " }' "$p" 2>/dev/null || true)
	echo "apt-repo:   $arch: ${v:-(none)}"
done
if [ "$URL" = http://apt.example.invalid/edgellmd ]; then
	echo "apt-repo: edgellmd.sources points at $URL: set APT_REPO_URL to where public/ is served"
fi
