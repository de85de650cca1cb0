// One function per page: it builds the page's frame once and returns refresh, which reads the
// API (at most two requests) and redraws the data. The app calls refresh on a timer.
import {
  session, api, q, h, link, enc, can, lockHref, jobHref, resourceHref, fmtTime, fmtMs, fmtJSON, badge, ttl,
  table, fields, replace, confirmDialog, action, filterForm, pager, markRendered, serverClock, keyPath, byKey, jobPath,
} from './core.js';

const PAGE = 50;
const unfinished = ['scheduled', 'available', 'running', 'retryable'];
const waiting = ['scheduled', 'available', 'retryable'];
const allStates = ['', ...unfinished, 'succeeded', 'cancelled', 'discarded', 'skipped', 'superseded'];

// frame is a page's heading, its fixed parts, and a holder for the data.
function frame(title, ...fixed) {
  const data = h('div', { class: 'data' });
  const err = h('p', { class: 'error', role: 'alert', hidden: true });
  const el = h('section', {}, h('h1', {}, title), fixed, err, data);
  return { el, data, fail: (e) => { err.hidden = !e; err.textContent = e ? e.message : ''; } };
}

// paged wraps refresh so that an error shows in the page instead of an old table silently.
function paged(f, draw) {
  return async () => {
    try {
      await draw();
      f.fail(null);
    } catch (e) {
      f.fail(e);
      if (e.status === 0) return; // unreachable: keep the last data, the banner says why
      if (e.status !== 503) replace(f.data);
    }
  };
}

// forceRelease asks for a reason and ends the lease (admin).
function forceRelease(key, refresh) {
  return async () => {
    const ok = await confirmDialog({ title: 'Force-release ' + key + '?', reason: true, confirm: 'Force-release',
      text: 'The holder loses the lock at once; its fencing token is refused from now on by resources that check it.' });
    if (ok) await action(() => api('POST', 'v1/locks/force-release', { key, reason: ok.reason }), 'Released ' + key, refresh);
  };
}

export function locks(route) {
  const p = route.params;
  const f = frame('Locks', filterForm('#/locks', p, [['prefix', 'Key prefix'], ['holder', 'Holder']]));
  const refresh = paged(f, async () => {
    const r = await api('GET', 'v1/locks' + q({ prefix: p.get('prefix'), holder: p.get('holder'), cursor: p.get('cursor'), limit: PAGE }));
    const cols = [
      { label: 'Key', class: 'key', cell: (l) => link(lockHref(l.key), l.key) },
      { label: 'Holder', class: 'key', cell: (l) => l.holder },
      { label: 'Token', class: 'num', cell: (l) => l.token },
      { label: 'Metadata', cell: (l) => h('code', {}, fmtJSON(l.metadata, 80)) },
      { label: 'Expires', class: 't', cell: (l) => ttl(l.ttl_left_ms) },
    ];
    if (can('admin')) {
      cols.push({ label: 'Actions', class: 'acts', cell: (l) => h('button', { type: 'button', class: 'danger act',
        'data-fk': 'fr:' + l.key, onclick: forceRelease(l.key, refresh) }, 'Force-release') });
    }
    replace(f.data, table(cols, r.leases, 'No live leases.'), pager('#/locks', p, 'cursor', r.next_cursor));
  });
  return { el: f.el, refresh };
}

// Job events (job_claim, job_renew, job_complete) and a cleared resource cooldown name a job
// resource, not a lock: their key links to the resource's page. A cleared cooldown's token is
// the job whose end had started the cooldown: it is shown as that job.
const cleared = (e) => e.kind === 'resource_cooldown_cleared';
const resourceEvent = (e) => e.job_id || e.kind.startsWith('job_') || cleared(e);
// A reset fence's key names a resource outside the store (a fence), neither a lock nor a job
// resource: it links nowhere.
const fenceEvent = (e) => e.kind === 'fence_reset';

function eventJob(e) {
  if (cleared(e)) return h('a', { href: jobHref(e.token), title: `the cooldown began when job ${e.token} ended` }, String(e.token));
  if (!e.job_id) return '';
  return [h('a', { href: jobHref(e.job_id), title: `job ${e.job_id}, attempt ${e.attempt}` }, `${e.job_id}#${e.attempt}`),
    e.job_kind ? h('span', { class: 'muted' }, ' ' + e.job_kind) : ''];
}

