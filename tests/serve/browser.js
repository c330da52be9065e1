// browser.js - ddl-serve's page in a real browser, for tests/test_serve_browser.sh: Debian's
// chromium (headless, --no-sandbox as root) driven by playwright-core. It uploads a test image
// (a PNG made here from the pixels given) and checks that the class shown is the one the API
// gives for the same pixels, with the top 5 of the 10 classes in order, named as Fashion-MNIST's
// (the lenet program's checkpoint carries no names); draws a stroke with the mouse and
// checks a class is shown; takes a screenshot; for the colour model trained on a folder, uploads
// files of other sizes than its input (a JPEG, a PNG, and a BMP the browser turns into a PNG) and
// checks each bar shows the checkpoint's class name and the API's probability for the file, bit
// for bit, then a drawn stroke; for the U-Net, asks for a random scene and checks
// the mask is shown over it; opens the Training tab and checks the charts have points, the
// runs' names, a dashed test curve per run with a dot per epoch spread along the step axis, and
// ticked, titled axes. Prints "PASS: ..." / "FAIL: ..." lines; "skipped: REASON" if chromium cannot start.
//   node browser.js URL CHROMIUM PIXELS_JSON API_CLASS SCREENSHOT COLOUR_JSON
// COLOUR_JSON: {"model": NAME, "names": [...], "files": [{"path", "mime", "probs": [...]}, ...]},
// probs being the API's answer for the file (or, for a BMP, for a PNG of its pixels).
const zlib = require("zlib");
const fs = require("fs");
const { chromium } = require("playwright-core");
const [url, exe, pixelsFile, apiClass, shot, colourFile] = process.argv.slice(2);

function crc32(buf) {
  let c, crc = 0xffffffff;
  for (const b of buf) { c = (crc ^ b) & 0xff; for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1; crc = (crc >>> 8) ^ c; }
  return (crc ^ 0xffffffff) >>> 0;
}
function chunk(type, data) {
  const len = Buffer.alloc(4); len.writeUInt32BE(data.length);
  const td = Buffer.concat([Buffer.from(type), data]), crc = Buffer.alloc(4); crc.writeUInt32BE(crc32(td));
  return Buffer.concat([len, td, crc]);
}
function png(px, w, h) { // 8-bit greyscale
  const ihdr = Buffer.alloc(13); ihdr.writeUInt32BE(w, 0); ihdr.writeUInt32BE(h, 4); ihdr[8] = 8; ihdr[9] = 0;
  const raw = Buffer.alloc(h * (w + 1));
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) raw[y * (w + 1) + 1 + x] = px[y * w + x];
  return Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), chunk("IHDR", ihdr),
    chunk("IDAT", zlib.deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]);
}

let fails = 0;
// bars: the bars the page shows, in order: class index, name, probability (a number), its text
const bars = (page) => page.$$eval("#bars .bar", (bs) => bs.map((b) => ({ cls: Number(b.dataset.cls),
  name: b.children[0].textContent, p: Number(b.dataset.p), val: b.children[2].textContent })));
const result = (ok, what) => { console.log((ok ? "PASS: " : "FAIL: ") + what); if (!ok) fails++; };

