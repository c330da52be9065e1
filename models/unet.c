/* unet.c - U-Net model plugin (a later issue fills it; until then the getter returns NULL). */
#include "ddl.h"

const ddl_model_plugin *ddl_model_unet(void) { return NULL; }
