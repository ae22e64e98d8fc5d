// r3con app: the workspace, the plan, the run as it happens, and the run's own view (the report's page, in
// the frame). Everything from files, documents and the model is untrusted: it goes in as text, never markup.
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "text") node.textContent = String(v);
    else if (k === "cls") node.className = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children) if (c !== null && c !== undefined) node.append(c);
  return node;
}
const plural = (n, one, many) => `${n.toLocaleString()} ${n === 1 ? one : (many || one + "s")}`;
const money = (usd) => (usd === null || usd === undefined ? "cost unknown" : usd === 0 ? "free" : `$${usd.toFixed(4)}`);

async function api(path, options = {}) {
  const response = await fetch(path, {credentials: "same-origin", ...options,
    headers: {"Content-Type": "application/json", ...(options.headers || {})}});
  const data = await response.json().catch(() => ({error: `the server answered ${response.status}`}));
  if (!response.ok) throw new Error(data.error || `the server answered ${response.status}`);
  return data;
}
function showError(id, err) { const p = $(id); p.textContent = err ? String(err.message || err) : ""; p.hidden = !err; }

// -- the model server and the workspace ---------------------------------------------------------------
let about = null, files = [], used = null;

async function loadAbout() {
  about = await api("/api/about");
  const e = about.endpoint, p = about.planned || {};
  const model = e.model || p.model, window_ = e.window || p.context_window;
  $("endpoint").textContent = e.base_url
    ? `${e.kind} at ${e.base_url} · model ${model || "(the server's)"} · window ${window_ ? window_.toLocaleString() + " tokens" : "not reported"}` +
      (p.concurrency ? ` · ${plural(p.concurrency, "call")} at once` : "") + ` · ${e.price}` + (about.problem ? ` · ${about.problem}` : "")
    : (e.problem || "no model server");
  $("endpoint").classList.toggle("error", !e.base_url || Boolean(about.problem));
  if (about.defaults.max_cost_usd) $("cap").value = about.defaults.max_cost_usd;
}

function renderTree(tree) {
  const box = $("tree");
  box.replaceChildren();
  files = tree.files;
  if (!tree.roots.length) { box.append(el("p", {cls: "muted", text: "No folder yet: add one by its path."})); return; }
  if (tree.error) box.append(el("p", {cls: "error", text: tree.error}));
  for (const root of tree.roots) {
    const mine = files.filter((f) => f.root === root.path);
    const read = mine.filter((f) => f.status === "read").length;
    const head = el("summary", {}, el("span", {cls: "folder", text: root.name}),
      el("span", {cls: "count", text: ` ${read} read${mine.length > read ? ` · ${mine.length - read} not` : ""}`}));
    const list = el("ul", {cls: "files"});
    for (const f of mine.sort((a, b) => a.path.localeCompare(b.path))) list.append(fileItem(f));
    box.append(el("details", {open: true, title: root.path}, head, list));
  }
  lightTree();
}

function fileItem(f) {
  const why = f.status === "read" ? `document ${f.doc}` : `${f.status}: ${f.why}`;
  const li = el("li", {"data-testid": "tree-file", "data-source": f.source, "data-status": f.status, cls: `file ${f.status}`, title: why},
    el("span", {cls: "name", text: f.path}));
  if (f.status !== "read") li.append(el("span", {cls: "why", text: ` ${f.status === "duplicates" ? "duplicate" : f.status}: ${f.why}`}));
  else li.addEventListener("click", () => openFile(f));
  return li;
}

// a file read: its document in the run shown (notes, records, passages marked), else its text
async function openFile(f) {
  const frame = $("view");
  if (shown && !$("result").hidden && frame.contentWindow) {
    frame.contentWindow.location.hash = `doc/${f.doc}`;
    frame.scrollIntoView({block: "start"});
    return;
  }
  try {
    const file = await api(`/api/file?path=${encodeURIComponent(f.source)}`);
    $("preview").hidden = false;
    $("preview-name").textContent = f.path;
    $("preview-text").textContent = file.text;
  } catch (err) { showError("add-error", err); }
}

function lightTree() {
  for (const li of document.querySelectorAll("[data-testid=tree-file]")) {
    if (used === null) { li.removeAttribute("data-used"); continue; }
    li.setAttribute("data-used", String(used.includes(li.getAttribute("data-source"))));
  }
}

async function refreshTree() { renderTree(await api("/api/tree")); }

$("add-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  showError("add-error", null);
  try {
    renderTree(await api("/api/folders", {method: "POST", body: JSON.stringify({path: $("add-path").value})}));
    $("add-path").value = "";
    schedulePlan();
  } catch (err) { showError("add-error", err); }
});

