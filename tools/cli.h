/* cli.h - the command line of every ddl program: the helpers live in common/example_cli.h, the
 * programs' kit, because the examples are copied out of this tree with that folder and must build
 * from an installed ddl alone (ddl.h and pkg-config). The tools include this name, as they always
 * did. */
#ifndef DDL_TOOLS_CLI_H
#define DDL_TOOLS_CLI_H

#include "common/example_cli.h"

#endif
