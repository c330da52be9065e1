-- ddl--0.1.sql: the SQL side of the ddl extension (pg/ddl.c has the C side).
\echo Use "CREATE EXTENSION ddl" to load this file. \quit

-- model: a file name in the directory the superuser set in ddl.model_dir (a ddl checkpoint or an
-- .onnx file); image: the model's input as raw pixels (channels x height x width bytes), or a PNG,
-- JPEG, PGM or PPM of any size (resized to the model's input as training does). STRICT: a NULL in gives NULL out. PARALLEL SAFE: a scan of a large
-- table is split across parallel workers, each with its own copy of the model. VOLATILE (the
-- default): a model file replaced on disk is read again at the next statement.

-- ddl_predict: the class with the largest score, 0 to classes - 1 (a classifier's).
CREATE FUNCTION ddl_predict(model text, image bytea) RETURNS int
    AS 'MODULE_PATHNAME', 'pgddl_predict' LANGUAGE C STRICT PARALLEL SAFE COST 1000;

-- ddl_predict_proba: every class's probability (softmax), element k + 1 for class k.
CREATE FUNCTION ddl_predict_proba(model text, image bytea) RETURNS real[]
    AS 'MODULE_PATHNAME', 'pgddl_predict_proba' LANGUAGE C STRICT PARALLEL SAFE COST 1000;

-- ddl_segment: a segmentation model's mask, one byte per output pixel (its class), row by row.
CREATE FUNCTION ddl_segment(model text, image bytea) RETURNS bytea
    AS 'MODULE_PATHNAME', 'pgddl_segment' LANGUAGE C STRICT PARALLEL SAFE COST 10000;

-- ddl_class_names: the class names the checkpoint carries (element k + 1 for class k), or NULL.
CREATE FUNCTION ddl_class_names(model text) RETURNS text[]
    AS 'MODULE_PATHNAME', 'pgddl_class_names' LANGUAGE C STRICT PARALLEL SAFE;

-- Many rows per call: images, an array (array_agg(img)); one result row per element, in the
-- array's order (a NULL element gives a NULL), the answers of the functions above bit for bit,
-- computed in forward passes of ddl.batch_size images. PostgresML's pgml.predict_batch takes
-- its rows the same way:
--     SELECT unnest(array_agg(id)) AS id, ddl_predict_batch('lenet.ddl', array_agg(img)) AS class
--     FROM images GROUP BY id / 1000;
CREATE FUNCTION ddl_predict_batch(model text, images bytea[]) RETURNS SETOF int
    AS 'MODULE_PATHNAME', 'pgddl_predict_batch' LANGUAGE C STRICT PARALLEL SAFE COST 500 ROWS 1000;

CREATE FUNCTION ddl_predict_proba_batch(model text, images bytea[]) RETURNS SETOF real[]
    AS 'MODULE_PATHNAME', 'pgddl_predict_proba_batch' LANGUAGE C STRICT PARALLEL SAFE COST 500 ROWS 1000;

CREATE FUNCTION ddl_segment_batch(model text, images bytea[]) RETURNS SETOF bytea
    AS 'MODULE_PATHNAME', 'pgddl_segment_batch' LANGUAGE C STRICT PARALLEL SAFE COST 5000 ROWS 1000;