async function upload(list) {
  showError("add-error", null);
  try {
    for (const file of list) {
      const name = file.webkitRelativePath || file.relativePath || file.name;
      if (file.size > about.limits.file_bytes) throw new Error(`${name} is over the upload limit; add its folder by path instead`);
      await api(`/api/files?name=${encodeURIComponent(name)}`, {method: "PUT", body: file, headers: {"Content-Type": "application/octet-stream"}});
    }
  } catch (err) { showError("add-error", err); }
  await refreshTree();
  schedulePlan();
}
async function dropped(items) {  // a dropped folder is walked here; each file keeps its path below it
  const out = [];
  async function walk(entry, prefix) {
    if (entry.isFile) {
      const file = await new Promise((ok, no) => entry.file(ok, no));
      file.relativePath = prefix + file.name;
      out.push(file);
    } else if (entry.isDirectory) {
      const reader = entry.createReader();
      for (;;) {
        const batch = await new Promise((ok, no) => reader.readEntries(ok, no));
        if (!batch.length) break;
        for (const child of batch) await walk(child, prefix + entry.name + "/");
      }
    }
  }
  for (const item of items) { const entry = item.webkitGetAsEntry && item.webkitGetAsEntry(); if (entry) await walk(entry, ""); }
  return out;
}
const drop = $("drop");
drop.addEventListener("dragover", (ev) => { ev.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", async (ev) => {
  ev.preventDefault();
  drop.classList.remove("over");
  const items = ev.dataTransfer.items ? await dropped([...ev.dataTransfer.items]) : [...ev.dataTransfer.files];
  upload(items);
});
$("pick").addEventListener("change", (ev) => upload([...ev.target.files]));

// -- the plan -----------------------------------------------------------------------------------------
let planTimer = null, planAsked = 0;
function schedulePlan() { clearTimeout(planTimer); planTimer = setTimeout(makePlan, 400); }
async function makePlan() {
  const question = $("question").value.trim(), box = $("plan"), mine = ++planAsked;
  if (!question) { box.textContent = "Type a question to see the plan."; return; }
  box.textContent = "Planning…";
  try {
    const plan = await api("/api/plan", {method: "POST", body: JSON.stringify(askBody())});
    if (mine !== planAsked) return;
    renderPlan(plan);
  } catch (err) { if (mine === planAsked) { box.textContent = String(err.message || err); } }
}
function renderPlan(plan) {
  const box = $("plan"), t = plan.total, r = plan.range;
  box.replaceChildren(el("strong", {text: "Plan: "}), `${plural(plan.documents, "document")} in ${plural(plan.parts, "part")}; ${plan.line}`);
  if (r) {
    const basis = r.basis === "sample" ? `${Math.round(r.confidence * 100)}% range (measured on a sample)` : "Range (from the assumptions' stated bounds)";
    box.append(el("div", {text: `${basis}: ${Math.round(r.calls.low).toLocaleString()}–${Math.round(r.calls.high).toLocaleString()} calls, ` +
      `${Math.round(r.prompt_tokens.low).toLocaleString()}–${Math.round(r.prompt_tokens.high).toLocaleString()} prompt tokens` +
      (r.cost_usd && r.cost_usd.high > 0 ? `, ${money(r.cost_usd.low)}–${money(r.cost_usd.high)}` : "")}));
  } else {
    box.append(el("div", {cls: "muted", text: "From assumed note and record sizes (no range: nothing measured yet)."}));
  }
  const rows = plan.stages.map((s) => el("tr", {}, el("td", {text: s.stage}), el("td", {text: s.calls.toLocaleString()}),
    el("td", {text: (s.input_tokens + s.output_tokens).toLocaleString()}), el("td", {text: money(s.cost_usd)})));
  box.append(el("table", {cls: "grid small"}, el("thead", {}, el("tr", {}, ...["stage", "calls", "tokens", "cost"].map((h) => el("th", {text: h})))),
    el("tbody", {}, ...rows, el("tr", {cls: "total"}, el("td", {text: "total"}), el("td", {text: t.calls.toLocaleString()}),
      el("td", {text: (t.input_tokens + t.output_tokens).toLocaleString()}), el("td", {text: money(t.cost_usd)})))));
}
function askBody() { return {question: $("question").value, max_cost_usd: $("cap").value || null, reuse: $("reuse").value}; }
$("question").addEventListener("input", schedulePlan);
$("cap").addEventListener("change", schedulePlan);

// -- a run as it happens ------------------------------------------------------------------------------
let live = null;  // {id, name, source, stages, usage, started}