function eventsTable(evs) {
  return table([
    { label: '#', class: 'num', cell: (e) => e.id },
    { label: 'At', class: 't', cell: (e) => fmtTime(e.at) },
    { label: 'Event', cell: (e) => e.kind },
    { label: 'Key', class: 'key', cell: (e) => resourceEvent(e)
      ? (session.info.jobs ? link(resourceHref(e.key), e.key) : e.key)
      : fenceEvent(e) ? e.key : link(lockHref(e.key), e.key) },
    { label: 'Holder', class: 'key', cell: (e) => e.holder },
    { label: 'Token', class: 'num', cell: (e) => cleared(e) ? '' : e.token },
    { label: 'Job', class: 't', cell: eventJob },
    { label: 'Outcome', cell: (e) => e.outcome ? badge(e.outcome) : '' },
    { label: 'Actor', class: 'key', cell: (e) => e.actor },
    { label: 'Principal', class: 'key', cell: (e) => e.principal || '' },
    { label: 'Reason', class: 'key', cell: (e) => e.reason || '' },
  ], evs, 'No events.');
}

// The audit log is listed newest first; order=asc in the route lists it oldest first.
const oldestFirst = (p) => p.get('order') === 'asc';

// eventsQuery is the API query of a page of events in the route's order.
const eventsQuery = (p, key) => q({ key, cursor: p.get('cursor'), limit: PAGE, order: oldestFirst(p) ? 'asc' : 'desc' });

// orderToggle names the order shown and links to the other one (from its first page).
function orderToggle(base, p) {
  const other = new URLSearchParams(p);
  other.delete('cursor');
  if (oldestFirst(p)) other.delete('order'); else other.set('order', 'asc');
  const href = base + (other.toString() ? '?' + other : '');
  return h('p', { class: 'order' }, oldestFirst(p) ? 'Oldest first · ' : 'Newest first · ',
    h('a', { href, class: 'order-toggle' }, oldestFirst(p) ? 'show newest first' : 'show oldest first'));
}

export function lock(route) {
  const key = route.arg;
  const p = route.params;
  const f = frame('Lock ' + key);
  const refresh = paged(f, async () => {
    // A store without an audit log (Redis, etcd, …) has no history to show.
    const [cur, evs] = await Promise.all([
      byKey('locks', key).catch((e) => { if (e.status === 404) return null; throw e; }),
      session.info.audit && can('admin') ? api('GET', 'v1/events' + eventsQuery(p, key)) : null,
    ]);
    const l = cur && cur.lease;
    const parts = [l
      // The server shows a lease's ID only to an admin and to the lease's owner.
      ? fields([['Holder', l.holder], ['Owner', l.owner || ''], ['Fencing token', String(l.token)],
        ['Lease ID', l.lease_id ? h('code', {}, l.lease_id) : h('span', { class: 'muted' }, 'shown to admins only')],
        ['Acquired', fmtTime(l.acquired_at)], ['Expires', [fmtTime(l.expires_at), ' (', ttl(l.ttl_left_ms), ')']],
        ['Metadata', l.metadata ? h('pre', {}, JSON.stringify(l.metadata, null, 2)) : '']])
      : h('p', { class: 'muted' }, 'No live lease on this key.')];
    if (l && can('admin')) {
      parts.push(h('div', { class: 'actions' }, h('button', { type: 'button', class: 'danger act', 'data-fk': 'fr',
        onclick: forceRelease(key, refresh) }, 'Force-release…')));
    }
    // On a store with a line, a lock-only key is a resource too while held, waited for or
    // resting: its page shows who waits and why a new request would wait.
    if (session.info.line && session.info.jobs) {
      parts.push(h('p', {}, link(resourceHref(key), 'Who waits for ' + key + ', and why')));
    }
    if (session.info.audit) {
      const base = '#/locks/' + enc(key);
      parts.push(h('h2', {}, 'Audit history'));
      parts.push(evs ? [orderToggle(base, p), eventsTable(evs.events), pager(base, p, 'cursor', evs.next_cursor)]
        : h('p', { class: 'muted' }, 'The audit log needs a token with the admin role.'));
    }
    replace(f.data, parts);
  });
  return { el: f.el, refresh };
}

// explain reads an explanation (GET /v1/jobs/{id}/explain, GET /v1/resources/{key}/explain):
// why a job does not run now, or why the key would not be granted to a new request now. A store
// without a line per resource (info.line false; the endpoints answer 501) has none: null, and the
// page shows nothing of it.
function explain(path) {
  if (!session.info.line) return null;
  return api('GET', path).catch((e) => { if (e.status === 501) return null; throw e; });
}

