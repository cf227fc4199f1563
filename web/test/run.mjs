// The browser client's tests (and, with --bench, its benchmark) in a real
// headless Chromium, driven over WebDriver (Debian's chromium-driver; no
// npm package, no browser download).
//
//   node web/test/run.mjs PSIKIT_CLI            # unit + end-to-end tests
//   node web/test/run.mjs PSIKIT_CLI --bench [--log2 20] [--contacts 1000]
//
// Unit tests (unit.html): the OPRF's RFC 9497 self-test and the shared
// normalisation vectors, in WebAssembly. End to end: the page
// (web/page/) against `psikit serve --ws-listen` of 2^16 items finds
// exactly the true matches; after a server update it downloads only the
// delta and still matches the truth; the same over wss://; another
// normalisation, a server that is down, an error frame (an exhausted
// query budget) and a page whose origin is not allowed give a readable
// message.

import { spawn } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { createServer } from "node:http";
import { createServer as createNetServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const WEB = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const VECTORS = resolve(WEB, "../crates/io/tests/vectors/normalize.json");
const CHROMIUM = process.env.PSIKIT_CHROMIUM ?? "/usr/bin/chromium";
const CHROMEDRIVER = process.env.PSIKIT_CHROMEDRIVER ?? "/usr/bin/chromedriver";

const args = process.argv.slice(2);
const cli = resolve(args[0] ?? "target/release/psikit");
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at < 0 ? fallback : Number(args[at + 1]);
};

const cleanups = [];
const tmp = mkdtempSync(join(tmpdir(), "psikit-web-"));
cleanups.push(() => rmSync(tmp, { recursive: true, force: true }));

function check(condition, what) {
  if (!condition) throw new Error(`FAILED: ${what}`);
  console.log(`ok - ${what}`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A port nobody listens on (bound, then closed). */
async function freePort() {
  const server = createNetServer();
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

/** Serves web/ (and the vectors) over HTTP on loopback. */
async function staticServer() {
  const types = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css",
    ".wasm": "application/wasm", ".json": "application/json" };
  const server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url, "http://x").pathname);
    const file = path === "/vectors/normalize.json" ? VECTORS : normalize(join(WEB, path));
    if (!file.startsWith(WEB) && file !== VECTORS) {
      res.writeHead(403).end();
      return;
    }
    try {
      const body = readFileSync(file);
      res.writeHead(200, { "content-type": types[extname(file)] ?? "application/octet-stream" });
      res.end(body);
    } catch {
      res.writeHead(404).end();
    }
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  cleanups.push(() => server.close());
  return `http://127.0.0.1:${server.address().port}`;
}

/** Runs the CLI to its end; its stdout. */
const run = (argv) => runCommand(cli, argv);

/** Runs `program` to its end; its stdout. */
function runCommand(program, argv) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(program, argv, { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    let err = "";
    child.stdout.on("data", (d) => (out += d));
    child.stderr.on("data", (d) => (err += d));
    child.on("close", (code) =>
      code === 0 ? resolvePromise(out) : reject(new Error(`${program} ${argv.join(" ")}: ${err}`)));
  });
}

/** Starts `psikit serve`; resolves with its WebSocket address. */
function serve(argv) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(cli, ["serve", "--listen", "127.0.0.1:0", "--ws-listen", "127.0.0.1:0", ...argv],
      { stdio: ["ignore", "pipe", "pipe"] });
    cleanups.push(() => child.kill());
    let out = "";
    child.stdout.on("data", (d) => {
      out += d;
      const ws = out.match(/wss?:\/\/[0-9.:]+/);
      if (ws) resolvePromise(ws[0]);
    });
    let err = "";
    child.stderr.on("data", (d) => (err += d));
    child.on("close", (code) => reject(new Error(`psikit serve exited (${code}): ${err}`)));
  });
}