function startFollowing(id) {
  if (live && live.source) live.source.close();
  live = {id, name: null, stages: {}, order: [], calls: 0, prompt: 0, completion: 0, cost: 0, costKnown: true, notes: 0};
  used = null; lightTree();
  $("live").hidden = false; $("result").hidden = true; $("live").setAttribute("data-live", id);
  $("cancel").hidden = false; $("cancel").disabled = false; $("resume").hidden = true;
  $("live-title").textContent = "Running";
  $("progress").replaceChildren(); $("warnings").replaceChildren(); $("notes").replaceChildren(); $("usage").textContent = "";
  $("notes-count").textContent = "0"; $("notes-box").hidden = true;
  const source = new EventSource(`/api/live/${encodeURIComponent(id)}/events`);
  live.source = source;
  source.onmessage = (msg) => onEvent(JSON.parse(msg.data));
  source.onerror = () => { if (live && live.done) source.close(); };
}

function onEvent(e) {
  if (e.run_dir) live.name = e.run_dir.split(/[\\/]/).pop();
  switch (e.kind) {
    case "stage": stageEvent(e); break;
    case "progress": { const s = stageOf(e.stage); s.done = e.done; s.total = e.total || s.total; drawStages(); break; }
    case "call": callEvent(e); break;
    case "usage": { const u = e.usage || e;  // the run's usage so far: it settles what the calls added up
      live.calls = u.calls || 0; live.prompt = u.prompt_tokens || 0; live.completion = u.completion_tokens || 0;
      live.costKnown = u.cost_usd !== null && !(u.unpriced || []).length; live.cost = u.cost_usd || 0; drawUsage(); break; }
    case "note": live.notes += 1; $("notes-box").hidden = false; $("notes-count").textContent = String(live.notes);
      $("notes").append(el("li", {}, el("strong", {text: `document ${e.doc}, round ${e.round}: `}), e.text)); break;
    case "message": warn(e.text, "message"); break;
    case "warning": warn(e.text); break;
    case "replanned": warn(`the server's window is ${e.window.toLocaleString()} tokens: the documents were split again into ${plural(e.parts, "part")}`); break;
    case "fallback": warn(`The ${e.stage} stage failed (${e.failed}), so ${String(e.fallback).replace(/\.$/, "")}.`); break;
    case "degraded": warn(`document ${e.doc} was left out of ${e.stage}: ${e.error}`); break;
    case "finished": case "failed": case "cancelled": ended(e); break;
    default: break;
  }
}
function stageOf(name) {
  if (!live.stages[name]) { live.stages[name] = {name, done: 0, total: 0, started: Date.now(), finished: false}; live.order.push(name); }
  return live.stages[name];
}
function stageEvent(e) {
  const s = stageOf(e.stage);
  if (e.state === "started") { s.started = Date.now(); s.total = e.total; s.done = 0; s.finished = false; }
  else { s.finished = true; s.done = Math.max(s.done, s.total); }
  drawStages();
}
function callEvent(e) {
  live.calls += 1; live.prompt += e.prompt_tokens || 0; live.completion += e.completion_tokens || 0;
  if (e.cost_usd === null || e.cost_usd === undefined) { if (e.source === "endpoint") live.costKnown = false; } else live.cost += e.cost_usd;
  drawUsage();
}
function eta(s) {
  if (s.finished || !s.done || !s.total || s.done >= s.total) return "";
  const left = (Date.now() - s.started) / s.done * (s.total - s.done) / 1000;
  return left < 60 ? ` · about ${Math.max(1, Math.round(left))} s left` : ` · about ${Math.round(left / 60)} min left`;
}
function drawStages() {
  $("progress").replaceChildren(...live.order.map((name) => {
    const s = live.stages[name], share = s.total ? Math.min(1, s.done / s.total) : (s.finished ? 1 : 0);
    const fill = el("div", {cls: "fill"});
    fill.style.width = `${Math.round(share * 100)}%`;  // through the CSSOM: the page's policy allows no inline style
    const bar = el("div", {cls: "bar"}, fill);
    return el("div", {cls: "stage" + (s.finished ? " done" : ""), "data-stage": name},
      el("span", {cls: "stage-name", text: name}), bar,
      el("span", {cls: "stage-count", text: s.finished ? "done" : `${s.done} of ${s.total}${eta(s)}`}));
  }));
}
function drawUsage() {
  $("usage").textContent = `${plural(live.calls, "call")} · ${plural(live.prompt, "prompt token")} · ${plural(live.completion, "completion token")} · ` +
    (live.costKnown ? money(live.cost) : "cost unknown");
}
function warn(text, cls = "warning") {
  $("warnings").append(el("li", {cls, "data-testid": cls === "warning" ? "run-warning" : null, text}));
}
async function ended(e) {
  live.done = true;
  if (live.source) live.source.close();
  $("cancel").hidden = true;
  const title = {finished: "Finished", failed: "Failed", cancelled: "Cancelled"}[e.kind];
  $("live-title").textContent = title + (e.kind === "failed" && e.error ? `: ${e.error}` : "") +
    (e.kind === "cancelled" ? (e.stage ? ` during ${e.stage}` : "") + "; what it did is kept: Resume continues it" : "");
  if (e.kind !== "finished") { $("resume").hidden = !live.name; }
  await loadHistory();
  if (live.name) await openRun(live.name, false);
  await refreshTree();  // the files as they are now (the next plan reads them so)
}

