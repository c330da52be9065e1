#!/bin/sh
# ddl.h compiles as C99 and as C++ (g++ -std=c++11), warning-free and on its own, and a C++
# program links against libddl.a and the libraries it needs (the extern "C" guard works).
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '#include "ddl.h"\nint main(void) { return ddl_version_number() == DDL_VERSION_NUMBER ? 0 : 1; }\n' > "$tmp/c99.c"
printf '#include "ddl.h"\nint main() { ddl_rng r = ddl_rng(); ddl_rng_seed(&r, 1); ddl_model_config mc = ddl_model_config();\n  return ddl_crc32(0, "123456789", 9) == 0xCBF43926u && ddl_rng_below(&r, 5) < 5 && mc.batch == 0 &&\n    ddl_version_number() == DDL_VERSION_NUMBER ? 0 : 1; }\n' > "$tmp/cxx.cc"
check() { if "$@"; then pass=$((pass+1)); else echo "FAILED: $*"; fail=$((fail+1)); fi; }
check gcc -std=c99 -pedantic -Wall -Wextra -Werror -I. -fsyntax-only "$tmp/c99.c"
check g++ -std=c++11 -pedantic -Wall -Wextra -Werror -I. -fsyntax-only "$tmp/cxx.cc"
# with the libraries libddl.a was built on, as a static link needs them (pkg-config --static)
libs=$(PKG_CONFIG_PATH="${BUILD:-build}" pkg-config --static --libs-only-l --libs-only-L ddl 2>/dev/null | sed 's/-lddl//')
check g++ -std=c++11 ${SAN:+-fsanitize=$SAN} -I. "$tmp/cxx.cc" -o "$tmp/cxx" "${BUILD:-build}/libddl.a" ${libs:--lm}
check "$tmp/cxx"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