/** A headless Chromium session over WebDriver. */
async function browser() {
  const port = await freePort();
  const driver = spawn(CHROMEDRIVER, [`--port=${port}`], { stdio: "ignore" });
  cleanups.push(() => driver.kill());
  const base = `http://127.0.0.1:${port}`;
  const wd = async (method, path, body) => {
    const response = await fetch(base + path, {
      method,
      headers: { "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await response.json();
    if (!response.ok) throw new Error(`WebDriver ${path}: ${JSON.stringify(json.value)}`);
    return json.value;
  };
  for (let i = 0; ; i++) {
    try {
      await wd("GET", "/status");
      break;
    } catch (e) {
      if (i > 100) throw new Error(`chromedriver did not start: ${e.message}`);
      await sleep(100);
    }
  }
  const { sessionId } = await wd("POST", "/session", {
    capabilities: { alwaysMatch: { browserName: "chrome", "goog:chromeOptions": {
      binary: CHROMIUM,
      // The wss:// test's certificate is self-signed, made at test time.
      args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--ignore-certificate-errors"],
    } } },
  });
  cleanups.unshift(() => wd("DELETE", `/session/${sessionId}`).catch(() => {}));
  const session = `/session/${sessionId}`;
  await wd("POST", `${session}/timeouts`, { script: 600_000, pageLoad: 60_000 });
  return {
    open: (url) => wd("POST", `${session}/url`, { url }),
    // The script's value; a returned promise is awaited.
    eval: (script, ...scriptArgs) => wd("POST", `${session}/execute/sync`, { script, args: scriptArgs }),
  };
}

/** Fills the page's form with `contacts`, checks them against `server`
 * and waits for the outcome. */
async function checkOnPage(page, server, contacts, normalize) {
  return page.eval(`
    const [server, contacts, normalize] = arguments;
    document.getElementById("server").value = server;
    document.getElementById("contacts").value = contacts;
    for (const box of document.querySelectorAll('input[name="normalize"]')) {
      box.checked = normalize.split(",").includes(box.value);
    }
    document.getElementById("check").click();
    return new Promise((done) => {
      const poll = () => {
        const state = document.body.dataset.state;
        if (state !== "done" && state !== "error") return setTimeout(poll, 20);
        const summary = document.getElementById("summary").dataset;
        done({
          state,
          error: document.getElementById("error").textContent,
          found: [...document.querySelectorAll("#matches li")].map((li) => Number(li.dataset.index)),
          syncKind: summary.syncKind,
          filterBytes: Number(summary.filterBytes),
          bytesSent: Number(summary.bytesSent),
          bytesReceived: Number(summary.bytesReceived),
          progressMax: Number(document.getElementById("progress").max),
        });
      };
      poll();
    });`, server, contacts, normalize);
}

/** Writes the server's CSV: `user{i}@example.com` for i in [0, size). */
function writeServerCsv(path, size) {
  const fd = openSync(path, "w");
  writeSync(fd, "email\n");
  for (let at = 0; at < size; at += 1 << 16) {
    let block = "";
    for (let i = at; i < Math.min(size, at + (1 << 16)); i++) block += `user${i}@example.com\n`;
    writeSync(fd, block);
  }
  closeSync(fd);
}

/** Contacts as people type them: every `step`-th is the server's (in
 * odd case, with spaces), the others are not. */
function contacts(count, serverSize, step) {
  const lines = [];
  for (let i = 0; i < count; i++) {
    lines.push(i % step === 0 ? `  User${(i * 7919) % serverSize}@Example.COM ` : `other${i}@example.com`);
  }
  return lines;
}

/** Indices of `lines` the server holds, by the server's membership test. */
const truth = (lines, holds) =>
  lines.flatMap((line, i) => (holds(line.trim().toLowerCase()) ? [i] : []));

const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);

async function unitTests(page, origin) {
  await page.open(`${origin}/test/unit.html`);
  const result = await page.eval(`return new Promise((done) => {
    const poll = () => (window.unitTests ? done(window.unitTests) : setTimeout(poll, 20));
    poll();
  });`);
  for (const line of result.passed) console.log(`ok - ${line}`);
  check(result.failures.length === 0, `unit tests in WebAssembly (${result.failures.join("; ") || "none failed"})`);
}

async function endToEnd(page, origin) {
  const log2 = 16;
  const size = 1 << log2;
  const state = join(tmp, "state");
  writeServerCsv(join(tmp, "server.csv"), size);
  await run(["filter", "setup", "--input", join(tmp, "server.csv"), "--key", "email",
    "--normalize", "trim,lower", "--state", state]);
  const ws = await serve(["--filter-state", state, "--ws-allow-origin", origin, "--reload-secs", "1"]);

  await page.open(`${origin}/page/index.html`);
  const lines = contacts(1000, size, 3);
  const held = new Set();
  for (let i = 0; i < size; i++) held.add(`user${i}@example.com`);
  const first = await checkOnPage(page, ws, lines.join("\n"), "trim,lower");
  check(first.state === "done", `the page checks 1000 contacts against 2^${log2} (${first.error || "no error"})`);
  check(same(first.found, truth(lines, (x) => held.has(x))), `exactly the ${first.found.length} true matches`);
  check(first.syncKind === "full", `a first visit downloads the filter (${first.filterBytes} bytes)`);
  check(first.progressMax === first.filterBytes, "its progress bar counts the filter's bytes");

  // The server removes 50 of the matched contacts and adds 40 others.
  const removed = lines.filter((_, i) => i % 3 === 0).slice(0, 50).map((l) => l.trim().toLowerCase());
  const added = lines.filter((_, i) => i % 3 !== 0).slice(0, 40);
  writeFileSync(join(tmp, "remove.csv"), `email\n${removed.join("\n")}\n`);
  writeFileSync(join(tmp, "add.csv"), `email\n${added.join("\n")}\n`);
  await run(["filter", "update", "--state", state, "--key", "email", "--normalize", "trim,lower",
    "--add", join(tmp, "add.csv"), "--remove", join(tmp, "remove.csv")]);
  for (const r of removed) held.delete(r);
  for (const a of added) held.add(a);
  const want = truth(lines, (x) => held.has(x));
  let second;
  for (let i = 0; i < 50; i++) {
    await sleep(200); // the server reloads its state every second
    await page.open(`${origin}/page/index.html`);
    second = await checkOnPage(page, ws, lines.join("\n"), "trim,lower");
    if (second.syncKind !== "up-to-date") break;
  }
  check(second.state === "done" && second.syncKind === "delta",
    `after the update a returning page downloads only the delta (${second.filterBytes} bytes, ${second.error || "no error"})`);
  check(second.filterBytes * 20 < first.filterBytes, "the delta is a small part of the filter");
  check(same(second.found, want), `and finds exactly the ${want.length} true matches after the update`);

  // The same over TLS (wss://), with the server's --tls-cert/--tls-key.
  const [cert, key] = [join(tmp, "cert.pem"), join(tmp, "key.pem")];
  await runCommand("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
    "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost",
    "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]);
  const wss = await serve(["--filter-state", state, "--ws-allow-origin", origin,
    "--tls-cert", cert, "--tls-key", key]);
  check(wss.startsWith("wss://"), `a TLS server announces ${wss}`);
  const overTls = await checkOnPage(page, wss, lines.join("\n"), "trim,lower");
  check(overTls.state === "done" && same(overTls.found, want),
    `over wss:// the page finds the same ${overTls.found.length} matches (${overTls.error || "no error"})`);

  const mismatch = await checkOnPage(page, ws, lines.join("\n"), "trim");
  check(mismatch.state === "error" && /normali[sz]/i.test(mismatch.error),
    `another normalisation than the server's is refused: "${mismatch.error}"`);

  const down = `ws://127.0.0.1:${await freePort()}`;
  const refused = await checkOnPage(page, down, lines.join("\n"), "trim,lower");
  check(refused.state === "error" && refused.error.includes("cannot reach"),
    `a server that is down: "${refused.error}"`);

  const budgeted = await serve(["--filter-state", state, "--ws-allow-origin", origin, "--query-budget", "100"]);
  const overBudget = await checkOnPage(page, budgeted, lines.join("\n"), "trim,lower");
  check(overBudget.state === "error" && /budget/i.test(overBudget.error),
    `an error frame from the server (query budget): "${overBudget.error}"`);

  const elsewhere = await serve(["--filter-state", state, "--ws-allow-origin", "https://other.example"]);
  const forbidden = await checkOnPage(page, elsewhere, lines.join("\n"), "trim,lower");
  check(forbidden.state === "error" && forbidden.error.includes("origin"),
    `a page whose origin is not allowed: "${forbidden.error}"`);
}

/** The benchmark: OPRF per item, the first sync of a 2^log2 filter, a
 * query of `count` contacts, in one tab (one thread). */
async function bench(page, origin) {
  const log2 = option("--log2", 20);
  const count = option("--contacts", 1000);
  const size = 1 << log2;
  const state = join(tmp, "state");
  writeServerCsv(join(tmp, "server.csv"), size);
  const t0 = performance.now();
  await run(["filter", "setup", "--input", join(tmp, "server.csv"), "--key", "email",
    "--normalize", "trim,lower", "--state", state]);
  console.log(`server set-up of 2^${log2}: ${((performance.now() - t0) / 1e3).toFixed(1)} s`);
  const ws = await serve(["--filter-state", state, "--ws-allow-origin", origin]);
  await page.open(`${origin}/test/bench.html`);
  const figures = await page.eval(
    "return window.bench(arguments[0], arguments[1], arguments[2]);", ws, count, size);
  for (const [name, value] of figures) console.log(`${name}: ${value}`);
}

async function main() {
  const origin = await staticServer();
  const page = await browser();
  if (args.includes("--bench")) {
    await bench(page, origin);
    return;
  }
  await unitTests(page, origin);
  await endToEnd(page, origin);
  console.log("browser tests passed");
}

try {
  await main();
} catch (e) {
  console.error(e.message);
  process.exitCode = 1;
} finally {
  for (const cleanup of cleanups) await cleanup();
}