// reasonsList lists an explanation's reasons in the API's order: the code, its sentence, and a
// link to the job a reason names (the holder's attempt, the first one ahead).
function reasonsList(reasons) {
  return h('ul', { class: 'reasons' }, reasons.map((r) => h('li', { 'data-code': r.code },
    h('code', { class: 'reason' }, r.code), ' ', r.message, r.job ? [' · ', link(jobHref(r.job), 'job ' + r.job)] : '')));
}

// jobActions are the buttons a job's state and the token's role allow.
function jobActions(j, refresh, fk) {
  if (!can('write')) return [];
  const out = [];
  if (unfinished.includes(j.state) && !j.cancel_requested) {
    out.push(h('button', { type: 'button', class: 'danger act', 'data-fk': fk + 'c' + j.id, onclick: async () => {
      const ok = await confirmDialog({ title: `Cancel job ${j.id}?`, confirm: 'Cancel job',
        text: j.state === 'running' ? 'The job runs: its worker is asked to stop, and the job ends cancelled.' : 'The job will not run.' });
      if (ok) await action(() => api('POST', jobPath(j.id, 'cancel')), `Job ${j.id}: cancel sent`, refresh);
    } }, 'Cancel'));
  }
  if (['discarded', 'cancelled', 'skipped', 'retryable'].includes(j.state)) {
    out.push(h('button', { type: 'button', class: 'act', 'data-fk': fk + 'r' + j.id,
      onclick: () => action(() => api('POST', jobPath(j.id, 'retry')), `Job ${j.id} retried`, refresh) }, 'Retry'));
  }
  return out;
}

// joined puts ', ' between nodes.
const joined = (nodes) => nodes.flatMap((n, i) => i ? [', ', n] : [n]);

// beyondMarks says, after a job's resource in a list, what else its attempts hold: shared mode,
// how many more resources and which limits (the job's page lists them).
const beyondMarks = (j) => {
  const more = [];
  if (j.resources && j.resources.length) more.push(`+${j.resources.length} more`);
  if (j.limits && j.limits.length) more.push(`limits ${j.limits.join(', ')}`);
  return [j.shared ? [' ', sharedMark()] : '', more.length ? h('span', { class: 'muted beyond' }, ` (${more.join('; ')})`) : ''];
};

// jobsTable lists jobs; extra is one more column, more(j) more buttons for a row.
function jobsTable(jobs, refresh, extra, more) {
  const cols = [
    { label: 'ID', class: 'num', cell: (j) => link(jobHref(j.id), String(j.id)) },
    { label: 'Kind', cell: (j) => j.kind },
    { label: 'Resource', class: 'key', cell: (j) => [link(resourceHref(j.resource), j.resource), beyondMarks(j)] },
    { label: 'State', cell: (j) => [badge(j.state), j.head && !['running'].includes(j.state) && unfinished.includes(j.state) ? ' next' : '',
      j.cancel_requested ? ' (cancel requested)' : ''] },
    { label: 'Attempt', class: 'num', cell: (j) => `${j.attempt}/${j.max_attempts}` },
    { label: 'Worker', class: 'key', cell: (j) => j.worker || '' },
    { label: 'Created', class: 't', cell: (j) => fmtTime(j.created_at) },
  ];
  if (extra) cols.push(extra);
  if (can('write')) cols.push({ label: 'Actions', class: 'acts', cell: (j) => [jobActions(j, refresh, 'l'), more ? more(j) : []] });
  return table(cols, jobs, 'No jobs.');
}

function countsTable(counts) {
  const kinds = [...new Set(counts.map((c) => c.kind))];
  const n = (k, s) => (counts.find((c) => c.kind === k && c.state === s) || { count: 0 }).count;
  return table([
    { label: 'Kind', cell: (k) => k },
    ...unfinished.map((s) => ({ label: s, class: 'num', cell: (k) => n(k, s) ? link('#/jobs' + q({ kind: k, state: s }), String(n(k, s))) : '0' })),
  ], kinds, 'No unfinished jobs.');
}

