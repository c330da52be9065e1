#!/bin/sh
# test_deps.sh - what the install step installs: `make run` (DDL_DEPS=run) asks apt-get for the
# compiler, the libraries and the data only, never npm, Node.js, a browser, Slurm or the test
# tools, and runs no npm install; `make test`'s step asks for those too; iperf3 comes with make
# bench's packages (DDL_BENCH_DEPS=1) alone. Runs tools/install-deps.sh
# against stand-ins for dpkg-query (nothing installed), apt-get and npm that only write down what
# they were asked, so nothing is installed.
. "$(dirname "$0")/lib.sh"
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/tree/tools" "$tmp/tree/tests/onnx" "$tmp/tree/tests/serve"
cp tools/install-deps.sh "$tmp/tree/tools/"
printf '#!/bin/sh\nexit 1\n' > "$tmp/bin/dpkg-query"
printf '#!/bin/sh\necho "$*" >> "%s/apt"\n' "$tmp" > "$tmp/bin/apt-get"
printf '#!/bin/sh\necho "npm $*" >> "%s/npm"\n' "$tmp" > "$tmp/bin/npm"
printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/node"
printf '#!/bin/sh\necho 0\n' > "$tmp/bin/id"
chmod +x "$tmp/bin/"*
run() { : > "$tmp/apt"; : > "$tmp/npm"; PATH="$tmp/bin:$PATH" DDL_DEPS=$1 sh "$tmp/tree/tools/install-deps.sh" > "$tmp/out" 2>&1; }

run run; check "the run step exits 0" $?
grep -q "install .*libopenblas-dev" "$tmp/apt" && grep -q "install .*dataset-fashion-mnist" "$tmp/apt" &&
    grep -q "install .*gcc" "$tmp/apt"
check "make run's step installs the compiler, the libraries and the data" $?
! grep -Eq "chromium|nodejs| npm|slurm|munge|python3|wrk|qemu|microhttpd|iperf3" "$tmp/apt"
check "make run's step installs no browser, Node.js, npm, Slurm, Python or test tool: $(cat "$tmp/apt")" $?
[ ! -s "$tmp/npm" ]; check "make run's step runs no npm install" $?

run test; check "the test step exits 0" $?
grep -q "install .*chromium" "$tmp/apt" && grep -q "install .*slurmctld" "$tmp/apt" && grep -q "npm install" "$tmp/npm"
check "make test's step installs the test tools and the npm packages" $?
! grep -q "iperf3" "$tmp/apt"; check "make test's step installs no iperf3 (make bench's alone)" $?
! grep -q "torch" "$tmp/apt"; check "make test's step installs no PyTorch, nor torchvision without it" $?
# where PyTorch is installed (these machines have it), make test's step adds torchvision for
# tests/test_torch_zoo.sh; make run's does not
printf '#!/bin/sh\nfor a; do :; done\n[ "$a" = python3-torch ] && printf "install ok installed" && exit 0\nexit 1\n' \
    > "$tmp/bin/dpkg-query"
run test; grep -q "install .*python3-torchvision" "$tmp/apt"
check "make test's step installs torchvision where PyTorch is: $(cat "$tmp/apt" | cut -c 1-100)" $?
run run; ! grep -q "torchvision" "$tmp/apt"; check "make run's step does not, even there" $?
printf '#!/bin/sh\nexit 1\n' > "$tmp/bin/dpkg-query"

: > "$tmp/apt"; PATH="$tmp/bin:$PATH" DDL_BENCH_DEPS=1 sh "$tmp/tree/tools/install-deps.sh" > "$tmp/out" 2>&1
check "make bench's step exits 0" $?
grep -q "install .*iperf3" "$tmp/apt" && grep -q "install .*python3-torch " "$tmp/apt" &&
    grep -q "install .*python3-torchvision" "$tmp/apt"
check "make bench's step installs iperf3, PyTorch and torchvision: $(cat "$tmp/apt")" $?

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
