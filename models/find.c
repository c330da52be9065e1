/* find.c - ddl_model_find: the built-in model plugins by name (lenet, unet, and the layer graph's
 * "graph"), for the programs and the predictor that read a name from a checkpoint. It lives above
 * the plugins it names, so the core links against none of them (tests/test_layering.sh). */
#include "ddl.h"

#include <string.h>

const ddl_model_plugin *ddl_model_find(const char *name)
{
    static const struct {
        const char *name;
        const ddl_model_plugin *(*get)(void);
    } table[] = {{"lenet", ddl_model_lenet}, {"unet", ddl_model_unet}, {"graph", ddl_model_graph}};
    for (size_t i = 0; name && i < sizeof table / sizeof table[0]; i++)
        if (strcmp(name, table[i].name) == 0)
            return table[i].get();
    return NULL;
}