export function jobs(route) {
  const p = route.params;
  const f = frame('Jobs', h('h2', {}, 'Unfinished jobs'), h('div', { class: 'counts' }), h('h2', {}, 'List'),
    filterForm('#/jobs', p, [['state', 'State', allStates], ['kind', 'Kind'], ['resource', 'Resource']]));
  const countsHolder = f.el.querySelector('.counts');
  const refresh = paged(f, async () => {
    // The counts read every unfinished job (a few hundred ms at 100,000 on a loaded SQLite):
    // the list does not wait for them.
    const counts = api('GET', 'v1/jobs/counts').then((c) => {
      replace(countsHolder, countsTable(c.counts));
      markRendered('baton-counts');
    });
    const r = await api('GET', 'v1/jobs' + q({ state: p.get('state'), kind: p.get('kind'), resource: p.get('resource'), after: p.get('after'), limit: PAGE }));
    replace(f.data, jobsTable(r.jobs, refresh), pager('#/jobs', p, 'after', r.next_after));
    await counts;
  });
  return { el: f.el, refresh };
}

export function job(route) {
  const id = route.arg;
  const f = frame('Job ' + id);
  const refresh = paged(f, async () => {
    const [j, x] = await Promise.all([api('GET', jobPath(id)), explain(jobPath(id, 'explain'))]);
    // Only a waiting job is explained: a running or finished one has a state and no reasons.
    const why = x && waiting.includes(x.job_state) ? h('div', { class: 'why' }, h('h2', {}, 'Why isn\'t this running?'),
      x.reasons.length ? reasonsList(x.reasons) : h('p', { class: 'muted' }, 'Nothing holds it back: a worker of its kind may claim it now.')) : null;
    replace(f.data,
      h('div', { class: 'actions' }, jobActions(j, refresh, 'd')), why,
      fields([['Kind', j.kind], ['Resource', link(resourceHref(j.resource), j.resource)],
        ['State', [badge(j.state), j.cancel_requested ? ' (cancel requested)' : '', j.head ? ' · head of its resource' : '']],
        ['Superseded by', j.superseded_by ? [link(jobHref(j.superseded_by), 'job ' + j.superseded_by),
          h('span', { class: 'muted' }, ' (latest wins: a newer job of its kind on its resource)')] : undefined],
        ['Mode', j.shared ? [sharedMark(), ' with other shared holders'] : 'exclusive'],
        ['Also holds', j.resources && j.resources.length ? joined(j.resources.map((r) => link(resourceHref(r), r))) : ''],
        ['Limits', j.limits && j.limits.length ? h('span', { class: 'limits' }, joined(j.limits.map((l) => h('span', { class: 'limit' }, l)))) : ''],
        ['Attempt', `${j.attempt} of ${j.max_attempts}`], ['Priority', String(j.priority)],
        ['Worker', j.worker], ['Fencing token', j.token ? String(j.token) : ''],
        ['Lease expires', fmtTime(j.lease_expires_at)], ['Idempotency key', j.idempotency_key],
        ['Created', fmtTime(j.created_at)], ['Scheduled', fmtTime(j.scheduled_at)],
        ['Attempted', fmtTime(j.attempted_at)], ['Finished', fmtTime(j.finished_at)],
        ['Ran for', j.attempted_at && j.finished_at ? fmtMs(Date.parse(j.finished_at) - Date.parse(j.attempted_at)) : ''],
        ['Timeout', j.timeout_ms ? fmtMs(j.timeout_ms) : 'none'], ['Queue position', String(j.seq)]]),
      h('h2', {}, 'Args'), h('pre', { class: 'args' }, JSON.stringify(j.args, null, 2)),
      h('h2', {}, 'Errors'),
      table([{ label: 'Attempt', class: 'num', cell: (e) => e.attempt }, { label: 'At', class: 't', cell: (e) => fmtTime(e.at) },
        { label: 'Code', cell: (e) => e.code }, { label: 'Message', class: 'key', cell: (e) => e.message }],
      j.errors || [], 'No failed attempts.'));
  });
  return { el: f.el, refresh };
}

