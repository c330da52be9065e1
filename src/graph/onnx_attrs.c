/* onnx_attrs.c - which attributes each ONNX operator has (every opset ddl reads, 7 to 18), so
 * that the importer refuses, by name, an attribute it does not know: a node is either taken with
 * every attribute honoured (the op's own code checks each value) or refused naming the node, the
 * attribute and its value. An op missing from the table is refused before its attributes matter.
 * Knows nothing of graphs or protobuf. */
#include "onnx_impl.h"

#include <stdio.h>
#include <string.h>

/* op, then its attributes, space-separated with a space at each end */
static const char *const known[][2] = {
    {"Conv", " auto_pad dilations group kernel_shape pads strides "},
    {"ConvTranspose", " auto_pad dilations group kernel_shape output_padding output_shape pads strides "},
    {"MaxPool", " auto_pad ceil_mode dilations kernel_shape pads storage_order strides "},
    {"AveragePool", " auto_pad ceil_mode count_include_pad dilations kernel_shape pads strides "},
    {"GlobalAveragePool", " "},
    {"GlobalMaxPool", " "},
    {"ReduceMean", " axes keepdims noop_with_empty_axes "},
    {"Expand", " "},
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
    /* the activations, norms and shape arithmetic of the family files (onnx_import_*.c) */
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
    {"Slice", " axes ends starts "}, /* attributes before opset 10, inputs since */
    {"Cast", " to "},
    {"Erf", " "},        /* GELU's pattern */
    {"Transpose", " perm "}, /* softmax(x, dim) before opset 13 */
};

int ddl__onnx_attr_known(const char *op, const char *name)
{
    size_t n = strlen(name);
    if (!n || n > 60 || strchr(name, ' '))
        return 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (strcmp(known[i][0], op) != 0)
            continue;
        char key[64] = " ";
        memcpy(key + 1, name, n);
        key[n + 1] = ' ';
        key[n + 2] = '\0';
        return strstr(known[i][1], key) != NULL;
    }
    return 1; /* an op ddl does not take: refused for itself, whatever its attributes */
}

int ddl__onnx_attrs_known(const char *op, const ddl__pb_slice *attrs, int n_attrs, char name[64], char val[64])
{
    for (int i = 0; i < n_attrs; i++) {
        ddl__pb_slice s = attrs[i];
        ddl__pb_field f;
        snprintf(name, 64, "%s", "");
        snprintf(val, 64, "%s", "(a value)");
        while (ddl__pb_next(&s, &f) > 0) { /* AttributeProto: name 1, f 2, i 3, s 4 */
            if (f.number == 1 && ddl__pb_str(&f, name, 64) != 0)
                snprintf(name, 64, "%s", "(a name of 64 bytes or more)");
            else if (f.number == 2 && f.wire == 5) {
                uint32_t u = (uint32_t)f.v;
                float x;
                memcpy(&x, &u, 4);
                snprintf(val, 64, "%g", (double)x);
            } else if (f.number == 3 && f.wire == 0)
                snprintf(val, 64, "%lld", (long long)(int64_t)f.v);
            else if (f.number == 4 && f.wire == 2)
                snprintf(val, 64, "\"%.*s\"", (int)(f.s.end - f.s.p < 40 ? f.s.end - f.s.p : 40), f.s.p);
        }
        if (!ddl__onnx_attr_known(op, name))
            return 0;
    }
    return 1;
}
