// The dashboard's shell: sign-in, the router (#/page/arg?query), the refresh timer and the
// unreachable banner. Pages are in pages.js.
import { session, api, h, hooks, can, tickCountdowns, fmtTime } from './core.js';
import * as pages from './pages.js';

// Each page refreshes every POLL_MS, one refresh at a time, with at most two requests per
// refresh: at most one request per second per page. A page that makes more says how often it
// refreshes (every, in ms) to keep to that. Hidden tabs do not poll.
const POLL_MS = 2000;

const main = document.getElementById('main');
const banner = document.getElementById('banner');
const nav = document.getElementById('nav');
let current = null;
let generation = 0;
let timer = 0;
let downSince = null;
let inflight = 0; // the generation whose refresh runs

hooks.reachable = (ok, why) => {
  if (ok) {
    downSince = null;
    banner.hidden = true;
    main.classList.remove('stale');
    return;
  }
  downSince = downSince || new Date();
  banner.textContent = `${why} since ${fmtTime(downSince.toISOString())}: retrying every ${POLL_MS / 1000} s. What is shown may be out of date.`;
  banner.hidden = false;
  main.classList.add('stale');
};

hooks.unauthorized = () => {
  const had = session.token !== '';
  sessionStorage.removeItem('baton.token');
  session.token = '';
  signIn(had ? 'The token was refused; enter a valid one.' : '');
};

function route() {
  const [path, query] = location.hash.replace(/^#\/?/, '').split('?');
  const [page, ...rest] = path.split('/');
  return { page: page || 'locks', arg: rest.length ? decodeURIComponent(rest.join('/')) : '', params: new URLSearchParams(query || '') };
}

// pageFor picks the page function: list pages without an argument, detail pages with one.
function pageFor(r) {
  const detail = { locks: 'lock', jobs: 'job', resources: 'resource' };
  const name = r.arg ? detail[r.page] : r.page;
  const fn = name && Object.hasOwn(pages, name) ? pages[name] : null;
  const note = (title, ...text) => () => ({ el: h('section', {}, h('h1', {}, title), h('p', { class: 'muted' }, text)), refresh: async () => {} });
  if (!fn) return note('No such page', h('a', { href: '#/locks' }, 'Go to the locks.'));
  if (['jobs', 'job', 'dlq', 'resources', 'resource', 'kinds', 'periodic'].includes(name) && !session.info.jobs) {
    return note('No job queue', `This server's store (${session.info.store}) has no job queue.`);
  }
  if (name === 'limits' && !session.info.limits) return note('No limits', `This server's store (${session.info.store}) keeps no limits.`);
  if (name === 'events' && !session.info.audit) return note('Events', `This server's store (${session.info.store}) keeps no audit log.`);
  if (name === 'events' && !can('admin')) return note('Events', 'The audit log needs a token with the admin role.');
  return fn;
}

function show() {
  if (!session.info) return;
  const r = route();
  generation++;
  clearTimeout(timer);
  current = pageFor(r)(r);
  main.replaceChildren(current.el);
  const title = current.el.querySelector('h1');
  document.title = (title ? title.textContent + ' · ' : '') + 'Baton';
  for (const a of nav.querySelectorAll('a')) {
    if (a.dataset.page === r.page) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  tick(generation);
}

async function tick(gen) {
  if (gen !== generation || inflight === gen) return;
  clearTimeout(timer);
  if (!document.hidden) {
    inflight = gen;
    try {
      await current.refresh();
    } catch (e) {
      console.error(e);
    } finally {
      if (inflight === gen) inflight = 0;
    }
    if (gen !== generation) return;
  }
  timer = setTimeout(() => tick(gen), current.every || POLL_MS);
}

function signIn(message) {
  generation++;
  clearTimeout(timer);
  session.info = null;
  nav.hidden = true;
  const input = h('input', { type: 'password', name: 'token', id: 'token', autocomplete: 'off', required: true });
  main.replaceChildren(h('form', { class: 'login', onsubmit: (e) => {
    e.preventDefault();
    session.token = input.value.trim();
    sessionStorage.setItem('baton.token', session.token);
    boot();
  } }, h('h1', {}, 'Sign in'),
  h('p', { class: message ? 'error' : 'muted' }, message || 'This server needs a bearer token. It is kept for this browser tab only (session storage) and sent with every API call.'),
  h('label', { for: 'token' }, 'API token', input), h('button', { type: 'submit', class: 'primary' }, 'Sign in')));
  input.focus();
}

async function boot() {
  let info;
  try {
    info = await api('GET', 'v1/info');
  } catch (e) {
    if (e.status === 401) return; // hooks.unauthorized asked for a token
    main.replaceChildren(h('p', { class: 'error' }, 'Cannot reach the server: ' + e.message));
    clearTimeout(timer);
    timer = setTimeout(boot, POLL_MS);
    return;
  }
  session.info = info;
  document.getElementById('who').textContent = `${info.store} · ${info.principal} (${info.role}) · ${info.version}`;
  document.getElementById('signout').hidden = !info.auth;
  for (const a of nav.querySelectorAll('a')) {
    a.hidden = (a.dataset.role && !can(a.dataset.role)) || (a.hasAttribute('data-jobs') && !info.jobs) ||
      (a.hasAttribute('data-audit') && !info.audit) || (a.hasAttribute('data-limits') && !info.limits);
  }
  nav.hidden = false;
  show();
}

document.getElementById('signout').addEventListener('click', () => {
  sessionStorage.removeItem('baton.token');
  session.token = '';
  signIn();
});
// The skip link focuses the content; as a plain #main link it would be taken for a route.
document.querySelector('.skip').addEventListener('click', (e) => { e.preventDefault(); main.focus(); });
window.addEventListener('hashchange', () => { show(); main.focus({ preventScroll: true }); });
document.addEventListener('visibilitychange', () => { if (!document.hidden && session.info) tick(generation); });
setInterval(tickCountdowns, 250);
boot();