export function dlq(route) {
  const p = route.params;
  const f = frame('Dead letters', filterForm('#/dlq', p, [['kind', 'Kind'], ['resource', 'Resource']]));
  const purge = (body, what, refresh) => async () => {
    const ok = await confirmDialog({ title: 'Purge ' + what + '?', confirm: 'Purge',
      text: 'Purged jobs are deleted for good: they cannot be retried.' });
    if (ok) await action(() => api('POST', 'v1/dlq/purge', body), 'Purged ' + what, refresh);
  };
  const refresh = paged(f, async () => {
    const r = await api('GET', 'v1/jobs' + q({ state: 'discarded', kind: p.get('kind'), resource: p.get('resource'), after: p.get('after'), limit: PAGE }));
    const last = { label: 'Last error', class: 'key', cell: (j) => { const e = (j.errors || []).at(-1); return e ? `${e.code}: ${e.message}` : ''; } };
    const parts = [];
    if (can('admin') && r.jobs.length) {
      const filt = { kind: p.get('kind') || undefined, resource: p.get('resource') || undefined };
      const what = 'every dead letter' + (filt.kind ? ` of kind ${filt.kind}` : '') + (filt.resource ? ` on ${filt.resource}` : '');
      parts.push(h('div', { class: 'actions' }, h('button', { type: 'button', class: 'danger act purge-all', 'data-fk': 'pa',
        onclick: purge(filt, what, refresh) }, 'Purge ' + what + '…')));
    }
    const purgeOne = can('admin') ? (j) => h('button', { type: 'button', class: 'danger act purge', 'data-fk': 'p' + j.id,
      onclick: purge({ ids: [j.id] }, 'job ' + j.id, refresh) }, 'Purge') : null;
    parts.push(jobsTable(r.jobs, refresh, last, purgeOne));
    parts.push(pager('#/dlq', p, 'after', r.next_after));
    replace(f.data, parts);
  });
  return { el: f.el, refresh };
}

// cooldown says until when a resource cools down (store.Kind.ResourceCooldown) and which job's
// end started it, with a live countdown: new submits to it are skipped until then.
const cooldown = (c) => h('span', { class: 'cooldown' }, 'cooling down until ', fmtTime(c.until), ' (job ',
  link(jobHref(c.job), String(c.job)), '), ', ttl(c.remaining_ms));

// clearCooldown ends a resource's cooldown early (admin), with a reason and confirmation.
function clearCooldown(key, fk, refresh) {
  return h('button', { type: 'button', class: 'danger act clear-cooldown', 'data-fk': fk, onclick: async () => {
    const ok = await confirmDialog({ title: 'Clear the cooldown of ' + key + '?', reason: true, confirm: 'Clear cooldown',
      text: 'Submits to the resource are accepted again at once, and a job waiting for the cooldown to end may start now.' });
    if (ok) {
      // keyPath of the whole path, so that a key ending in "/" keeps its slash escaped.
      await action(() => api('POST', 'v1/resources/' + keyPath(key + '/clear-cooldown'), { reason: ok.reason }),
        'Cleared the cooldown of ' + key, refresh);
    }
  } }, 'Clear cooldown…');
}

export function resources(route) {
  const p = route.params;
  const f = frame('Resources', filterForm('#/resources', p, [['prefix', 'Key prefix']]));
  const refresh = paged(f, async () => {
    const r = await api('GET', 'v1/resources' + q({ prefix: p.get('prefix'), after: p.get('after'), limit: PAGE }));
    const cols = [
      { label: 'Key', class: 'key', cell: (x) => link(resourceHref(x.key), x.key) },
      { label: 'State', cell: (x) => x.state || '' },
      { label: 'Version', class: 'num', cell: (x) => x.version },
      { label: 'Running job', class: 'num', cell: (x) => x.running_job ? link(jobHref(x.running_job), String(x.running_job)) : '' },
      { label: 'Unfinished', class: 'num', cell: (x) => x.unfinished },
      { label: 'Cooldown', cell: (x) => x.cooldown ? cooldown(x.cooldown) : '' },
      { label: 'Updated', class: 't', cell: (x) => fmtTime(x.updated_at) },
    ];
    if (can('admin')) {
      cols.push({ label: 'Actions', class: 'acts', cell: (x) => x.cooldown ? clearCooldown(x.key, 'cc:' + x.key, refresh) : '' });
    }
    replace(f.data, table(cols, r.resources, 'No resources.'), pager('#/resources', p, 'after', r.next_after));
  });
  return { el: f.el, refresh };
}

// holderText is who holds a key (the resource's holder): a lease linking its lock, or a job
// attempt linking its job, with the fencing token and the expiry unless renewed.
const holderText = (key, x) => [x.job ? link(jobHref(x.job), x.holder) : link(lockHref(key), x.holder),
  ` (token ${x.token}) until `, fmtTime(x.expires_at), ' unless renewed (', ttl(x.ttl_left_ms), ')'];

// sharedMark marks a shared holder or a shared request's ticket.
const sharedMark = () => h('span', { class: 'badge shared', title: 'held (or asked for) in shared mode, with other shared holders' }, 'shared');

