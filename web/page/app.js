// The contact-check page: reads the form, runs psikit's client
// (../psikit/index.js) and shows what it found. No framework.

import { check, FilterStore, Items, load } from "../psikit/index.js";

const $ = (id) => document.getElementById(id);
const store = new FilterStore();

const mib = (bytes) => `${(bytes / 1048576).toFixed(2)} MiB`;
const kib = (bytes) => (bytes < 1048576 ? `${(bytes / 1024).toFixed(1)} KiB` : mib(bytes));

function setState(state) {
  document.body.dataset.state = state;
  $("check").disabled = state === "running";
  $("progress").hidden = state !== "running";
}

function readItems(form) {
  const text = form.contacts.value;
  const normalize = [...form.querySelectorAll('input[name="normalize"]:checked')]
    .map((box) => box.value)
    .join(",") || "none";
  if (form.format.value === "csv") {
    return Items.fromCsv(new TextEncoder().encode(text), form.column.value, normalize, true);
  }
  return Items.fromLines(text, normalize);
}

const SYNC = {
  full: "downloaded the server's filter",
  delta: "downloaded what changed in the server's filter",
  "up-to-date": "the saved filter was up to date",
};

function showResult(items, result) {
  const list = $("matches");
  list.replaceChildren();
  let found = 0;
  result.matches.forEach((matched, i) => {
    if (!matched) return;
    found += 1;
    const li = document.createElement("li");
    li.textContent = items.shown(i);
    li.dataset.index = String(i);
    list.append(li);
  });
  const summary = $("summary");
  summary.textContent =
    `${found} of ${items.length} contacts found. ` +
    `Filter: ${SYNC[result.syncKind]} (${kib(result.filterBytes)}). ` +
    `Sent ${kib(result.bytesSent)}, received ${kib(result.bytesReceived)}.` +
    (result.discarded ? ` The saved filter was damaged and replaced (${result.discarded}).` : "");
  Object.assign(summary.dataset, {
    found: String(found),
    syncKind: result.syncKind,
    filterBytes: String(result.filterBytes),
    bytesSent: String(result.bytesSent),
    bytesReceived: String(result.bytesReceived),
  });
  $("results").hidden = false;
}

async function onSubmit(event) {
  event.preventDefault();
  const form = event.target;
  $("error").textContent = "";
  $("results").hidden = true;
  $("progress").removeAttribute("value");
  setState("running");
  $("status").textContent = "Reading the contacts…";
  let items;
  try {
    await load();
    items = readItems(form);
    $("status").textContent = `Checking ${items.length} contacts…`;
    const url = form.server.value.trim();
    const result = await check(url, items, {
      store,
      onProgress: ({ received, downloaded, downloadTotal }) => {
        const bar = $("progress");
        if (downloadTotal > 0 && downloaded < downloadTotal) {
          bar.max = downloadTotal;
          bar.value = downloaded;
          $("status").textContent =
            `Downloading the server's filter: ${kib(downloaded)} of ${kib(downloadTotal)}`;
        } else {
          bar.removeAttribute("value");
          $("status").textContent = `Checking ${items.length} contacts… received ${kib(received)}`;
        }
      },
    });
    showResult(items, result);
    $("status").textContent = "Done.";
    setState("done");
  } catch (e) {
    $("status").textContent = "";
    $("error").textContent = `Could not check the contacts: ${e.message}`;
    setState("error");
  } finally {
    items?.free();
  }
}

async function onFile(event) {
  const file = event.target.files[0];
  if (!file) return;
  $("contacts").value = await file.text();
  if (/\.csv$/i.test(file.name)) {
    document.querySelector('input[name="format"][value="csv"]').checked = true;
  }
}

const server = new URLSearchParams(location.search).get("server");
if (server) $("server").value = server;
$("form").addEventListener("submit", onSubmit);
$("file").addEventListener("change", onFile);