$("ask").addEventListener("click", async () => {
  showError("ask-error", null);
  try { startFollowing((await api("/api/runs", {method: "POST", body: JSON.stringify(askBody())})).id); }
  catch (err) { showError("ask-error", err); }
});
$("cancel").addEventListener("click", async () => {
  if (!live) return;
  $("cancel").disabled = true;
  try { await api(`/api/live/${encodeURIComponent(live.id)}/cancel`, {method: "POST", body: "{}"}); } catch (err) { showError("ask-error", err); }
});
$("resume").addEventListener("click", async () => {
  const name = $("resume").getAttribute("data-run") || (live && live.name);
  if (!name) return;
  showError("ask-error", null);
  try { startFollowing((await api(`/api/runs/${encodeURIComponent(name)}/resume`, {method: "POST", body: JSON.stringify(askBody())})).id); }
  catch (err) { showError("ask-error", err); }
});

// -- a run's result: the report's own view in the frame, the used files lit in the tree -------------
let shown = null;
async function openRun(name, fromHistory) {
  const d = await api(`/api/runs/${encodeURIComponent(name)}`);
  shown = name;
  used = d.status === "finished" ? d.used : null;
  lightTree();
  const head = $("result-head");
  head.replaceChildren(el("h2", {text: d.question}));
  if (d.fallback) head.append(el("p", {cls: "warning", "data-testid": "run-warning", text: d.fallback}));
  if (d.error) head.append(el("p", {cls: "warning", "data-testid": "run-warning", text: d.error}));
  if (d.reuse) {
    const stages = Object.entries(d.reuse.stages).map(([s, c]) => `${s}: ${c.reused} of ${c.reused + c.recomputed} reused`).join("; ");
    head.append(el("p", {cls: "reuse", "data-testid": "reuse", text: `Reused from ${d.reuse.previous_run} (${d.reuse.mode}): ` +
      `${plural(d.reuse.calls_reused, "call")} and ${plural(d.reuse.prompt_tokens_reused, "prompt token")} not paid again${stages ? " (" + stages + ")" : ""}.`}));
  }
  if (d.status === "finished" && d.used) {
    head.append(el("p", {cls: "muted", text: `The answer cites ${plural(d.used.length, "file")} of the ${plural(d.read.length, "file")} read; they are lit in the tree.`}));
  }
  if (fromHistory) {
    $("live").hidden = d.status === "finished";
    if (d.status !== "finished") {
      $("live-title").textContent = d.error || d.status; $("cancel").hidden = true; $("progress").replaceChildren();
      $("usage").textContent = ""; $("warnings").replaceChildren();
    }
    $("question").value = d.question;
  }
  $("resume").setAttribute("data-run", name);
  $("resume").hidden = !(d.status === "cancelled" || d.status === "failed");
  if (!$("resume").hidden) $("live").hidden = false;
  $("result").hidden = false;
  $("exported").textContent = "";
  $("view").src = `/runs/${encodeURIComponent(name)}/view`;
  for (const li of document.querySelectorAll("[data-testid=history-run]")) li.classList.toggle("current", li.getAttribute("data-run") === name);
}
$("export").addEventListener("click", async () => {
  if (!shown) return;
  try { $("exported").textContent = `Written: ${(await api(`/api/runs/${encodeURIComponent(shown)}/export`, {method: "POST", body: "{}"})).path}`; }
  catch (err) { $("exported").textContent = String(err.message || err); }
});

async function loadHistory() {
  const {runs} = await api("/api/runs");
  $("history").replaceChildren(...runs.map((r) => {
    const li = el("li", {"data-testid": "history-run", "data-run": r.name, "data-status": r.status, cls: r.name === shown ? "current" : null},
      el("a", {href: "#", text: r.question || r.name}), el("span", {cls: `status ${r.status}`, text: ` ${r.status}`}));
    li.querySelector("a").addEventListener("click", (ev) => { ev.preventDefault(); openRun(r.name, true); });
    return li;
  }));
  if (!runs.length) $("history").append(el("li", {cls: "muted", text: "No run yet."}));
}

(async function init() {
  history.replaceState(null, "", "/");  // the token stays in the cookie, not in the address bar
  try { await loadAbout(); await refreshTree(); await loadHistory(); } catch (err) { showError("add-error", err); }
  document.documentElement.setAttribute("data-ready", "1");
})();
