/* onnx_attrs.c - which attributes each ONNX operator has (every opset ddl reads, 7 to 18), so
 * that the importer refuses, by name, an attribute it does not know: a node is either taken with
 * every attribute honoured (the op's own code checks each value) or refused naming the node, the
 * attribute and its value. An op missing from the table is refused before its attributes matter.
 * Knows nothing of graphs or protobuf. */
#include "onnx_impl.h"

#include <string.h>

/* op, then its attributes, space-separated with a space at each end */
static const char *const known[][2] = {
    {"Conv", " auto_pad dilations group kernel_shape pads strides "},
    {"ConvTranspose", " auto_pad dilations group kernel_shape output_padding output_shape pads strides "},
    {"MaxPool", " auto_pad ceil_mode dilations kernel_shape pads storage_order strides "},
    {"AveragePool", " auto_pad ceil_mode count_include_pad dilations kernel_shape pads strides "},
    {"GlobalAveragePool", " "},
    {"GlobalMaxPool", " "},
    {"Gemm", " alpha beta transA transB "},
    {"MatMul", " "},
    {"Add", " "},
    {"Sub", " "},
    {"Mul", " "},
    {"Div", " "},
    {"Relu", " "},
    {"Flatten", " axis "},
    {"Reshape", " allowzero "},
    {"Concat", " axis "},
    {"Dropout", " ratio seed "},
    {"Identity", " "},
    {"Softmax", " axis "},
    {"LogSoftmax", " axis "},
    {"Pad", " mode pads value "},
    {"Constant", " sparse_value value value_float value_floats value_int value_ints value_string value_strings "},
    /* the ops other work brings: their names, so that what they take is checked the same way */
    {"BatchNormalization", " epsilon momentum training_mode spatial "},
    {"InstanceNormalization", " epsilon "},
    {"GroupNormalization", " epsilon num_groups stash_type "},
    {"LeakyRelu", " alpha "},
    {"Elu", " alpha "},
    {"HardSigmoid", " alpha beta "},
    {"HardSwish", " "},
    {"Sigmoid", " "},
    {"Tanh", " "},
    {"Gelu", " approximate "},
    {"Clip", " max min "},
    {"Resize", " antialias axes coordinate_transformation_mode cubic_coeff_a exclude_outside extrapolation_value "
               "keep_aspect_ratio_policy mode nearest_mode "},
    {"Upsample", " mode scales "},
    {"Shape", " end start "},
    {"Gather", " axis "},
    {"Unsqueeze", " axes "},
    {"Squeeze", " axes "},
};

int ddl__onnx_attr_known(const char *op, const char *attr)
{
    size_t n = strlen(attr);
    if (!n || n > 60 || strchr(attr, ' '))
        return 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(known[i][0], op) != 0)
            continue;
        char key[64] = " ";
        memcpy(key + 1, attr, n);
        key[n + 1] = ' ';
        key[n + 2] = '\0';
        return strstr(known[i][1], key) != NULL;
    }
    return 1; /* an op ddl does not take: refused for itself, whatever its attributes */
}
