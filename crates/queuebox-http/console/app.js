// QueueBox console: a client of the admin API (docs/admin.md). No build step, no dependency.
// Credentials stay in this tab (sessionStorage); every call carries them like any API client.

const $ = (sel) => document.querySelector(sel);
const STATS_EVERY_MS = 5000;
const COUNT_CAP = 10000;

const state = {
  table: "outbox",
  cursor: null,
  history: [],
  rows: [],
  selected: new Set(),
  shown: null,
};

// --- credentials and the API --------------------------------------------------------------

function creds() {
  return JSON.parse(sessionStorage.getItem("queuebox.console.auth") || '{"kind":"bearer","secret":"","header":"X-API-Key"}');
}

async function hmacHex(secret, bytes) {
  const key = await crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const sig = await crypto.subtle.sign("HMAC", key, bytes);
  return [...new Uint8Array(sig)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

async function api(method, target, body) {
  const c = creds();
  const headers = {};
  const text = body === undefined ? "" : JSON.stringify(body);
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (c.kind === "bearer") headers["Authorization"] = `Bearer ${c.secret}`;
  if (c.kind === "api-key") headers[c.header || "X-API-Key"] = c.secret;
  if (c.kind === "hmac") {
    const signed = new TextEncoder().encode(`${method} ${target}\n${text}`);
    headers[c.header || "X-Signature"] = "sha256=" + (await hmacHex(c.secret, signed));
  }
  const response = await fetch(target, { method, headers, body: body === undefined ? undefined : text });
  const answer = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(answer.error || `HTTP ${response.status}`);
    error.status = response.status;
    throw error;
  }
  return answer;
}

function toast(text) {
  const t = $("#toast");
  t.textContent = text;
  t.classList.add("show");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.remove("show"), 4000);
}

function fail(err) {
  toast(err.status === 401 ? `Not authorized: ${err.message}` : `Error: ${err.message}`);
  if (err.status === 401) $("#auth-status").textContent = "not connected";
}

// --- depth ---------------------------------------------------------------------------------