// holdersList lists every holder of a key held through holds (shared holders, leases on several
// keys), in token order, each marked shared when it holds the key shared.
const holdersList = (key, hs) => h('ul', { class: 'holders' },
  hs.map((x) => h('li', { class: 'holder' }, holderText(key, x), x.shared ? [' ', sharedMark()] : '')));

// treePath is a tree key's ancestors from the root down, each linking its resource page, then
// the key: "cluster / cluster/eu-1 / cluster/eu-1/node/a".
function treePath(key, prefix) {
  const levels = key.slice(prefix.length).split('/');
  const keys = [prefix.slice(0, -1)];
  if (key !== keys[0]) levels.forEach((l, i) => keys.push(prefix + levels.slice(0, i + 1).join('/')));
  return h('span', { class: 'tree-path' }, keys.map((k, i) => [i ? ' / ' : '',
    k === key ? h('strong', {}, k) : link(resourceHref(k), k)]));
}

// relatedList lists the live holders of a tree key's ancestors (they hold its whole subtree)
// and of the keys below it (they hold intention on it), each linking its key's page, indented by
// its depth below the root (app.css).
const relatedList = (key, prefix, hs) => h('ul', { class: 'related' }, hs.map((x) => {
  const above = key.startsWith(x.key + '/');
  const depth = x.key === prefix.slice(0, -1) ? 0 : x.key.slice(prefix.length).split('/').length;
  return h('li', { class: 'holder', 'data-depth': String(Math.min(depth, 8)) }, link(resourceHref(x.key), x.key),
    h('span', { class: 'muted' }, above ? ' (above: holds the whole subtree) ' : ' (below) '),
    holderText(x.key, x), x.shared ? [' ', sharedMark()] : '');
}));

// rest says until when a key rests and why (cooldown, lock-delay, resource-cooldown).
const rest = (x) => h('span', { class: 'rest' }, 'resting until ', fmtTime(x.until), ` (${x.reason}), `, ttl(x.remaining_ms));

// lineTable lists a resource's line, the front first: waiting lock requests and the unfinished
// jobs that are not running, by arrival; a break-glass request is first.
function lineTable(key, line) {
  const isJob = (t) => t.type ? t.type === 'job' : !!t.job;
  return table([
    { label: '#', class: 'num', cell: (t) => t.position },
    { label: 'Type', cell: (t) => isJob(t) ? 'job' : 'lock' },
    { label: 'Who', class: 'key', cell: (t) => isJob(t)
      ? [link(jobHref(t.job), 'job ' + t.job), t.kind ? h('span', { class: 'muted' }, ' ' + t.kind) : '']
      : [t.holder, t.owner ? h('span', { class: 'muted' }, ' (' + t.owner + ')') : ''] },
    { label: 'Since', class: 't', cell: (t) => fmtTime(t.since) },
    { label: 'Expires / not before', class: 't', cell: (t) => t.not_before ? 'not before ' + fmtTime(t.not_before)
      : t.expires_at ? 'expires ' + fmtTime(t.expires_at) : '' },
    { label: 'Break-glass', class: 'key', cell: (t) => t.first
      ? [h('span', { class: 'badge first' }, 'first'), t.first_reason ? ' ' + t.first_reason : ''] : '' },
    { label: 'Mode', cell: (t) => t.shared ? sharedMark() : '' },
  ], line, 'Nobody waits for ' + key + '.');
}

