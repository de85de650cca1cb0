// The dashboard's small toolkit: API calls, DOM building (text only, never HTML strings),
// formatting, dialogs. No framework: every page is a few functions over these.

const roles = ['none', 'read', 'write', 'admin'];
export const session = { token: sessionStorage.getItem('baton.token') || '', info: null };

// can reports whether the signed-in token has at least the given role.
export const can = (role) => session.info != null && roles.indexOf(session.info.role) >= roles.indexOf(role);

// serverClock is the server's clock (its Date header, to the second) when the last answer left
// it: a countdown to a time the server names (a periodic job's next run) starts from it, so that
// the browser's own wall clock is not compared with the server's.
export const serverClock = { at: NaN };

export class ApiError extends Error {
  constructor(status, code, detail) {
    super(detail || code || `HTTP ${status}`);
    this.status = status;
    this.code = code;
  }
}

// Listeners the app sets: reachability changes and a token that stopped working.
export const hooks = { reachable: () => {}, unauthorized: () => {} };

// api calls the /v1 API (relative to the page, so a path prefix in front of Baton works).
export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (session.token) headers.Authorization = 'Bearer ' + session.token;
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  let res;
  try {
    res = await fetch(path, { method, headers, cache: 'no-store',
      body: body === undefined ? undefined : JSON.stringify(body) });
  } catch {
    hooks.reachable(false, 'Server unreachable');
    throw new ApiError(0, 'unreachable', 'the server did not answer');
  }
  serverClock.at = Date.parse(res.headers.get('Date'));
  const data = await res.json().catch(() => null);
  if (res.status === 503 && data && data.code === 'unavailable') {
    hooks.reachable(false, 'The server answers but its store does not');
  } else {
    hooks.reachable(true);
  }
  if (!res.ok) {
    if (res.status === 401) hooks.unauthorized();
    throw new ApiError(res.status, data && data.code, data && data.detail);
  }
  return data;
}

// q builds a query string from the non-empty values of obj.
export function q(obj) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(obj)) if (v !== undefined && v !== null && v !== '') p.set(k, v);
  const s = p.toString();
  return s ? '?' + s : '';
}

// h builds an element. Children that are not nodes become text nodes.
export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v == null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  for (const kid of kids.flat(Infinity)) {
    if (kid != null && kid !== false) el.append(kid instanceof Node ? kid : String(kid));
  }
  return el;
}

export const link = (href, text) => h('a', { href }, text);
export const enc = encodeURIComponent;

// keyPath escapes a key for the API's /v1/locks/{key} and /v1/resources/{key} paths as the
// TypeScript client's keyPath does: each "/"-separated segment escaped and the slashes kept.
// Where a slash would leave an empty, "." or ".." segment, which the browser's URL parser (for
// dots, even escaped as %2E) or the server would clean away, so that the path named another key
// ("evil/../victim" would be "victim"), the slash is sent as %2F, joining the segment to its
// neighbour. A key that is only "." or ".." cannot be a path: byKey lists it instead.
export function keyPath(key) {
  const segs = key.split('/');
  const dot = (s) => s === '.' || s === '..';
  let out = '';
  segs.forEach((seg, i) => {
    if (i > 0) {
      const joined = segs[i - 1] === '' || (seg === '' && i < segs.length - 1) || dot(seg) || (i === 1 && dot(segs[0]));
      out += joined ? '%2F' : '/';
    }
    out += dot(seg) ? seg : enc(seg);
  });
  return out;
}

// byKey reads the lock ({lease}) or the resource of key: what is 'locks' or 'resources'. A key
// that no path can name ("." or "..") is read from the listing instead.
export async function byKey(what, key) {
  if (key !== '.' && key !== '..') return api('GET', `v1/${what}/` + keyPath(key));
  const page = await api('GET', `v1/${what}` + q({ prefix: key, limit: 1 }));
  const found = (what === 'locks' ? page.leases : page.resources)[0];
  if (!found || found.key !== key) throw new ApiError(404, 'not_found', `no ${what === 'locks' ? 'live lease on' : 'resource'} ${key}`);
  return what === 'locks' ? { lease: found } : found;
}

// jobPath is the API path of a job (and of its action, if given). An ID that is not a number is
// refused here: "." or ".." would be cleaned away by the browser into another path.
export function jobPath(id, action) {
  if (!/^[1-9][0-9]*$/.test(String(id))) throw new ApiError(400, 'invalid_argument', `no job ${JSON.stringify(String(id))}: a job ID is a positive number`);
  return 'v1/jobs/' + id + (action ? '/' + action : '');
}

// Links to the dashboard's own pages.
export const lockHref = (key) => '#/locks/' + enc(key);
export const jobHref = (id) => '#/jobs/' + id;
export const resourceHref = (key) => '#/resources/' + enc(key);