function age(seconds) {
  if (!seconds) return "0 s";
  if (seconds < 120) return `${seconds.toFixed(1)} s`;
  if (seconds < 7200) return `${(seconds / 60).toFixed(1)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

/// `estimated` names the states whose count is an estimate (docs/admin.md, Stats): shown with ≈.
function depthRows(tbody, states, oldest, estimated = []) {
  tbody.replaceChildren();
  for (const [name, count] of Object.entries(states)) {
    const tr = document.createElement("tr");
    tr.className = name;
    tr.innerHTML = `<th scope="row"></th><td class="num"></td>`;
    tr.children[0].textContent = name;
    tr.children[1].textContent = (estimated.includes(name) ? "≈" : "") + String(count);
    tr.dataset.state = name;
    tbody.append(tr);
  }
  const tr = document.createElement("tr");
  tr.innerHTML = `<th scope="row">oldest pending (due)</th><td class="num"></td>`;
  tr.children[1].textContent = age(oldest);
  tbody.append(tr);
}

async function refreshStats() {
  try {
    const stats = await api("GET", "/admin/stats");
    depthRows($("#depth-outbox tbody"), stats.outbox.states, stats.outbox.oldestPendingAgeSeconds, stats.outbox.estimated);
    depthRows($("#depth-inbox tbody"), stats.inbox.states, stats.inbox.oldestPendingAgeSeconds, stats.inbox.estimated);
    $("#depth-updated").textContent = `updated ${new Date().toLocaleTimeString()}`;
    $("#auth-status").textContent = "connected";
  } catch (err) {
    $("#depth-updated").textContent = `not updated: ${err.message}`;
    if (err.status === 401) $("#auth-status").textContent = "not connected";
  }
}

// --- dead letters --------------------------------------------------------------------------

function filters() {
  const form = new FormData($("#filters"));
  const out = {};
  const keys = state.table === "outbox" ? ["topic", "destination", "errorContains"] : ["source", "errorContains"];
  for (const key of keys) {
    const value = String(form.get(key) || "").trim();
    if (value) out[key] = value;
  }
  return out;
}

function listTarget(cursor, limit) {
  const query = new URLSearchParams({ state: "dead", limit: String(limit), ...filters() });
  if (cursor) query.set("cursor", cursor);
  return `/admin/${state.table}/messages?${query}`;
}

const COLUMNS = {
  outbox: [["topic", "Topic"], ["destination", "Destination"], ["attempt", "Attempts"], ["createdAt", "Created"], ["lastError", "Last error"]],
  inbox: [["source", "Source"], ["eventType", "Event type"], ["attempt", "Attempts"], ["createdAt", "Created"], ["lastError", "Last error"]],
};

function renderRows() {
  const cols = COLUMNS[state.table];
  const head = document.createElement("tr");
  head.innerHTML = `<th scope="col"><input type="checkbox" id="select-all" aria-label="Select every row of this page"></th><th scope="col">Id</th>` +
    cols.map(([, title]) => `<th scope="col">${title}</th>`).join("");
  $("#dead-table thead").replaceChildren(head);
  const body = $("#dead-table tbody");
  body.replaceChildren();
  for (const row of state.rows) {
    const tr = document.createElement("tr");
    const check = document.createElement("input");
    check.type = "checkbox";
    check.checked = state.selected.has(row.id);
    check.setAttribute("aria-label", `Select ${row.id}`);
    check.addEventListener("change", () => {
      check.checked ? state.selected.add(row.id) : state.selected.delete(row.id);
      updateButtons();
    });
    const open = document.createElement("button");
    open.type = "button";
    open.className = "link";
    open.textContent = row.id.slice(0, 13) + "…";
    open.title = row.id;
    open.dataset.id = row.id;
    open.setAttribute("aria-label", `Open message ${row.id}`);
    open.addEventListener("click", () => showMessage(row.id));
    const cells = [check, open, ...cols.map(([key]) => row[key] ?? "—")];
    cells.forEach((value, i) => {
      const td = document.createElement("td");
      if (value instanceof Node) td.append(value);
      else td.textContent = String(value);
      if (i === cells.length - 1) td.className = "err";
      tr.append(td);
    });
    body.append(tr);
  }
  $("#select-all").addEventListener("change", (e) => {
    for (const row of state.rows) e.target.checked ? state.selected.add(row.id) : state.selected.delete(row.id);
    renderRows();
    updateButtons();
  });
  $("#dead-empty").hidden = state.rows.length > 0;
  $("#page-info").textContent = `page ${state.history.length + 1}, ${state.rows.length} rows`;
  $("#page-first").disabled = state.history.length === 0;
  $("#page-next").disabled = !state.cursor;
  updateButtons();
}

function verb() {
  return state.table === "outbox" ? "Replay" : "Requeue";
}

function updateButtons() {
  const n = state.selected.size;
  $("#act-replay").disabled = n === 0;
  $("#act-delete").disabled = n === 0;
  $("#act-replay").textContent = `${verb()} selected${n ? ` (${n})` : ""}`;
  $("#act-delete").textContent = `Delete selected${n ? ` (${n})` : ""}`;
  $("#act-replay-all").textContent = `${verb()} all matching`;
}

async function loadPage(cursor) {
  try {
    const limit = Number(new FormData($("#filters")).get("limit") || 25);
    const page = await api("GET", listTarget(cursor, limit));
    state.rows = page.items;
    state.cursor = page.nextCursor;
    renderRows();
  } catch (err) {
    fail(err);
  }
}

function reload() {
  state.history = [];
  state.selected.clear();
  state.current = null;
  loadPage(null);
}

function switchTable(table) {
  state.table = table;
  for (const t of ["outbox", "inbox"]) $(`#tab-${t}`).setAttribute("aria-selected", String(t === table));
  for (const label of document.querySelectorAll("#filters [data-table]")) label.hidden = label.dataset.table !== table;
  reload();
}

/// Counts the dead rows a bulk action on the filter would take, by paging the list.
async function countMatching() {
  let cursor = null;
  let count = 0;
  do {
    const page = await api("GET", listTarget(cursor, 500));
    count += page.items.length;
    cursor = page.nextCursor;
  } while (cursor && count < COUNT_CAP);
  return { count, capped: Boolean(cursor) };
}

function ask(text) {
  const dialog = $("#confirm");
  $("#confirm-text").textContent = text;
  dialog.showModal();
  return new Promise((resolve) => {
    const done = (answer) => {
      dialog.close();
      $("#confirm-yes").onclick = $("#confirm-no").onclick = dialog.oncancel = null;
      resolve(answer);
    };
    $("#confirm-yes").onclick = () => done(true);
    $("#confirm-no").onclick = () => done(false);
    dialog.oncancel = () => done(false);
  });
}

function rowsWord(n) {
  return `${n} ${state.table} ${n === 1 ? "row" : "rows"}`;
}

async function act(kind, ids, { all = false } = {}) {
  try {
    let count = ids.length;
    let capped = false;
    if (all) ({ count, capped } = await countMatching());
    if (count === 0) return toast("No row matches.");
    const what = capped ? `at least ${count} ${state.table} rows` : rowsWord(count);
    const action = kind === "delete" ? "Delete" : verb();
    const ok = await ask(`${action} ${what}? ${kind === "delete" ? "This cannot be undone." : "They are delivered again."}`);
    if (!ok) return;
    const body = all ? { ...filters() } : { ids };
    if (all && Object.keys(body).length === 0) body.createdBefore = new Date().toISOString();
    let answer;
    if (kind === "delete") {
      answer = await api("POST", `/admin/${state.table}/delete`, { state: "dead", ...body });
      toast(`Deleted ${answer.deleted}.`);
    } else if (state.table === "outbox") {
      answer = await api("POST", "/admin/replay", body);
      toast(`Replayed ${answer.moved}.`);
    } else {
      answer = await api("POST", "/admin/inbox/requeue", body);
      toast(`Requeued ${answer.requeued}.`);
    }
    state.selected.clear();
    $("#message").close();
    await Promise.all([loadPage(state.history.at(-1) ?? null), refreshStats()]);
  } catch (err) {
    fail(err);
  }
}