(async () => {
  let browser;
  try {
    browser = await chromium.launch({ executablePath: exe, headless: true, args: ["--no-sandbox", "--disable-gpu"] });
  } catch (e) {
    console.log("skipped: chromium does not start: " + String(e.message).split("\n")[0]);
    process.exit(0);
  }
  const page = await browser.newPage();
  const external = [];
  page.on("request", (r) => { if (!r.url().startsWith(url) && !r.url().startsWith("blob:" + url.replace(/\/$/, ""))) external.push(r.url()); });
  await page.goto(url);
  await page.waitForSelector("#model option", { state: "attached" });
  result(await page.$eval("#model", (s) => s.options.length) >= 1, "the page lists the models");

  const px = JSON.parse(fs.readFileSync(pixelsFile, "utf8"));
  await page.setInputFiles("#upload", { name: "item.png", mimeType: "image/png", buffer: png(px, 28, 28) });
  await page.waitForFunction(() => document.querySelectorAll("#bars .bar").length === 5, null, { timeout: 10000 });
  const shown = await page.$eval("#pred", (e) => e.dataset.cls);
  const top = await bars(page);
  result(shown === apiClass, "uploaded image: the page shows class " + shown + ", the API says " + apiClass);
  const fashion = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"];
  result(top.length === 5 && String(top[0].cls) === apiClass && top.every((b, i) => !i || b.p <= top[i - 1].p) &&
    top.every((b) => b.name === fashion[b.cls]) && top.reduce((a, b) => a + b.p, 0) <= 1 + 1e-6,
    "the top 5 of 10 classes, most probable first, named as Fashion-MNIST's: " + top.map((b) => b.name + " " + b.val).join(", "));

  await page.click("#clear");
  const box = await page.$eval("#draw", (c) => { const r = c.getBoundingClientRect(); return [r.left, r.top]; });
  await page.mouse.move(box[0] + 140, box[1] + 40);
  await page.mouse.down();
  for (let y = 40; y <= 240; y += 20) await page.mouse.move(box[0] + 140, box[1] + y);
  await page.mouse.up();
  await page.waitForFunction(() => document.querySelector("#pred").textContent.includes("%"), null, { timeout: 10000 });
  result(/^\S.*\(\d+\.\d%\)$/.test(await page.$eval("#pred", (e) => e.textContent)), "a drawn stroke: a class and its probability shown");
  await page.screenshot({ path: shot, fullPage: true });
  result(fs.statSync(shot).size > 1000, "a screenshot (" + shot + ")");

  // the colour model trained on a folder: files of other sizes than its input, and a drawing
  const colour = JSON.parse(fs.readFileSync(colourFile, "utf8"));
  await page.selectOption("#model", colour.model);
  const info = await page.$eval("#model-info", (e) => e.textContent);
  result(/colour/.test(info) && new RegExp(colour.names.length + " classes").test(info), "colour model: " + info);
  for (const f of colour.files) {
    await page.click("#clear");
    await page.setInputFiles("#upload", { name: f.path.split("/").pop(), mimeType: f.mime, buffer: fs.readFileSync(f.path) });
    const want = Math.min(5, colour.names.length);
    await page.waitForFunction((n) => document.querySelectorAll("#bars .bar").length === n || document.querySelector("#err").textContent,
      want, { timeout: 10000 });
    const got = await bars(page), err = await page.$eval("#err", (e) => e.textContent);
    const order = f.probs.map((v, i) => i).sort((a, b) => f.probs[b] - f.probs[a] || a - b).slice(0, want);
    result(!err && got.length === want && got.every((b, i) => b.cls === order[i] && b.p === f.probs[b.cls] && b.name === colour.names[b.cls]),
      f.path.split("/").pop() + " (" + f.mime + "): the API's probabilities by the checkpoint's names: " +
      (err || got.map((b) => b.name + " " + b.val).join(", ")));
  }
  await page.click("#clear");
  await page.mouse.move(box[0] + 60, box[1] + 140);
  await page.mouse.down();
  for (let x = 60; x <= 220; x += 20) await page.mouse.move(box[0] + x, box[1] + 140 + (x % 40));
  await page.mouse.up();
  await page.waitForFunction(() => document.querySelector("#pred").textContent.includes("%"), null, { timeout: 10000 });
  const drawn = await page.$eval("#pred", (e) => e.textContent), derr = await page.$eval("#err", (e) => e.textContent);
  result(!derr && colour.names.some((n) => drawn.startsWith(n + " (")), "colour model, a drawn stroke: " + (derr || drawn));
  await page.screenshot({ path: shot.replace(/\.png$/, "-colour.png"), fullPage: true });

  await page.selectOption("#model", "seg"); // the U-Net: a random held-out scene, segmented
  await page.click("#scene");
  await page.waitForFunction(() => document.querySelector("#pred").textContent.includes("found"), null, { timeout: 10000 });
  const overlay = await page.$eval("#overlay", (e) => e.style.display !== "none");
  result(overlay && /item class/.test(await page.$eval("#pred", (e) => e.textContent)),
    "U-Net, Random scene: the mask over the scene and its classes (" + (await page.$eval("#pred", (e) => e.textContent)) + ")");
  await page.selectOption("#model", "fashion");

  await page.click("#tab-training");
  await page.waitForFunction(() => Number(document.querySelector("#loss-chart").dataset.points) > 0, null, { timeout: 10000 });
  const lp = await page.$eval("#loss-chart", (e) => Number(e.dataset.points));
  const ap = await page.$eval("#acc-chart", (e) => Number(e.dataset.points));
  const lines = await page.$$eval("#loss-chart polyline.series", (l) => l.length);
  result(lp > 5 && ap > 0 && lines >= 1, "the training charts have points (loss " + lp + ", accuracy " + ap + ")");
  await page.waitForFunction(() => document.querySelectorAll("#train-legend .run").length >= 2, null, { timeout: 10000 });
  const names = await page.$$eval("#train-legend .run", (s) => s.map((e) => e.dataset.run));
  result(names.join(" ") === "lenet-run trial-0001", "the runs are named by their directory: " + names.join(", ") + " (not '.' or 'logs')");
  const dots = {};
  for (const id of ["loss-chart", "acc-chart"]) {
    dots[id] = await page.$$eval("#" + id + " circle.point", (cs) => cs.map((c) => [c.dataset.run, c.dataset.tag, +c.getAttribute("cx"), +c.getAttribute("r")]));
  }
  const tdots = (id, run) => dots[id].filter(([r]) => r === run);
  const spread = (ds) => Math.max(...ds.map((d) => d[2])) - Math.min(...ds.map((d) => d[2]));
  const tests = await page.$$eval("svg polyline.series.test", (l) => l.map((e) => e.dataset.run + " " + e.dataset.tag).sort());
  result(tests.join(",") === "lenet-run test/accuracy,lenet-run test/loss,trial-0001 test/accuracy,trial-0001 test/loss",
    "a test curve per run in each chart: " + tests.join(", "));
  const t1 = tdots("loss-chart", "trial-0001"), a1 = tdots("acc-chart", "trial-0001"), l0 = tdots("acc-chart", "lenet-run");
  result(t1.length === 3 && a1.length === 3 && l0.length === 1 && t1.every((d) => d[1] === "test/loss" && d[3] >= 3) && spread(t1) > 150,
    "a visible dot per epoch, spread along the step axis (trial-0001: " + t1.length + " loss dots over " + (t1.length ? spread(t1).toFixed(0) : 0) + " px; lenet-run: " + l0.length + ")");
  const ticks = await page.$$eval("#loss-chart text.tick-label", (t) => t.map((e) => e.classList.contains("x") ? "x" : "y"));
  const titles = await page.$$eval("#acc-chart text.axis-title", (t) => t.map((e) => e.textContent));
  result(ticks.filter((k) => k === "x").length >= 3 && ticks.filter((k) => k === "y").length >= 3 && titles.join(",") === "step,accuracy",
    "axes with ticks (" + ticks.length + " labels) and titles (" + titles.join(", ") + ")");
  await page.screenshot({ path: shot.replace(/\.png$/, "-training.png"), fullPage: true });
  result(external.length === 0, "no request left the server (" + external.join(" ") + ")");
  await browser.close();
  process.exit(fails ? 1 : 0);
})().catch((e) => { console.log("FAIL: " + e.message.split("\n")[0]); process.exit(1); });
