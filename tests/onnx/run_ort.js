// run_ort.js - onnxruntime-node on many models in one process, for tests/onnx/node_tests.py.
//   node tests/onnx/run_ort.js LIST
// LIST has one case a line: "MODEL.onnx INPUT_NAME INPUT.f32 D0,D1,... OUTPUT.f32". For each
// case one line on standard output: "ok D0,D1,..." (the first output's dims; its float32 values
// in OUTPUT.f32) or "error MESSAGE". Exit 2 when the runtime cannot load.
'use strict';
const fs = require('fs');

const ort = require('./ort_load');

async function one(model, name, input, dims, output) {
    const b = fs.readFileSync(input);
    const x = new Float32Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
    const session = await ort.InferenceSession.create(model);
    const result = await session.run({ [name]: new ort.Tensor('float32', x, dims) });
    const y = result[session.outputNames[0]];
    const data = y.data instanceof Float32Array ? y.data : Float32Array.from(y.data, Number);
    fs.writeFileSync(output, Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    return y.dims.join(',');
}

async function main() {
    const lines = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l.trim());
    for (const l of lines) {
        const [model, name, input, dims, output] = l.split(' ');
        try {
            console.log('ok ' + (await one(model, name, input, dims.split(',').map(Number), output)));
        } catch (e) {
            console.log('error ' + String(e.message || e).split('\n')[0]);
        }
    }
}

main();
