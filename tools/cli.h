/* cli.h - the command line of every ddl program: the helpers live in examples/common/example_cli.h,
 * because the examples are copied out of this tree and must build from an installed ddl alone
 * (ddl.h and pkg-config), so the file they include has to travel with them. The tools include
 * this name, as they always did. */
#ifndef DDL_TOOLS_CLI_H
#define DDL_TOOLS_CLI_H

#include "examples/common/example_cli.h"

#endif