export function resource(route) {
  const key = route.arg;
  const p = route.params;
  const state = p.has('state') ? p.get('state') : 'available';
  const base = '#/resources/' + enc(key);
  const f = frame('Resource ' + key);
  const refresh = paged(f, async () => {
    // keyPath of the whole path, so that a key ending in "/" keeps its slash escaped.
    const [x, r, why] = await Promise.all([byKey('resources', key),
      api('GET', 'v1/jobs' + q({ resource: key, state, after: p.get('after'), limit: PAGE })),
      explain('v1/resources/' + keyPath(key + '/explain'))]);
    // The holder, rest and line come with the resource from a store that keeps a line (line is
    // then an array, [] if nobody waits); from another store they are absent and not shown.
    const hasLine = Array.isArray(x.line);
    replace(f.data,
      fields([['State', x.state || '(never set)'], ['Version', String(x.version)], ['Updated', fmtTime(x.updated_at)],
        ['Holder', hasLine && !(x.holders && x.holders.length) ? (x.holder ? h('span', { class: 'holder' }, holderText(key, x.holder)) : 'nobody') : undefined],
        ['Holders', x.holders && x.holders.length ? holdersList(key, x.holders) : undefined],
        ['Tree', x.tree ? treePath(key, x.tree) : undefined],
        ['Held above and below', x.tree ? (x.related && x.related.length ? relatedList(key, x.tree, x.related) : 'nobody') : undefined],
        ['Rest', hasLine ? (x.rest ? rest(x.rest) : 'none') : undefined],
        ['Rates reached', x.rates && x.rates.length ? h('ul', { class: 'rates' }, x.rates.map((r) => h('li', {},
          `${r.kind ? 'kind ' + r.kind : r.limit ? 'limit ' + r.limit : 'prefix ' + r.prefix}: ${r.rate} reached, next at `, fmtTime(r.next)))) : undefined],
        ['Running job', x.running_job ? link(jobHref(x.running_job), String(x.running_job)) : 'none'],
        ['Unfinished jobs', String(x.unfinished)],
        ['Cooldown', x.cooldown ? [cooldown(x.cooldown), h('br'), h('span', { class: 'muted' },
          'New jobs submitted to it are skipped until then; queued jobs start after it.')] : 'none']]),
      x.cooldown && can('admin') ? h('div', { class: 'actions' }, clearCooldown(key, 'cc', refresh)) : null,
      why ? h('div', { class: 'why' }, h('h2', {}, 'Why would a new request wait?'), why.reasons.length ? reasonsList(why.reasons)
        : h('p', { class: 'muted' }, 'Nothing holds it back: a new request would be granted now.')) : null,
      hasLine ? h('div', { class: 'line' }, h('h2', {}, `Line (${x.line.length} waiting, the front first)`), lineTable(key, x.line),
        x.line.length >= 100 ? h('p', { class: 'muted' }, 'Only the front of the line is shown.') : null) : null,
      h('h2', {}, state === 'available' ? 'Waiting jobs (available, in queue order)' : 'Jobs'),
      filterForm(base, new URLSearchParams({ state }), [['state', 'State', allStates]]),
      jobsTable(r.jobs, refresh), pager(base, p, 'after', r.next_after));
  });
  // Three requests a refresh on a store with a line: refreshed every 3 s, so that the page
  // still makes at most one request a second.
  return { el: f.el, refresh, every: session.info.line ? 3000 : undefined };
}

// limits lists the named limits (GET /v1/limits): each one's use against its capacity, who
// holds its units (with each unit's slot, the key a resource fences it by) and how many requests
// wait for one.
export function limits(route) {
  const p = route.params;
  const f = frame('Limits', h('p', { class: 'muted' }, 'Named capacities: a lease that asks for a limit takes one of its units; ',
    'when all are taken, requests wait in the limit\'s line. Set them with baton limits set or PUT /v1/limits/{name}.'));
  const refresh = paged(f, async () => {
    const r = await api('GET', 'v1/limits' + q({ cursor: p.get('cursor'), limit: PAGE }));
    // The rated key prefixes (GET /v1/rates), on a store that keeps them: the first page.
    const rr = session.info.prefix_rates ? await api('GET', 'v1/rates' + q({ limit: PAGE })) : null;
    const holders = (l) => l.holders.length ? h('ul', { class: 'holders' }, l.holders.map((x) => h('li', {},
      link(lockHref(x.key), x.holder), x.shared ? [' ', sharedMark()] : '', h('span', { class: 'muted' }, ` (slot ${(x.slots || {})[l.name] ?? 0}, token ${x.token}, key ${x.key})`))))
      : h('span', { class: 'muted' }, 'nobody');
    replace(f.data, table([
      { label: 'Name', class: 'key', cell: (l) => l.name },
      { label: 'Used / capacity', class: 'num used', cell: (l) => h('span', { class: l.in_use >= l.capacity ? 'full' : '' }, `${l.in_use} / ${l.capacity}`) },
      { label: 'Holders', class: 'key', cell: holders },
      { label: 'Waiting', class: 'num waiting', cell: (l) => l.waiting },
      { label: 'Updated', class: 't', cell: (l) => fmtTime(l.updated_at) },
      { label: 'Rate', class: 'rate', cell: (l) => l.rate || '' },
    ], r.limits, 'No limits.'), pager('#/limits', p, 'cursor', r.next_cursor),
    rr ? [h('h2', {}, 'Rated key prefixes'),
      h('p', { class: 'muted' }, 'Every grant of a key under a prefix counts against its rate. Set them with baton rates set or PUT /v1/rates/{prefix}.'),
      table([
        { label: 'Prefix', class: 'key', cell: (x) => x.prefix },
        { label: 'Rate', class: 'rate', cell: (x) => x.rate },
        { label: 'Set', class: 't', cell: (x) => fmtTime(x.set_at) },
      ], rr.rates, 'No rated prefixes.')] : null);
  });
  return { el: f.el, refresh };
}

