// ort_load.js - onnxruntime-node for the scripts beside it, or a "skipped:" line and exit 2 (the
// caller reports the test as skipped) when it cannot load.
'use strict';
try {
    module.exports = require('onnxruntime-node');
} catch (e) {
    console.log('skipped: onnxruntime-node cannot load: ' + e.message.split('\n')[0]);
    process.exit(2);
}