export function fmtTime(s) {
  if (!s) return '';
  const d = new Date(s);
  return isNaN(d) ? s : d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function fmtMs(ms) {
  if (ms == null) return '';
  if (ms < 1000) return ms + ' ms';
  const s = ms / 1000;
  if (s < 120) return (Math.round(s * 10) / 10) + ' s';
  if (s < 7200) return Math.round(s / 60) + ' min';
  return (Math.round(s / 360) / 10) + ' h';
}

export const fmtJSON = (v, max) => {
  const s = v == null ? '' : JSON.stringify(v);
  return max && s.length > max ? s.slice(0, max - 1) + '…' : s;
};

export const badge = (state) => h('span', { class: 'badge s-' + state }, state);

// ttl is a live countdown to a deadline given as milliseconds left at the moment of the
// answer (the server's ttl_left_ms): it counts on this browser's monotonic clock, so the
// server's and the browser's wall clocks are never compared.
export function ttl(msLeft) {
  return h('span', { class: 'ttl', 'data-deadline': String(performance.now() + msLeft) }, fmtLeft(msLeft));
}

function fmtLeft(ms) {
  if (ms <= 0) return 'expired';
  const s = Math.ceil(ms / 1000);
  if (s < 60) return `in ${s} s`;
  if (s < 3600) return `in ${Math.floor(s / 60)} min ${s % 60} s`;
  return `in ${Math.floor(s / 3600)} h ${Math.floor(s / 60) % 60} min`;
}

export function tickCountdowns() {
  const now = performance.now();
  for (const el of document.querySelectorAll('.ttl[data-deadline]')) {
    const left = Number(el.dataset.deadline) - now;
    el.textContent = fmtLeft(left);
    el.classList.toggle('low', left < 5000);
  }
}

// table renders rows under columns [{label, cell(row), class}].
export function table(columns, rows, empty) {
  if (!rows.length) return h('p', { class: 'muted empty' }, empty || 'Nothing here.');
  return h('div', { class: 'scroll' }, h('table', {},
    h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col', class: c.class }, c.label)))),
    h('tbody', {}, rows.map((r) => h('tr', {}, columns.map((c) => h('td', { class: c.class }, c.cell(r))))))));
}

export function fields(pairs) {
  return h('dl', { class: 'fields' }, pairs.filter((p) => p && p[1] !== undefined && p[1] !== '' && p[1] !== null)
    .map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

// replace swaps the children of holder, keeping keyboard focus on the equivalent element (the
// one with the same data-fk) across a refresh.
export function replace(holder, ...kids) {
  const fk = document.activeElement && holder.contains(document.activeElement) ? document.activeElement.dataset.fk : null;
  const nodes = kids.flat(Infinity).filter((k) => k != null && k !== false);
  holder.replaceChildren(...nodes);
  if (nodes.length) markRendered('baton-first-render');
  if (fk) {
    const again = holder.querySelector(`[data-fk="${CSS.escape(fk)}"]`);
    if (again) again.focus();
  }
}

// markRendered marks (once per name) the frame after data was first drawn: the benchmark in
// docs/benchmarks.md reads these marks.
const marked = new Set();
export function markRendered(name) {
  if (marked.has(name)) return;
  marked.add(name);
  requestAnimationFrame(() => setTimeout(() => {
    performance.mark(name);
    document.documentElement.dataset[name === 'baton-first-render' ? 'rendered' : 'marked'] = '1';
  }));
}

export function toast(text, isError) {
  const box = document.getElementById('toast');
  const p = h('p', { class: isError ? 'err' : '' }, text);
  box.append(p);
  setTimeout(() => p.remove(), isError ? 8000 : 4000);
}

// confirmDialog asks before a change. With reason, the operator must type one. Resolves to
// {reason} on confirmation and to null on cancel or Escape.
export function confirmDialog({ title, text, confirm, reason }) {
  return new Promise((resolve) => {
    let result = null;
    const input = reason ? h('textarea', { name: 'reason', rows: '3', required: true, maxlength: '1024' }) : null;
    const dlg = h('dialog', { 'aria-label': title },
      h('form', { onsubmit: (e) => {
        e.preventDefault();
        result = { reason: input ? input.value.trim() : '' };
        if (input && !result.reason) { input.focus(); return; }
        dlg.close();
      } },
      h('h2', {}, title), h('p', {}, text),
      input ? h('label', {}, 'Reason (recorded in the audit log)', input) : null,
      h('div', { class: 'row' },
        h('button', { type: 'button', class: 'cancel', onclick: () => dlg.close() }, 'Cancel'),
        h('button', { type: 'submit', class: 'danger primary confirm' }, confirm))));
    dlg.addEventListener('close', () => { dlg.remove(); resolve(result); });
    document.body.append(dlg);
    dlg.showModal();
    (input || dlg.querySelector('.cancel')).focus();
  });
}

// action runs a change the operator asked for, reports it, and refreshes the page.
export async function action(fn, done, refresh) {
  try {
    await fn();
    toast(done);
  } catch (e) {
    toast(e.message, true);
  }
  await refresh();
}

// filterForm is a form of named inputs that navigates to base with their values as the query,
// and the route's values of the parameters named in keep.
export function filterForm(base, params, inputs, keep = []) {
  return h('form', { class: 'filters', role: 'search', onsubmit: (e) => {
    e.preventDefault();
    const vals = Object.fromEntries(keep.map((k) => [k, params.get(k)]));
    for (const el of e.target.elements) if (el.name) vals[el.name] = el.value.trim();
    location.hash = base + q(vals);
  } }, inputs.map(([name, label, opts]) => h('label', {}, label, opts
    ? h('select', { name }, opts.map((o) => h('option', { value: o, selected: params.get(name) === o }, o || 'any')))
    : h('input', { name, value: params.get(name) || '', autocomplete: 'off', spellcheck: 'false' }))),
  h('button', { type: 'submit' }, 'Apply'));
}

// pager offers the first page and the next one; param is the query parameter of the cursor.
export function pager(base, params, param, next) {
  const first = new URLSearchParams(params);
  first.delete(param);
  const kids = [];
  if (params.get(param)) kids.push(link(base + (first.toString() ? '?' + first : ''), '« First page'));
  if (next !== undefined && next !== null && next !== '') {
    const p = new URLSearchParams(params);
    p.set(param, next);
    kids.push(h('a', { href: base + '?' + p, class: 'next' }, 'Next page »'));
  }
  return h('div', { class: 'pager' }, kids);
}
