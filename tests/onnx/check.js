// check.js - run a ddl ONNX export in onnxruntime-node and compare with ddl's own logits.
//   node tests/onnx/check.js MODEL.onnx DIR [INPUT]
// (INPUT: the model's input name, "pixels" by default, as ddl's export names it; the model's
// output "logits" is compared)
// DIR holds what `test_infer --reference` wrote: pixels.f32 (N, C, H, W) raw pixels 0..255,
// logits.f32 (N, K, OH, OW) ddl's logits, shape.txt "N C H W K OH OW". Prints one line:
//   onnx: images=100 values=1000 max_rel_diff=5.5e-7 max_abs_diff=3.8e-6 max_elem_rel=3.0e-5
//         ties=0 classes_equal=100/100 ok
// max_rel_diff is the largest over the images of max |ort - ddl| / max |ddl| over that image's
// logits: the difference relative to the size of the logits it is among (a logit that happens
// to lie near 0 is still held to 1e-4 of its image's scale, not to 1e-4 of itself, which no
// two float32 implementations summing in another order could meet). max_elem_rel is
// |ort - ddl| / |ddl| over the logits at least 1% of their image's scale, for information.
// A class (argmax over K at a position) counts as equal when it is ddl's, or when ddl's logits of
// the two classes differ by no more than 1e-4 of the image's scale (a near-tie, counted in ties:
// U-Net's 102,400 pixels hold some). Exit 0 when max_rel_diff <= 1e-4 and every class is equal;
// 1 otherwise; 2 when the runtime cannot load (the caller reports the test as skipped).
'use strict';
const fs = require('fs');
const path = require('path');

const ort = require('./ort_load');

function floats(file) {
    const b = fs.readFileSync(file);
    return new Float32Array(b.buffer, b.byteOffset, b.length / 4);
}

async function main() {
    const [model, dir, input = 'pixels'] = process.argv.slice(2);
    const [n, c, h, w, k, oh, ow] = fs.readFileSync(path.join(dir, 'shape.txt'), 'utf8').trim().split(/\s+/).map(Number);
    const pixels = floats(path.join(dir, 'pixels.f32')), want = floats(path.join(dir, 'logits.f32'));
    const session = await ort.InferenceSession.create(model);
    const result = await session.run({ [input]: new ort.Tensor('float32', pixels, [n, c, h, w]) });
    const got = result.logits.data, s = oh * ow, per = k * s;
    if (got.length !== want.length) {
        console.log(`onnx: ${got.length} logits, ddl has ${want.length}`);
        process.exit(1);
    }
    let worst = 0, abs = 0, elem = 0, same = 0, ties = 0;
    for (let i = 0; i < n; i++) {
        let scale = 0, diff = 0;
        for (let j = 0; j < per; j++) scale = Math.max(scale, Math.abs(want[i * per + j]));
        for (let j = 0; j < per; j++) {
            const a = got[i * per + j], b = want[i * per + j], d = Math.abs(a - b);
            diff = Math.max(diff, d);
            if (Math.abs(b) >= 0.01 * scale) elem = Math.max(elem, d / Math.abs(b));
        }
        abs = Math.max(abs, diff);
        worst = Math.max(worst, scale > 0 ? diff / scale : diff);
        for (let p = 0; p < s; p++) {
            let ga = 0, wa = 0;
            for (let q = 1; q < k; q++) {
                if (got[i * per + q * s + p] > got[i * per + ga * s + p]) ga = q;
                if (want[i * per + q * s + p] > want[i * per + wa * s + p]) wa = q;
            }
            // a near-tie: ddl's own logits of the two classes within the logit tolerance, so
            // either class is a correct answer of a float32 sum in another order
            const tie = ga !== wa && Math.abs(want[i * per + ga * s + p] - want[i * per + wa * s + p]) <= 1e-4 * scale;
            ties += tie ? 1 : 0;
            same += ga === wa || tie ? 1 : 0;
        }
    }
    const ok = worst <= 1e-4 && same === n * s;
    console.log(`onnx: images=${n} values=${n * per} max_rel_diff=${worst.toExponential(1)} ` +
                `max_abs_diff=${abs.toExponential(1)} max_elem_rel=${elem.toExponential(1)} ties=${ties} ` +
                `classes_equal=${same}/${n * s} ${ok ? 'ok' : 'FAILED'}`);
    process.exit(ok ? 0 : 1);
}

main().catch((e) => {
    console.log('onnx: the runtime refused the model: ' + e.message.split('\n')[0]);
    process.exit(1);
});