// --- one message ---------------------------------------------------------------------------

function pretty(value) {
  if (typeof value === "string") {
    try { return JSON.stringify(JSON.parse(value), null, 2); } catch { return value; }
  }
  return JSON.stringify(value, null, 2);
}

async function showMessage(id) {
  try {
    const m = await api("GET", `/admin/${state.table}/messages/${encodeURIComponent(id)}`);
    state.shown = id;
    const fields = state.table === "outbox"
      ? ["id", "topic", "key", "destination", "state", "attempt", "maxAttempts", "createdAt", "updatedAt", "scheduledAt"]
      : ["id", "source", "idempotencyKey", "aggregateId", "eventType", "consumption", "state", "attempt", "createdAt", "scheduledAt"];
    const dl = $("#message-fields");
    dl.replaceChildren();
    for (const key of fields) {
      const dt = document.createElement("dt");
      dt.textContent = key;
      const dd = document.createElement("dd");
      dd.textContent = m[key] ?? "—";
      dl.append(dt, dd);
    }
    $("#message-title").textContent = `${state.table === "outbox" ? "Outbox" : "Inbox"} message`;
    $("#message-error").textContent = m.lastError ?? "—";
    $("#message-headers").textContent = pretty(m.headers ?? {});
    $("#message-payload").textContent = pretty(m.payload);
    $("#message-replay").textContent = verb();
    $("#message").showModal();
  } catch (err) {
    fail(err);
  }
}

// --- transform tester ----------------------------------------------------------------------

async function runTransform(event) {
  event.preventDefault();
  const form = new FormData(event.target);
  const out = $("#transform-result");
  let payload;
  try {
    payload = JSON.parse(String(form.get("payload")));
  } catch (err) {
    out.textContent = `The payload is not JSON: ${err.message}`;
    return;
  }
  try {
    const answer = await api("POST", "/admin/transform/test", {
      expression: String(form.get("expression")),
      payload,
      stage: String(form.get("stage")),
    });
    out.textContent = JSON.stringify(answer.result, null, 2);
  } catch (err) {
    out.textContent = err.message;
  }
}

// --- wiring --------------------------------------------------------------------------------

function connect(event) {
  event?.preventDefault();
  const c = { kind: $("#auth-kind").value, secret: $("#auth-secret").value, header: $("#auth-header").value };
  sessionStorage.setItem("queuebox.console.auth", JSON.stringify(c));
  refreshStats();
  reload();
}

function showHeaderField() {
  const kind = $("#auth-kind").value;
  $("#auth-header-label").hidden = !(kind === "api-key" || kind === "hmac");
  if (kind === "hmac" && $("#auth-header").value === "X-API-Key") $("#auth-header").value = "X-Signature";
  if (kind === "api-key" && $("#auth-header").value === "X-Signature") $("#auth-header").value = "X-API-Key";
}

function start() {
  const c = creds();
  $("#auth-kind").value = c.kind;
  $("#auth-secret").value = c.secret;
  $("#auth-header").value = c.header || "X-API-Key";
  showHeaderField();
  $("#auth-kind").addEventListener("change", showHeaderField);
  $("#auth").addEventListener("submit", connect);
  $("#tab-outbox").addEventListener("click", () => switchTable("outbox"));
  $("#tab-inbox").addEventListener("click", () => switchTable("inbox"));
  $("#filters").addEventListener("submit", (e) => { e.preventDefault(); reload(); });
  $("#page-next").addEventListener("click", () => {
    state.history.push(state.cursor);
    loadPage(state.cursor);
  });
  $("#page-first").addEventListener("click", reload);
  $("#act-replay").addEventListener("click", () => act("replay", [...state.selected]));
  $("#act-delete").addEventListener("click", () => act("delete", [...state.selected]));
  $("#act-replay-all").addEventListener("click", () => act("replay", [], { all: true }));
  $("#message-replay").addEventListener("click", () => act("replay", [state.shown]));
  $("#message-delete").addEventListener("click", () => act("delete", [state.shown]));
  $("#message-close").addEventListener("click", () => $("#message").close());
  $("#transform").addEventListener("submit", runTransform);
  updateButtons();
  if (c.secret || c.kind === "none") connect();
  setInterval(refreshStats, STATS_EVERY_MS);
}

start();
