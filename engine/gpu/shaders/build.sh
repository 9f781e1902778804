#!/bin/sh
# Compiles every shader in this folder to SPIR-V (go generate ./engine/gpu
# runs it). OUT=dir writes the .spv files there instead, which CI uses to
# check that the committed ones are what the GLSL gives. Needs glslc
# (Debian: glslc). See README.md.
#
# The cooperative-matrix shaders (those that use GL_KHR_cooperative_matrix)
# and the packed dot-product ones (GL_EXT_integer_dot_product) need a newer
# glslang than Debian 12's: they are compiled with $GLSLC_COOPMAT, by
# default the glslc of the Mesa 26 root that `make mesa26-root` unpacks
# (bin/mesa26-root/glslc, Debian sid's).
set -eu
cd "$(dirname "$0")"
out=${OUT:-.}
coopmat=${GLSLC_COOPMAT:-../../../bin/mesa26-root/glslc}
for src in *.comp; do
	name=${src%.comp}
	if grep -q -e GL_KHR_cooperative_matrix -e GL_EXT_integer_dot_product "$src"; then
		if [ ! -x "$coopmat" ] && ! command -v "$coopmat" >/dev/null 2>&1; then
			echo "build.sh: $src needs a glslc that compiles GL_KHR_cooperative_matrix and GL_EXT_integer_dot_product: run make mesa26-root (or set GLSLC_COOPMAT)" >&2
			exit 1
		fi
		"$coopmat" --target-env=vulkan1.2 -O -o "$out/$name.spv" "$src"
	else
		glslc --target-env=vulkan1.2 -O -o "$out/$name.spv" "$src"
	fi
done