export function kinds() {
  const f = frame('Kinds');
  const refresh = paged(f, async () => {
    const r = await api('GET', 'v1/kinds');
    const guard = (k) => {
      const parts = [];
      if (k.from_states && k.from_states.length) parts.push('from ' + k.from_states.map((s) => s || '(unset)').join(' | '));
      if (k.running_state) parts.push('running → ' + k.running_state);
      if (k.success_state) parts.push('success → ' + k.success_state);
      if (k.failure_state) parts.push('failure → ' + k.failure_state);
      return parts.join('; ') || 'none';
    };
    replace(f.data, table([
      { label: 'Name', cell: (k) => link('#/jobs' + q({ kind: k.name }), k.name) },
      { label: 'Busy policy', cell: (k) => [k.policy, k.debounce_ms ? `, debounce ${fmtMs(k.debounce_ms)}` : ''] },
      { label: 'Rate', cell: (k) => k.rate ? k.rate + ' per resource' : 'none' },
      { label: 'Max attempts', class: 'num', cell: (k) => k.max_attempts },
      { label: 'Timeout', cell: (k) => k.timeout_ms ? fmtMs(k.timeout_ms) : 'none' },
      { label: 'Cooldown', cell: (k) => k.cooldown_ms ? fmtMs(k.cooldown_ms) : 'none' },
      { label: 'Resource cooldown', cell: (k) => k.resource_cooldown_ms ? fmtMs(k.resource_cooldown_ms) : 'none' },
      { label: 'State guard', class: 'key', cell: guard },
      { label: 'Holds', class: 'key', cell: (k) => [k.mode === 'shared' ? sharedMark() : 'exclusive',
        k.limits && k.limits.length ? ['; limits ', k.limits.join(', ')] : ''] },
    ], r.kinds, 'No kinds registered.'));
  });
  return { el: f.el, refresh };
}

// periodic lists the periodic jobs of this server's --periodic-file (read-only: they change with
// the file). The next run is the server's time, with a countdown from the server's clock.
export function periodic() {
  const f = frame('Periodic', h('p', { class: 'muted' }, 'The jobs this server submits once a period when it leads ',
    '(baton serve --periodic-file). They change with the file, not from here.'));
  const refresh = paged(f, async () => {
    const r = await api('GET', 'v1/periodic');
    const next = (j) => {
      if (!j.next_run) return 'never';
      const left = Date.parse(j.next_run) - serverClock.at;
      return [fmtTime(j.next_run), isNaN(left) ? '' : [' (', ttl(left), ')']];
    };
    replace(f.data, table([
      { label: 'Name', class: 'key', cell: (j) => j.name },
      { label: 'Schedule', cell: (j) => h('code', {}, j.schedule) },
      { label: 'Kind', cell: (j) => link('#/jobs' + q({ kind: j.kind }), j.kind) },
      { label: 'Resource', class: 'key', cell: (j) => link(resourceHref(j.resource), j.resource) },
      { label: 'Busy policy', cell: (j) => j.policy || h('span', { class: 'muted' }, 'the kind\'s') },
      { label: 'Priority', class: 'num', cell: (j) => j.priority || 0 },
      { label: 'Next run', class: 't', cell: next },
    ], r.periodic, 'No periodic jobs.'));
  });
  return { el: f.el, refresh };
}

export function events(route) {
  const p = route.params;
  const f = frame('Events', h('p', { class: 'muted' }, 'The audit log: every acquire, release, expiry takeover, force-release and ',
    'clear-rest of a lock; every job attempt\'s claim (job_claim), first lease renewal (job_renew) and end (job_complete, ',
    'with its outcome), where the key is the job\'s resource; and every resource cooldown cleared by hand.'),
  filterForm('#/events', p, [['key', 'Key']], ['order']), orderToggle('#/events', p));
  const refresh = paged(f, async () => {
    const r = await api('GET', 'v1/events' + eventsQuery(p, p.get('key')));
    replace(f.data, eventsTable(r.events), pager('#/events', p, 'cursor', r.next_cursor));
  });
  return { el: f.el, refresh };
}
