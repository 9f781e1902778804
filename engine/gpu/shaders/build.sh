#!/bin/sh
# Compiles every shader in this folder to SPIR-V (go generate ./engine/gpu
# runs it). OUT=dir writes the .spv files there instead, which CI uses to
# check that the committed ones are what the GLSL gives. Needs glslc
# (Debian: glslc). See README.md.
set -eu
cd "$(dirname "$0")"
out=${OUT:-.}
for src in *.comp; do
	name=${src%.comp}
	glslc --target-env=vulkan1.2 -O -o "$out/$name.spv" "$src"
done
