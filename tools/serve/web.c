/* web.c - the page at /: tools/serve/index.html (markup, style and script in one file, nothing
 * fetched from elsewhere), turned into bytes by the Makefile ($(BUILD)/gen/web_index.inc) and
 * compiled in, so the binary serves it with no files beside it. */
#include "serve.h"

const unsigned char sv_web_index[] = {
#include "web_index.inc"
};
const size_t sv_web_index_bytes = sizeof sv_web_index;
