#!/bin/sh
# test_onnx_nodes.sh - ONNX's own backend node tests (python3-onnx's generators), rewritten into
# the form ddl imports and checked in onnxruntime-node, then run by ddl in one process
# (tests/onnx/node_tests.py): nothing silently wrong (each case passes or is refused with the node
# named), every case of tests/onnx/node_pass.txt passes, and ddl's own cases of the input
# normalisation, per-channel constants, Softmax and Reshape give onnxruntime's answer or are refused.
. "$(dirname "$0")/lib.sh"
BUILD=${BUILD:-build}
cd "$(dirname "$0")/.." || exit 1
"$PYTHON" -c 'import onnx, numpy' 2> /dev/null || { echo "skipped: no python3-onnx or python3-numpy (make deps)"; echo "0 passed, 0 failed"; exit 0; }
command -v node > /dev/null 2>&1 && [ -d tests/onnx/node_modules/onnxruntime-node ] ||
    { echo "skipped: onnxruntime-node not installed (tools/install-deps.sh)"; echo "0 passed, 0 failed"; exit 0; }
exec "$PYTHON" tests/onnx/node_tests.py "$BUILD"
