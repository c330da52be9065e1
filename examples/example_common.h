/* example_common.h - moved to examples/common/example_common.h. This forwarding line is only for
 * tools/train/main.c, which still includes this path: remove it once that includes
 * examples/common/example_common.h. Not one of the examples' files: copy examples/common/. */
#include "common/example_common.h"
