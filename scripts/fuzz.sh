#!/bin/sh
# A fuzzing pass over every Fuzz target in the repository (the parsers that
# take outside input: config files, GGUF headers, chat templates, tool-call
# text, bundle manifests, cache segments, ...), one after another.
#
#   FUZZTIME=30s sh scripts/fuzz.sh           every target for 30 s (the default)
#   FUZZ_ONLY='Config|Manifest' sh scripts/fuzz.sh   targets whose name matches
#
# -fuzzminimizetime 20x: when a target finds a crasher, go test minimizes the
# input for at most 20 runs, not the default 60 s, so the crasher is reported
# (written to the package's testdata/fuzz/<Target>/) within the pass's budget.
# Exit status 1 when any target failed; the failing ones are listed at the end.
set -eu
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
FUZZ_ONLY=${FUZZ_ONLY:-.}
failed=""
n=0
# "./pkg/file_test.go:LINE:func FuzzName(" -> "./pkg FuzzName"
targets=$(git grep -n '^func Fuzz[A-Za-z0-9_]*(' -- '*_test.go' |
	sed -E 's#^([^:]*)/[^/:]*:[0-9]+:func (Fuzz[A-Za-z0-9_]*)\(.*#./\1 \2#' | sort -u)
IFS='
'
for t in $targets; do
	pkg=${t% *}
	name=${t#* }
	echo "$name" | grep -Eq -- "$FUZZ_ONLY" || continue
	n=$((n + 1))
	echo "== $pkg $name ($FUZZTIME)"
	if ! "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 20x "$pkg"; then
		failed="$failed $pkg:$name"
	fi
done
if [ "$n" -eq 0 ]; then
	echo "fuzz.sh: no Fuzz target matches FUZZ_ONLY=$FUZZ_ONLY" >&2
	exit 2
fi
if [ -n "$failed" ]; then
	echo "fuzz.sh: failing targets:$failed (crashers in each package's testdata/fuzz/)" >&2
	exit 1
fi
echo "fuzz.sh: $n targets, no failure"
