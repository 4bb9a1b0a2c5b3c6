// idlegrid dashboard: a small app over the JSON API under /v1.
//
// It signs in with an API key (kept in sessionStorage, sent as a bearer
// token), shows the views the key's role may see, and refreshes them every
// few seconds. Each panel renders from API answers only; a feature whose
// endpoint this server does not have yet says so instead of showing made-up
// numbers, and lights up as soon as the endpoint answers.
'use strict';
(() => {
  const KEY = 'idlegrid.key';
  // How often the panels refresh: ?refresh_ms=N, but never more often than
  // once a second, whatever a link says.
  const REFRESH_MS = Math.max(1000, Number(new URLSearchParams(location.search).get('refresh_ms')) || 2000);
  const EXPLAIN_MS = 30000; // how long the jobs list shows a queued job's explanation before asking again
  const st = {
    key: sessionStorage.getItem(KEY) || '',
    me: null, view: '', timer: 0, busy: false,
    gen: 0,                 // bumps at each sign-in and sign-out: a refresh begun before draws nothing
    job: '', node: '',      // selected job (renter) and node (provider window editor)
    samples: [],            // own fill-rate samples since this page opened: [t, share]
    shared: null,           // the answers the panels share during a refresh, by name (see once), or null
    rows: {},               // rows that action buttons name, by ID (see remember)
    nodes: {},              // nodes the renter's leases ran on, as the market shows them, by ID (null: unknown)
    offers: '',             // the renter's search of the nodes on offer, as a query string
    earned: {},             // the provider's earnings in each month that has ended, by month (see earnedAllTime)
    watch: null,            // the loop following the chosen job's changes (see follow), or null
    explained: {},          // queued jobs' explanations, by ID: {at, x} (see renterJobs)
    routings: {},           // the renter's keys' inference routing, by key ID (see keyRoutingPanel)
    again: false,           // a refresh was asked for while one ran: run another once it ends
  };
  const $ = (sel, root = document) => root.querySelector(sel);

  // ---- the API -------------------------------------------------------

  class APIError extends Error {
    constructor(status, body) {
      const e = (body && body.error) || {};
      super(e.message || ('HTTP ' + status));
      this.status = status; this.code = e.code || ''; this.field = e.field || '';
      // problems: every field at fault, each with its message (one, or the
      // server's list when a spec broke several rules).
      this.problems = e.problems || (e.field ? [{ field: e.field, message: e.message }] : []);
    }
    // missing is true when the server has no such endpoint (an older server,
    // or a feature not built yet), as opposed to no such object.
    get missing() { return this.status === 404 && /^no such endpoint/.test(this.message); }
  }

  // request calls the API and answers {status, etag, data}. A 304, the
  // answer to an If-None-Match whose version is still current, has no body
  // and is an answer, not an error; signal ends the call (AbortController).
  async function request(method, path, { body, headers, signal } = {}) {
    // The key is read once: a panel still loading when its user signs out
    // (or signs in as someone else) must not sign the next user out when
    // the old or empty key is refused.
    const key = st.key;
    if (!key) throw new APIError(401, { error: { message: 'signed out' } });
    const h = Object.assign({ Accept: 'application/json', Authorization: 'Bearer ' + key }, headers || {});
    const init = { method, headers: h, cache: 'no-store', signal };
    if (body !== undefined) { h['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
    let r;
    try { r = await fetch(path, init); } catch (e) {
      if (e && e.name === 'AbortError') throw e;
      // Said in the page's words, not only the browser's ("Failed to fetch");
      // still a TypeError, which is how the page tells no answer from a refusal.
      throw new TypeError('the server did not answer (' + e.message + '); is it running and reachable?');
    }
    const text = r.status === 204 || r.status === 304 ? '' : await r.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch (_) { data = null; }
    if (!r.ok && r.status !== 304) {
      const err = new APIError(r.status, data);
      err.retryAfterMs = 1000 * (Number(r.headers.get('Retry-After')) || 0); // a limit's wait; 0: none said
      if (r.status === 401 && path !== '/v1/me' && key === st.key) signOut('Your key was refused: ' + err.message);
      throw err;
    }
    return { status: r.status, etag: r.headers.get('ETag') || '', data };
  }
  const api = async (method, path, body, headers) => (await request(method, path, { body, headers })).data;
  const get = (path) => api('GET', path);

  // once answers fn() once per refresh under name: panels of a view that
  // need the same answer (the provider's nodes and their reputations, the
  // balance, the market) share one request a refresh instead of asking
  // each. Outside a refresh (the job's watch redrawing its panel) it asks.
  function once(name, fn) {
    const c = st.shared;
    if (!c) return fn();
    if (!c.has(name)) c.set(name, fn());
    return c.get(name);
  }
  const shared = (path) => once('GET ' + path, () => get(path));

  // probe asks the first of paths that this server has. It answers
  // {data, path} or {missing: true}; other errors are thrown.
  async function probe(paths) {
    for (const p of paths) {
      try { return { data: await get(p), path: p }; } catch (e) {
        if (!(e instanceof APIError) || !e.missing) throw e;
      }
    }
    return { missing: true };
  }

  // pages asks a listing that pages with before= (newest first), or with
  // cursor 'after' one that pages with after=, for up to max rows, a page
  // of size at a time: {rows, more}, more when rows were left unread. key
  // names the list in the answer; null when the answer is the list itself
  // (/v1/quarantine).
  async function pages(path, key, max = 5000, size = 500, cursor = 'before') {
    const rows = [];
    for (let last = ''; rows.length < max;) {
      const sep = path.includes('?') ? '&' : '?';
      const answer = await get(path + sep + 'limit=' + size + (last ? '&' + cursor + '=' + encodeURIComponent(last) : ''));
      const page = (key === null ? answer : answer[key]) || [];
      rows.push(...page);
      if (page.length < size) return { rows, more: false };
      last = page[page.length - 1].id;
    }
    return { rows, more: true };
  }

  // transfersSince is the caller's transfers since the time since (ms),
  // newest first, read a page at a time: metered inference and maturing
  // earnings may put many in a day.
  async function transfersSince(since) {
    const out = [];
    for (let before = '', n = 0; n < 20; n++) {
      const page = (await get('/v1/transfers?limit=1000' + (before ? '&before=' + encodeURIComponent(before) : ''))).transfers || [];
      out.push(...page);
      if (page.length < 1000 || Date.parse(page[page.length - 1].created_at) < since) break;
      before = page[page.length - 1].id;
    }
    return out;
  }

  // more is a hint that a list shows only its newest n rows, and where the
  // rest are.
  const more = (rows, n, cli) => rows.length < n ? '' :
    `<p class="hint">Showing the newest ${esc(n)}; <code>${esc(cli)}</code> lists the rest, a page at a time.</p>`;

  // ---- formatting ----------------------------------------------------

  const esc = (v) => String(v == null ? '' : v).replace(/[&<>"']/g, (c) =>
    ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]));

  // money formats integer micros as dollars exactly, as the ledger records
  // them and the CLI shows them: all six places, less trailing zeros down
  // to cents ($12.345678, $0.001999, $3.00). Every amount the page shows
  // that a ledger holds (balances, charges, payouts, harm, penalties) is
  // written so, above all what an operator confirms: what the dialog says
  // is what moves.
  function money(micros) {
    const m = Math.trunc(Number(micros) || 0), neg = m < 0, a = Math.abs(m);
    const frac = String(a % 1e6).padStart(6, '0').replace(/0{1,4}$/, '');
    return (neg ? '−' : '') + '$' + Math.floor(a / 1e6).toLocaleString('en-US') + '.' + frac;
  }

  // rough formats micros as dollars cut to digits places, for what is read
  // rather than settled: rates ($/GPU-hour, $ per 1M tokens) and charts'
  // labels. One that would read as zero but is not is written exactly.
  function rough(micros, digits) {
    const m = Math.trunc(Number(micros) || 0), neg = m < 0, a = Math.abs(m);
    if (a > 0 && a < 10 ** (6 - digits)) return money(m);
    const frac = String(a % 1e6).padStart(6, '0').slice(0, digits);
    return (neg ? '−' : '') + '$' + Math.floor(a / 1e6).toLocaleString('en-US') + (digits > 0 ? '.' + frac : '');
  }
  const price = (micros) => rough(micros, 4) + '/GPU-h';

  // parseMoney reads "2.50", "$2.5" or "1,234.56" (as money writes it) as
  // integer micros, without floats.
  function parseMoney(s) {
    const m = /^\$?\s*(\d{1,9}|\d{1,3}(?:,\d{3}){1,2})(?:\.(\d{0,6}))?$/.exec(String(s).trim());
    if (!m) return null;
    return Number(m[1].replace(/,/g, '')) * 1e6 + Number((m[2] || '').padEnd(6, '0'));
  }

  function ago(ts) {
    if (!ts) return '—';
    const s = Math.round((Date.now() - Date.parse(ts)) / 1000);
    if (s < 0) return 'in ' + dur(-s);
    return dur(s) + ' ago';
  }
  function dur(s) {
    if (s < 90) return s + 's';
    if (s < 5400) return Math.round(s / 60) + 'm';
    if (s < 172800) return Math.round(s / 3600) + 'h';
    return Math.round(s / 86400) + 'd';
  }
  const when = (ts) => ts ? `<time datetime="${esc(ts)}" title="${esc(ts)}">${esc(ago(ts))}</time>` : '—';
  const pct = (x) => (Math.round((Number(x) || 0) * 1000) / 10) + '%';
  const stateTag = (s) => `<span class="state ${esc(s)}">${esc(s)}</span>`;
  // leaseStateTag is a lease's state; one taken back before it started (not
  // started by its start-by, or its gang stopped) is not called preempted:
  // it never ran, and a gold job is never preempted while it runs.
  const leaseStateTag = (l) => l.state === 'preempted' && !l.started_at
    ? `<span class="state preempted" title="taken back before it started">taken back</span>` : stateTag(l.state);
  const id = (v) => `<code>${esc(v)}</code>`;

  function table(cols, rows, empty) {
    if (!rows.length) return `<p class="muted">${esc(empty || 'Nothing yet.')}</p>`;
    const head = cols.map((c) => `<th scope="col"${c.num ? ' class="num"' : ''}>${esc(c.h)}</th>`).join('');
    const body = rows.map((r) => `<tr${r.__selected ? ' class="selected"' : ''}>` +
      cols.map((c) => `<td${c.num ? ' class="num"' : ''}>${c.f(r)}</td>`).join('') + '</tr>').join('');
    return `<div class="scroll"><table><thead><tr>${head}</tr></thead><tbody>${body}</tbody></table></div>`;
  }

  function kpis(items) {
    return '<dl class="kpis">' + items.map(([k, v]) => `<div><dt>${esc(k)}</dt><dd>${v}</dd></div>`).join('') + '</dl>';
  }

  // anything renders an answer of an endpoint whose shape this page does
  // not know in detail: a list as a table of its plain fields, an object as
  // its plain fields.
  function anything(data) {
    if (data && !Array.isArray(data) && typeof data === 'object') {
      const lists = Object.keys(data).filter((k) => Array.isArray(data[k]));
      if (lists.length === 1) data = data[lists[0]];
    }
    const plain = (o) => Object.keys(o || {}).filter((k) => o[k] === null || typeof o[k] !== 'object').slice(0, 8);
    if (Array.isArray(data)) {
      if (!data.length) return '<p class="muted">None right now.</p>';
      if (typeof data[0] !== 'object') return '<ul>' + data.map((v) => `<li>${esc(v)}</li>`).join('') + '</ul>';
      const keys = plain(data[0]);
      return table(keys.map((k) => ({ h: k, f: (r) => esc(r[k]) })), data.slice(0, 50));
    }
    return kpis(plain(data).map((k) => [k, esc(data[k])]));
  }

  function unavailable(what) {
    return `<p class="unavailable">${esc(what)} is not available on this server yet. This section fills in by itself
      once the server offers it.</p>`;
  }

  // ---- charts (inline SVG) -------------------------------------------

  // Literal colours: SVG presentation attributes do not read CSS variables.
  const COLORS = ['#0a58a8', '#b3450e', '#146c2e', '#6b3fa0'];

  // lineChart draws series [{name, points: [[ms, value], …]}] over time.
  function lineChart(label, series, fmt) {
    const W = 480, H = 150, L = 8, R = 78, T = 10, B = 22;
    const pts = series.flatMap((s) => s.points);
    if (!pts.length) return `<p class="muted">${esc(label)}: no data yet.</p>`;
    let x0 = Math.min(...pts.map((p) => p[0])), x1 = Math.max(...pts.map((p) => p[0]));
    let y1 = Math.max(...pts.map((p) => p[1]), 0), y0 = Math.min(...pts.map((p) => p[1]), 0);
    if (x1 === x0) { x0 -= 60000; x1 += 60000; }
    if (y1 === y0) y1 = y0 + 1;
    const X = (x) => L + (x - x0) / (x1 - x0) * (W - L - R), Y = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - T - B);
    const lines = series.map((s, i) => {
      const c = COLORS[i % COLORS.length];
      const d = s.points.map((p) => X(p[0]).toFixed(1) + ',' + Y(p[1]).toFixed(1)).join(' ');
      const last = s.points[s.points.length - 1];
      return (s.points.length > 1 ? `<polyline fill="none" stroke="${c}" stroke-width="2" points="${d}"/>` : '') +
        s.points.map((p) => `<circle r="2.5" fill="${c}" cx="${X(p[0]).toFixed(1)}" cy="${Y(p[1]).toFixed(1)}"/>`).join('') +
        (last ? `<text x="${W - R + 4}" y="${Y(last[1]).toFixed(1)}" dy="3">${esc(fmt(last[1]))}</text>` : '');
    }).join('');
    // The axis's ends: days (UTC) over two days or more; over half a day,
    // the day with the time, or the last 24 hours would read "10:00 – 09:00".
    const t = (ms) => x1 - x0 >= 2 * 86400e3 ? new Date(ms).toLocaleDateString([], { month: 'short', day: 'numeric', timeZone: 'UTC' })
      : x1 - x0 >= 12 * 3600e3 ? new Date(ms).toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' })
        : new Date(ms).toLocaleTimeString([], x1 - x0 < 3600e3
          ? { hour: '2-digit', minute: '2-digit', second: '2-digit' } : { hour: '2-digit', minute: '2-digit' });
    const summary = series.map((s) => s.name + ' latest ' + fmt(s.points[s.points.length - 1][1])).join('; ');
    return `<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(label + ': ' + summary)}">
      <title>${esc(label)}</title>
      <line class="axis" x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}"/>
      <line class="axis" x1="${L}" x2="${W - R}" y1="${T}" y2="${T}" stroke-dasharray="3 3"/>
      <text x="${W - R + 4}" y="${T + 3}">${esc(fmt(y1))}</text>
      <text x="${L}" y="${H - 6}">${esc(t(x0))}</text><text x="${W - R}" y="${H - 6}" text-anchor="end">${esc(t(x1))}</text>
      ${lines}</svg>` + legend(series.map((s) => s.name));
  }

  // barChart draws groups [{label, values: [v…]}] with one bar per series.
  function barChart(label, names, groups, fmt) {
    if (!groups.length) return `<p class="muted">${esc(label)}: no data yet.</p>`;
    const W = 480, rowH = 14 * names.length + 10, H = groups.length * rowH + 4, L = 130, R = 60;
    const max = Math.max(1, ...groups.flatMap((g) => g.values));
    const bars = groups.map((g, i) => {
      const y = i * rowH + 2;
      return `<text x="0" y="${y + rowH / 2}" dy="3">${esc(g.label)}</text>` + g.values.map((v, j) => {
        const w = (W - L - R) * v / max;
        return `<rect x="${L}" y="${y + j * 14}" width="${w.toFixed(1)}" height="11" fill="${COLORS[j % COLORS.length]}"/>` +
          `<text x="${L + w + 4}" y="${y + j * 14 + 9}">${esc(fmt(v))}</text>`;
      }).join('');
    }).join('');
    const desc = groups.map((g) => g.label + ': ' + g.values.map((v, j) => names[j] + ' ' + fmt(v)).join(', ')).join('; ');
    return `<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(label + '. ' + desc)}">
      <title>${esc(label)}</title>${bars}</svg>` + legend(names);
  }

  const legend = (names) => names.length < 2 ? '' : '<ul class="legend">' +
    names.map((n, i) => `<li><i class="c${i % COLORS.length}" aria-hidden="true"></i>${esc(n)}</li>`).join('') + '</ul>';

  // hourly sums [t, micros] into hour buckets over the last `hours` hours,
  // so that a chart shows quiet hours as zero rather than skipping them.
  function hourly(events, hours) {
    const H = 3600e3, now = Math.floor(Date.now() / H) * H, from = now - (hours - 1) * H;
    const sums = new Map();
    for (let t = from; t <= now; t += H) sums.set(t, 0);
    for (const [t, v] of events) {
      const b = Math.floor(t / H) * H;
      if (sums.has(b)) sums.set(b, sums.get(b) + v);
    }
    return [...sums.entries()];
  }

  // ---- money in the ledger -------------------------------------------

  // charged sums what the charges (lease settlements and metered
  // inference) credited to the accounts matching re, by time. A renter
  // sees the others' side of its charges as one entry, "others".
  function charged(transfers, re) {
    const out = [];
    for (const t of transfers) {
      if (t.kind !== 'settle' && t.kind !== 'inference') continue;
      const v = t.entries.filter((e) => re.test(e.account) && e.amount > 0).reduce((a, e) => a + e.amount, 0);
      if (v) out.push([Date.parse(t.created_at), v]);
    }
    return out;
  }

  const month = () => new Date().toISOString().slice(0, 7);

  // ---- views ---------------------------------------------------------

  // A view is a list of panels; a role lands on the first of its views. A
  // panel's form (if any) is drawn once, so that typing is never
  // interrupted; its body is redrawn on every refresh. A panel that
  // changes something says the access it takes (need) and what it does
  // (act): a key without that access sees a line saying so instead of its
  // form, and none of its buttons (see may).
  const VIEWS = {
    renter: { title: 'Renter', roles: ['renter'], panels: () => [
      { id: 'submit', title: 'Submit a job', form: submitForm, bind: bindSubmit, need: 'use', act: 'submit jobs' },
      { id: 'jobs', title: 'Jobs', wide: true, body: renterJobs },
      { id: 'job', title: 'Job details', wide: true, body: jobDetails, result: true, need: 'use',
        act: 'cancel jobs or complain about their leases' },
      { id: 'offers', title: 'Nodes on offer', wide: true, body: nodesOnOffer, form: offersForm, bind: bindOffers },
      { id: 'spend', title: 'Spend', body: renterSpend },
      { id: 'inference', title: 'Inference usage', body: inferenceUsage },
      { id: 'keys', title: 'Keys and budgets', body: keysAndBudgets, form: budgetForm, bind: bindBudget, need: 'all', act: 'set budgets' },
      { id: 'routing', title: 'Inference routing', body: keyRoutingPanel, form: routingForm, bind: bindRouting, need: 'all',
        act: 'set the routing of keys' },
      { id: 'registries', title: 'Registry logins', body: registryLogins, form: registryForm, bind: bindRegistry, result: true,
        need: 'all', act: 'add or remove registry logins' },
      { id: 'verifications', title: 'Verifications of your results', wide: true, body: verifications },
      { id: 'complaints', title: 'Complaints and disputes', wide: true, body: renterDisputes },
      { id: 'notices', title: 'Notices', wide: true, body: notices },
    ] },
    provider: { title: 'Provider', roles: ['provider'], panels: () => [
      { id: 'nodes', title: 'Nodes and GPUs', wide: true, body: providerNodes, result: true, need: 'use', act: 'drain nodes' },
      { id: 'models', title: 'Models served', wide: true, body: servedModels },
      { id: 'windows', title: 'Windows', body: windowStatus, form: windowForm, bind: bindWindows, need: 'use', act: 'set windows' },
      { id: 'asks', title: 'Asks and suggested prices', body: providerAsks },
      { id: 'earnings', title: 'Fill rate and earnings', body: providerEarnings },
      { id: 'reliability', title: 'Reliability', body: providerReliability },
      { id: 'badges', title: 'Badges', body: providerBadges },
      { id: 'payouts', title: 'Payouts', body: providerPayouts, form: payoutForm, bind: bindPayout, need: 'all', act: 'request payouts' },
      { id: 'bond', title: 'Bond and disputes', wide: true, body: providerBond },
      { id: 'notices', title: 'Notices', wide: true, body: notices },
    ] },
    operator: { title: 'Operator', roles: ['admin'], panels: () => [
      { id: 'health', title: 'System health', wide: true, body: systemHealth },
      { id: 'models', title: 'Models served', wide: true, body: servedModels },
      { id: 'settle', title: 'Payouts to settle', wide: true, body: payoutsToSettle, result: true, need: 'all', act: 'settle or reject payouts' },
      { id: 'disputes', title: 'Disputes', wide: true, body: disputes, result: true, need: 'all', act: 'uphold or dismiss disputes' },
      { id: 'quarantine', title: 'Quarantined nodes', wide: true, body: quarantined, result: true, need: 'all', act: 'lift quarantines' },
      { id: 'verifications', title: 'Verifications', wide: true, body: verifications },
    ] },
    market: { title: 'Market', roles: ['renter', 'provider', 'admin'], panels: () => [
      { id: 'prices', title: 'Prices per GPU model and region', wide: true, body: marketPrices },
      { id: 'supply', title: 'Supply and demand', body: marketSupply },
      { id: 'fill', title: 'Fill rate now', body: marketFill },
    ] },
  };

  const viewsFor = (role) => Object.keys(VIEWS).filter((v) => VIEWS[v].roles.includes(role));

  // -- what the key may do --

  // The key's access (key_access of GET /v1/me; docs/api.md, "API key
  // access") narrows what its role allows: read only reads, use acts but
  // does not manage the account (keys' budgets, registry logins, payouts,
  // an operator's decisions), all does everything. A server that does not
  // say is taken as all: it refuses what the key may not, as it always did.
  const ACCESS_RANK = { read: 0, use: 1, all: 2 };
  const keyAccess = () => (st.me && st.me.key_access) || 'all';
  const may = (need) => !need || ACCESS_RANK[keyAccess()] >= ACCESS_RANK[need];

  // denied is the line a panel p shows instead of what the key may not do.
  function denied(p) {
    const why = keyAccess() === 'read' ? 'This key can only read'
      : `This key's access is ${keyAccess()}, which does not manage the account`;
    return `<p class="hint denied">${esc(why)}: sign in with a key of access ${p.need === 'use' ? 'use or all' : 'all'} to ${esc(p.act)}.</p>`;
  }

  // -- renter --

  function submitForm() {
    return `<form id="submit-form" class="stack" novalidate>
      <div><label for="j-name">Name</label><input id="j-name" type="text" value="my-job" required></div>
      <div><label for="j-kind">Kind</label><select id="j-kind">
        <option value="training">training</option><option value="fine-tuning">fine-tuning</option>
        <option value="batch-inference">batch inference</option><option value="eval">eval</option>
        <option value="sweep">sweep</option><option value="other">other</option></select></div>
      <div class="full"><label for="j-image">Image</label>
        <input id="j-image" type="text" value="python:3.12" required spellcheck="false"></div>
      <div><label for="j-gpus">GPUs</label><input id="j-gpus" type="number" min="1" max="16" value="1" required></div>
      <div><label for="j-tier">Tier</label><select id="j-tier">
        <option value="gold">gold</option><option value="silver" selected>silver</option>
        <option value="bronze">bronze (preemptible)</option></select></div>
      <div><label for="j-price">Max price, $/GPU-hour</label>
        <input id="j-price" type="text" inputmode="decimal" value="5.00" required></div>
      <div><label for="j-duration">Duration, minutes</label>
        <input id="j-duration" type="number" min="1" max="43200" value="60" required></div>
      <div><label for="j-checkpoint">Checkpoints every, minutes (optional)</label>
        <input id="j-checkpoint" type="number" min="1" max="43200" placeholder="never"
          title="How often the job saves work it can resume from. Bronze that checkpoints may take window fragments shorter than its run."></div>
      <div><label for="j-region">Region (optional)</label><input id="j-region" type="text" placeholder="any"></div>
      <div><label for="j-deadline">Finish by, your time (optional)</label>
        <input id="j-deadline" type="datetime-local"
          title="When the job must have finished. It starts only while its whole duration fits before then, and is cancelled once it no longer can."></div>
      <p id="submit-error" class="error full" role="alert"></p>
      <div class="full"><button type="submit">Submit job</button></div>
    </form>`;
  }

  function bindSubmit() {
    $('#submit-form').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const errOut = $('#submit-error');
      errOut.textContent = '';
      for (const el of ev.target.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
      const max = parseMoney($('#j-price').value);
      if (max === null) {
        errOut.textContent = 'Max price: write dollars per GPU-hour, e.g. 2.50';
        $('#j-price').setAttribute('aria-invalid', 'true'); $('#j-price').focus();
        return;
      }
      // Minutes go as whole seconds, and a number that is not one as one the
      // server refuses, so that it says every field at fault at once (in the
      // form's words: see SUBMIT_WORDS); a checkpoint left empty is none.
      const seconds = (v) => { const n = Number(v.trim()); return !v.trim() ? 0 : Number.isFinite(n) ? Math.round(n * 60) : -1; };
      const spec = {
        name: $('#j-name').value.trim(), kind: $('#j-kind').value, image: $('#j-image').value.trim(),
        gpus: Number($('#j-gpus').value), tier: $('#j-tier').value, max_price_micros_per_gpu_hour: max,
        duration_seconds: seconds($('#j-duration').value),
      };
      const region = $('#j-region').value.trim();
      if (region) spec.region = region;
      const checkpoint = seconds($('#j-checkpoint').value);
      if (checkpoint) spec.checkpoint_every_seconds = checkpoint;
      const deadline = $('#j-deadline').value; // local time, as the input shows it
      if (deadline) spec.deadline = new Date(deadline).toISOString();
      const gen = st.gen;
      const button = ev.target.querySelector('button[type=submit]');
      button.disabled = true; // a second click while the first is out would submit the job twice
      try {
        const job = await api('POST', '/v1/jobs', spec);
        if (st.gen !== gen) return; // signed out meanwhile: the job is the last user's
        st.job = job.id;
        toast('Submitted ' + job.id + ' (' + job.state + ')');
        refresh();
      } catch (e) {
        showProblems(errOut, e, SUBMIT_WORDS);
      } finally {
        button.disabled = false;
      }
    });
  }

  // SUBMIT_WORDS say the server's problems with the fields the form asks
  // in other units than the API's: it counts seconds, the form minutes.
  const SUBMIT_WORDS = {
    'job.duration_seconds': 'Duration: write minutes, more than 0 and at most 43,200 (30 days).',
    'job.checkpoint_every_seconds': 'Checkpoints every: write minutes, at most 43,200 (30 days), or leave it empty for none.',
  };

  // problemLines is what the server refused, a line a field at fault; words
  // replace the server's for the fields they name.
  function problemLines(e, words = {}) {
    const ps = e.problems || [];
    return ps.length > 1 || (ps.length === 1 && words[ps[0].field]) ? ps.map((p) => words[p.field] || p.message).join('\n') : e.message;
  }

  // showProblems says what the server refused, a line a problem (in words,
  // for the fields they name), marks each input at fault and focuses the
  // first.
  function showProblems(out, e, words) {
    out.textContent = problemLines(e, words);
    let first = null;
    for (const p of e.problems) {
      const input = fieldInput(p.field);
      if (!input) continue;
      input.setAttribute('aria-invalid', 'true');
      first = first || input;
    }
    if (first) first.focus();
  }

  // fieldInput maps an API error's field to the form input it names.
  function fieldInput(field) {
    const m = { 'job.name': 'j-name', 'job.kind': 'j-kind', 'job.image': 'j-image', 'job.gpus': 'j-gpus', 'job.tier': 'j-tier',
      'job.max_price_micros_per_gpu_hour': 'j-price', 'job.duration_seconds': 'j-duration', 'job.region': 'j-region',
      'job.checkpoint_every_seconds': 'j-checkpoint', 'job.deadline': 'j-deadline' }[field];
    return m ? document.getElementById(m) : null;
  }

  async function renterJobs() {
    const all = (await get('/v1/jobs?limit=100')).jobs.sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
    const jobs = all.slice(0, 30);
    const rest = all.length > jobs.length ? `<p class="hint">Showing your newest ${esc(jobs.length)} jobs; ` +
      `<code>idlegrid job ls --before ${esc(jobs[jobs.length - 1].id)}</code> lists the ones before, a page at a time.</p>` : '';
    // Say why each queued job waits, in the engine's words: an explanation
    // reads every node of the market on the server's scheduler, so each is
    // asked again only after EXPLAIN_MS (see explained).
    const queued = jobs.filter((j) => j.state === 'queued').slice(0, 5);
    const why = {}, gen = st.gen;
    await Promise.all(queued.map(async (j) => {
      const kept = st.explained[j.id];
      if (kept && Date.now() - kept.at < EXPLAIN_MS) { why[j.id] = kept.x; return; }
      try {
        why[j.id] = await get('/v1/jobs/' + encodeURIComponent(j.id) + '/explain');
        if (st.gen === gen) st.explained[j.id] = { at: Date.now(), x: why[j.id] };
      } catch (_) { why[j.id] = kept && kept.x; /* else shown from reason */ }
    }));
    for (const j of jobs) j.__selected = j.id === st.job;
    return table([
      { h: 'Job', f: (j) => `<button type="button" class="link" data-action="job" data-id="${esc(j.id)}"
          aria-label="Show job ${esc(j.name || j.id)}">${esc(j.name || j.id)}</button>` },
      { h: 'State', f: (j) => stateTag(j.state) + (stopping(j) ? '<br><span class="hint">cancel requested</span>' : '') },
      { h: 'GPUs', num: true, f: (j) => esc(j.gpus * (j.nodes || 1)) },
      { h: 'Tier', f: (j) => esc(j.tier) },
      { h: 'Cap', num: true, f: (j) => price(j.max_price_micros_per_gpu_hour) },
      { h: 'Charged', num: true, f: (j) => money(j.charged_micros) },
      { h: 'Why / what', f: (j) => esc(j.reason) + (why[j.id] ? `<br><span class="hint">${
        why[j.id].summary && why[j.id].summary !== j.reason ? esc(why[j.id].summary) + ' ' : ''}${esc(why[j.id].estimate_note || '')}${
        (why[j.id].advice || []).map((a) => '<br>To start sooner: ' + esc(a)).join('')}</span>` : '') },
      { h: 'Submitted', f: (j) => when(j.created_at) },
    ], jobs, 'No jobs yet. Submit one with the form.') + rest;
  }

  // savedCell shows a lease's last checkpoint: a preemption loses only the
  // work since, and a requeued job resumes from its reference.
  function savedCell(l) {
    if (!l.checkpoint_at && !l.checkpoint_ref) return '—';
    const r = l.checkpoint_ref || '';
    const ref = r ? `<code title="${esc(r)}">${esc(r.length > 40 ? r.slice(0, 39) + '…' : r)}</code> ` : '';
    return ref + (l.checkpoint_at ? when(l.checkpoint_at) : '');
  }

  // -- nodes on offer: the renter's search of the market's nodes --

  function offersForm() {
    return `<form id="offers-form" class="stack" novalidate>
      <div><label for="o-models">GPU models</label><input id="o-models" type="text" placeholder="H100-80GB, A100-80GB"></div>
      <div><label for="o-regions">Regions</label><input id="o-regions" type="text" placeholder="eu-west, us-east"></div>
      <div><label for="o-vram">Min GPU memory (GB)</label><input id="o-vram" type="number" min="1" placeholder="40"></div>
      <div><label for="o-free">Min GPUs free now</label><input id="o-free" type="number" min="1" max="64" placeholder="4"></div>
      <div><label for="o-level">Min trust level</label><input id="o-level" type="number" min="1" max="16" placeholder="1"></div>
      <div><label for="o-tier">Tier</label><select id="o-tier"><option value="">any (prices: silver)</option>
        <option>gold</option><option>silver</option><option>bronze</option></select></div>
      <div><label for="o-price">Max price ($/GPU-h)</label><input id="o-price" type="text" inputmode="decimal" placeholder="2.50"></div>
      <div><label for="o-sort">Order</label><select id="o-sort"><option value="">oldest first</option>
        <option value="price">cheapest first</option><option value="reliability">most reliable first</option></select></div>
      <p id="offers-error" class="error full" role="alert"></p>
      <div class="row full"><button type="submit">Search</button></div></form>`;
  }

  // offersQuery is the search's query string from the form's fields (all
  // blank: the market's first 200): models and regions are comma lists
  // (any of them), memory is in decimal GB (1 GB = 1000 MB, as GPU makers
  // count: an RTX 4090 reports 24564 MB, an H100 81559 MB, so "24" must
  // keep the 4090s), a price in dollars. It throws a field's mistake the
  // server could not name in its own words.
  function offersQuery(f) {
    const q = new URLSearchParams({ limit: '200' });
    const list = (v) => (v || '').split(',').map((x) => x.trim()).filter(Boolean).join(',');
    if (list(f.models)) q.set('gpu_model', list(f.models));
    if (list(f.regions)) q.set('region', list(f.regions));
    if (f.vram) {
      const gb = Number(f.vram); // the server would say it in MB (min_vram_mb)
      if (!(gb > 0) || gb > 1e6) throw new Error('Min GPU memory: write gigabytes, more than 0, e.g. 40');
      q.set('min_vram_mb', String(Math.max(1, Math.round(gb * 1000))));
    }
    if (f.free) q.set('min_free_gpus', f.free);
    if (f.level) q.set('min_level', f.level); // the nodes a job with that min_trust_level may run on
    if (f.tier) q.set('tier', f.tier);
    if (f.price) {
      const max = parseMoney(f.price);
      if (max === null) throw new Error('Max price: write dollars per GPU-hour, e.g. 2.50');
      q.set('max_price_micros_per_gpu_hour', String(max));
    }
    if (f.sort) q.set('sort', f.sort);
    return q.toString();
  }

  function bindOffers() {
    const out = $('#offers-error');
    $('#offers-form').addEventListener('submit', async (ev) => {
      ev.preventDefault(); out.textContent = '';
      try {
        const q = offersQuery({ models: $('#o-models').value, regions: $('#o-regions').value, vram: $('#o-vram').value.trim(),
          free: $('#o-free').value.trim(), level: $('#o-level').value.trim(), tier: $('#o-tier').value, price: $('#o-price').value.trim(), sort: $('#o-sort').value });
        const gen = st.gen;
        await get('/v1/nodes?' + q); // a mistake is said here, by the form
        if (st.gen === gen) { st.offers = q; refresh(); }
      } catch (e) { out.textContent = e.message; }
    });
  }

  async function nodesOnOffer() {
    const found = await get('/v1/nodes?' + (st.offers || offersQuery({})));
    const nodes = found.nodes, free = found.free_gpus || {};
    const ask = (n, tier) => { const f = (n.ask.floor_micros_per_gpu_hour || {})[tier]; return f ? price(f) : '—'; };
    return table([
      { h: 'Node', f: (n) => esc(n.name) + '<br>' + id(n.id) }, { h: 'GPUs', f: (n) => esc(gpuSummary(n.gpus)) },
      { h: 'Free now', num: true, f: (n) => n.id in free ? esc(free[n.id]) : '—' },
      { h: 'Region', f: (n) => esc(n.region) + ' <span class="muted">' + esc(n.residency) + '</span>' },
      { h: 'Schedule', f: (n) => esc(scheduleText(n.schedule)) },
      { h: 'Silver ask', num: true, f: (n) => ask(n, 'silver') }, { h: 'Gold ask', num: true, f: (n) => ask(n, 'gold') },
      { h: 'Bronze ask', num: true, f: (n) => ask(n, 'bronze') },
      { h: 'Reliability', num: true, f: (n) => esc(Number(n.reliability).toFixed(3)) },
      { h: 'Level', num: true, f: (n) => esc(n.level || 0) },
    ], nodes, 'No node on offer matches.');
  }

  // learnNodes reads what the market shows of the nodes not read yet. One
  // the server will not show (403, 404) stays unknown, named by its ID; one
  // it could not read now is asked again at the next refresh.
  async function learnNodes(ids) {
    const fresh = [...new Set(ids)].filter((n) => n && !(n in st.nodes)), nodes = st.nodes;
    await Promise.all(fresh.map(async (n) => {
      try {
        nodes[n] = await get('/v1/nodes/' + encodeURIComponent(n)); // a sign-out leaves this map behind
      } catch (e) {
        if (e.status === 403 || e.status === 404) nodes[n] = null;
      }
    }));
  }

  // nodeCell names a node as its owner does, with its GPUs, region and ID.
  function nodeCell(nodeID) {
    const n = st.nodes[nodeID];
    if (!n || !n.name) return id(nodeID);
    return `${esc(n.name)} <span class="muted">${esc(gpuSummary(n.gpus || []))}, ${esc(n.region)}</span><br>${id(nodeID)}`;
  }

  // jobDetails draws the chosen job from the view its watch answered last
  // (see follow) or, before the watch has answered and on a server without
  // one, from GET /v1/jobs/{id} and its leases. It answers its HTML with
  // fresh, which says whether that is still the newest view of the job
  // chosen: drawn late, it must not cover a newer one, nor another job.
  async function jobDetails() {
    if (!st.job) return '<p class="muted">Choose a job in the list to see its leases, charge and logs.</p>';
    const jobID = st.job, seen = watchedView(jobID);
    const fresh = () => st.job === jobID && watchedView(jobID) === seen;
    try {
      let view = seen;
      if (!view) {
        const q = encodeURIComponent(jobID);
        const [job, leases] = await Promise.all([get('/v1/jobs/' + q), get('/v1/leases?job_id=' + q)]);
        view = { job, leases: leases.leases };
      }
      return { html: await jobHTML(view.job, view.leases), fresh };
    } catch (e) {
      e.fresh = fresh; // an error about another job, or an older view, is not drawn either
      throw e;
    }
  }

  // jobHTML is the Job details of job and its leases, with the logs of the
  // latest lease read now.
  async function jobHTML(job, leases) {
    const ls = [...leases].sort((a, b) => Date.parse(a.created_at) - Date.parse(b.created_at));
    await learnNodes(ls.map((l) => l.node_id));
    const facts = [
      ['Charged', money(job.charged_micros)], ['Attempts', esc(job.attempts)],
      ['Image', esc(job.image)], ['Started', when(job.started_at)], ['Ended', when(job.ended_at)],
    ];
    if (job.deadline) facts.push(['Finish by', when(job.deadline)]);
    if (job.cancel_requested_at) facts.push(['Cancel requested', when(job.cancel_requested_at)]);
    let html = `<h3>${esc(job.name || job.id)} ${id(job.id)} ${stateTag(job.state)}</h3>` + kpis(facts) + `<p>${esc(job.reason)}</p>`;
    html += table([
      { h: 'Lease', f: (l) => id(l.id) }, { h: 'State', f: leaseStateTag },
      { h: 'Node', f: (l) => nodeCell(l.node_id) }, { h: 'Price', num: true, f: (l) => price(l.price_micros_per_gpu_hour) },
      { h: 'Progress', num: true, f: progressCell },
      // A lease's hold is escrowed while it runs; once it ends, the charge is
      // taken from it and the rest returned, so none of it is held any more.
      { h: 'Held', num: true, f: (l) => live(l) ? money(l.hold_micros)
        : `<span class="muted" title="${esc(money(l.hold_micros))} held while it ran; returned, less the charge, when it ended">released</span>` },
      { h: 'Saved', f: savedCell },
      { h: 'Charged', num: true, f: (l) => money(l.charged_micros) }, { h: 'Note', f: (l) => esc(l.reason) },
      ...(may(ACTIONS.complain.need) ? [{ h: '', f: (l) => actionButton('complain', l.id, 'Complain', 'about lease ' + l.id) }] : []),
    ], remember(ls), (job.state === 'queued' ? 'Not placed yet: ' : 'Never placed: ') + job.reason);
    const last = ls[ls.length - 1];
    if (last) {
      const logs = (await get('/v1/leases/' + encodeURIComponent(last.id) + '/logs?tail=60')).lines;
      html += `<h3>Logs of ${esc(last.id)}</h3>` + (logs.length
        ? `<pre class="logs" tabindex="0" aria-label="Job logs">${logs.map((l) =>
          `<span class="${esc(l.stream)}">${esc(l.text)}</span>`).join('\n')}</pre>`
        : '<p class="muted">No output yet.</p>');
    }
    if (stopping(job)) {
      html += '<p class="hint">Cancel requested: the job ends once its leases have stopped.</p>';
    } else if ((job.state === 'queued' || job.state === 'running') && may('use')) {
      remember([job]);
      html += `<p>${actionButton('cancel', job.id, 'Cancel job', job.name || job.id, true)}</p>`;
    }
    return html;
  }

  // live is whether the lease l holds GPUs (and its hold) now.
  const live = (l) => l.state === 'running' || l.state === 'assigned';

  // progressCell is a live lease's progress: its workload's, or, while its
  // node is still starting it, how far the pull of the job's image has come,
  // and by when it must start to end in time for what follows on the node.
  const progressCell = (l) => {
    if (!live(l)) return '—';
    const p = l.pull;
    let cell = pct(l.progress);
    if (l.state === 'assigned' && p && p.image_bytes > 0) {
      cell = `<span title="the node pulls the job's image: ${esc(gib(p.pulled_bytes))} of ${esc(gib(p.image_bytes))}">pulling ${pct(p.pulled_bytes / p.image_bytes)}</span>`;
    }
    if (l.state === 'assigned' && l.start_by) {
      cell += ` · <span title="not started by ${esc(l.start_by)}, the lease goes back to the queue, to keep the job's deadline, the node's window or another job's reservation">start by ${when(l.start_by)}</span>`;
    }
    return cell;
  };
  const gib = (n) => (Math.round((Number(n) || 0) / 2 ** 30 * 10) / 10) + ' GiB';

  // stopping is whether job j was asked to cancel and has not ended yet:
  // a running job stays running until its leases have stopped.
  const stopping = (j) => !!j.cancel_requested_at && (j.state === 'queued' || j.state === 'running');

  // -- following the chosen job (push) --

  // The Job details panel follows the chosen job with the server's watch,
  // GET /v1/jobs/{id}/watch: a long poll that answers the job and its
  // leases as soon as either changes, so that a placement, start, progress
  // or end shows at once rather than at the next refresh. One loop runs at
  // a time, st.watch: {job, gen, ctrl, etag, view}, view being its last
  // answer ({job, leases}), which jobDetails draws; null while it has none.
  const WATCH_WAIT_S = 25;         // the server caps a wait at 30 s
  const WATCH_PAUSE_MAX_MS = 30000; // the longest pause after a failure

  // follow starts the loop for the job chosen, while a view shows its
  // details, and ends any other. It runs at every refresh and at sign-out,
  // so that choosing another job, leaving the view, signing out or another
  // user's sign-in ends the old loop; it does nothing when none of those
  // changed, so a loop that stopped for good is not started again.
  function follow() {
    const job = st.me && $('[data-panel="job"]') ? st.job : '';
    const w = st.watch;
    if (w && w.job === job && w.gen === st.gen) return;
    if (w) w.ctrl.abort();
    st.watch = job ? { job, gen: st.gen, ctrl: new AbortController(), etag: '', view: null } : null;
    if (st.watch) watchLoop(st.watch);
  }

  // watchedView is the view of job the watch answered last, or null.
  const watchedView = (job) => st.watch && st.watch.job === job ? st.watch.view : null;

  // watchLoop asks the watch until the loop w is ended (st.watch is no
  // longer w); what an ended loop gets back is dropped. A new view is drawn
  // at once and, when the job changed, kicks the refresh, so that the job
  // list and the balance follow; an unchanged one (304) is asked for again. While the server is
  // unreachable or failing (5xx, 408, 429), w has no view, so the refresh
  // reads the job as it does without a watch, and the watch is asked again
  // after a pause that doubles from 1 s to 30 s, or the Retry-After of a
  // server over its limit if that is longer. A server without the
  // endpoint (an older one), or one refusing it for this job, is not asked
  // again for this job: the refresh draws it.
  async function watchLoop(w) {
    let pause = 0;
    while (st.watch === w) {
      const asked = Date.now();
      let r;
      try {
        r = await request('GET', '/v1/jobs/' + encodeURIComponent(w.job) + '/watch?wait=' + WATCH_WAIT_S,
          { headers: w.etag ? { 'If-None-Match': w.etag } : {}, signal: w.ctrl.signal });
      } catch (e) {
        if (st.watch !== w) return;
        w.etag = ''; w.view = null; // the next answer is the whole view, drawn at once
        if (e instanceof APIError && e.status < 500 && e.status !== 408 && e.status !== 429) return;
        pause = Math.min(Math.max(pause ? pause * 2 : 1000, e.retryAfterMs || 0), WATCH_PAUSE_MAX_MS);
        await sleep(pause, w.ctrl.signal);
        continue;
      }
      pause = 0;
      if (st.watch !== w) return;
      if (r.status === 304) { // a server that waits less (its cap) is asked at most once a second
        await sleep(1000 - (Date.now() - asked), w.ctrl.signal);
        continue;
      }
      if (!r.etag) { w.view = null; return; } // without a version, every ask would answer at once
      const before = w.view; // null at the first answer, which is no news: the choice itself refreshed
      w.etag = r.etag; w.view = r.data;
      drawJob();
      // The job list and the balance show the job, not its leases: a change
      // of the job (placed, started, charged, ended) refreshes them, a
      // lease's progress alone does not.
      if (before && JSON.stringify(before.job) !== JSON.stringify(r.data.job)) refresh();
    }
  }

  // drawJob redraws the Job details panel now, outside the refresh, for
  // the user and view that asked and only with the newest view (fresh).
  async function drawJob() {
    const p = ($('#view').panels || []).find((x) => x.id === 'job');
    if (!p) return;
    const gen = st.gen, v = st.view, r = await render(p);
    const el = $('[data-panel="job"]');
    if (el && st.gen === gen && st.view === v && r.fresh()) paint(el, r.html);
  }

  // sleep waits ms, or until signal aborts.
  const sleep = (ms, signal) => new Promise((resolve) => {
    const done = () => { clearTimeout(t); signal.removeEventListener('abort', done); resolve(); };
    const t = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });

  async function renterSpend() {
    const [bal, stmt, tx] = await Promise.all([
      shared('/v1/balance'), get('/v1/statements?month=' + month()), transfersSince(Date.now() - 24 * 3600e3),
    ]);
    const t = stmt.total || {};
    // The total adds in inference; the hourly average is the leases' alone.
    const leases = (stmt.lines || []).reduce((sum, l) => sum + l.charged_micros, 0);
    const perHour = t.gpu_seconds > 0 ? Math.floor(leases * 3600 / t.gpu_seconds) : 0;
    const spend = charged(tx, /^others$/);
    return kpis([
      ['Available', money(bal.available_micros)], ['Held in escrow', money(bal.held_micros)],
      ['Spent, all time', money(bal.spent_micros)], ['This month', money(t.charged_micros)],
      ['GPU-hours this month', esc(t.gpu_hours || '0')], ['Average $/GPU-hour', perHour ? rough(perHour, 4) : '—'],
    ]) + lineChart('Spend per hour, last 24 hours', [{ name: 'spend', points: hourly(spend, 24) }], (v) => rough(v, 4));
  }

  // inferenceUsage sums the caller's metered gateway requests per model,
  // and says what the renter's conversations hold against the server's
  // bounds.
  async function inferenceUsage() {
    const [p, conv] = await Promise.all([probe(['/v1/inference/usage?limit=1000']), probe(['/v1/inference/conversations'])]);
    if (p.missing) return unavailable('Inference usage (p95 latency, time to first token, $/token)');
    const byModel = {};
    for (const u of p.data.data || []) {
      const m = byModel[u.model] || (byModel[u.model] = { model: u.model, n: 0, lat: [], ttft: [], tps: [], tokens: 0, charge: 0 });
      m.n++; m.lat.push(u.latency_micros);
      if (u.stream) m.ttft.push(u.ttft_micros); // a whole answer's first byte comes with its last
      // Completion tokens a second, as the gateway measures them: after the
      // first byte of a stream, over the whole of any other answer.
      const took = u.stream ? u.latency_micros - u.ttft_micros : u.latency_micros;
      if (u.output_tokens > 0 && took > 0) m.tps.push(u.output_tokens * 1e6 / took);
      m.tokens += u.input_tokens + u.output_tokens; m.charge += u.charge_micros;
    }
    const rows = Object.values(byModel);
    const over = (p.data.data || []).length >= 1000 ? '<p class="hint">Over your newest 1,000 requests; ' +
      '<code>idlegrid inference usage</code> lists the rest, and Spend has this month\'s totals.</p>' : '';
    const ms = (us) => (Math.round(us / 100) / 10) + ' ms';
    const both = (xs) => ms(quantile(xs, 0.50)) + ' / ' + ms(quantile(xs, 0.95));
    return table([
      { h: 'Model', f: (m) => esc(m.model) }, { h: 'Requests', num: true, f: (m) => esc(m.n) },
      { h: 'Latency p50 / p95', num: true, f: (m) => both(m.lat) }, { h: 'Time to first token p50 / p95', num: true, f: (m) => m.ttft.length ? both(m.ttft) : '—' },
      { h: 'Tokens/s p50', num: true, f: (m) => m.tps.length ? esc(Math.round(quantile(m.tps, 0.50) * 10) / 10) : '—' },
      { h: 'Tokens', num: true, f: (m) => esc(m.tokens.toLocaleString('en-US')) },
      { h: '$ per 1M tokens', num: true, f: (m) => m.tokens ? rough(Math.floor(m.charge * 1e6 / m.tokens), 4) : '—' },
      { h: 'Spent', num: true, f: (m) => money(m.charge) },
    ], rows, 'No inference requests yet. Send OpenAI-compatible requests to this server with your key.') + over + conversationsHeld(conv);
  }

  // conversationsHeld is a line saying what the renter's conversations
  // hold (GET /v1/inference/conversations), of the most they may; none
  // from a server without it.
  function conversationsHeld(conv) {
    if (conv.missing) return '';
    const u = conv.data;
    const of = (n, what, max) => esc(n.toLocaleString('en-US')) + ' ' + what + (max == null ? '' : ' of ' + esc(max.toLocaleString('en-US')));
    return '<p class="hint">Your conversations hold ' + of(u.items, 'items', u.max_items) + ' and ' +
      of(u.chars, 'characters', u.max_chars) + '; past either, adding to them is refused until you delete some.</p>';
  }

  // quantile is the nearest-rank percentile q (0.5, 0.95), as the gateway computes it.
  function quantile(xs, q) {
    if (!xs.length) return 0;
    const s = [...xs].sort((a, b) => a - b);
    return s[Math.min(Math.max(Math.round(q * s.length) - 1, 0), s.length - 1)];
  }

  async function keysAndBudgets() {
    const [keys, limits] = await Promise.all([shared('/v1/keys'), get('/v1/spend-limits')]);
    const byKey = {};
    let account = null;
    for (const l of limits.limits) { if (l.key_id) byKey[l.key_id] = l; else account = l; }
    const active = keys.api_keys.filter((k) => !k.revoked_at);
    fillKeys('#b-key', active);
    return kpis([
      ['This month', esc(limits.month)], ['Used', money((limits.spend.charged_micros || 0) + (limits.spend.held_micros || 0))],
      ['Account budget', account ? money(account.limit_micros) : 'none'],
    ]) + table([
      { h: 'Key', f: (k) => esc(k.name) + ' ' + id(k.prefix + '…') },
      { h: 'Access', f: (k) => esc(k.access || 'all') },
      { h: 'Created', f: (k) => when(k.created_at) },
      { h: 'Budget', num: true, f: (k) => byKey[k.id] ? money(byKey[k.id].limit_micros) : 'none' },
      { h: 'Used', num: true, f: (k) => byKey[k.id] ? money(byKey[k.id].spend.charged_micros + byKey[k.id].spend.held_micros) : '—' },
      { h: 'State', f: (k) => k.revoked_at ? 'revoked' : 'active' },
    ], keys.api_keys);
  }

  // keyRoutingPanel lists each active key's default routing for the
  // inference gateway (docs/gateway.md, "Routing"), which a request's own
  // provider object overrides field by field. A key without one, like a
  // server without the endpoint, answers 404 and has the defaults.
  async function keyRoutingPanel() {
    const active = (await shared('/v1/keys')).api_keys.filter((k) => !k.revoked_at);
    const out = {};
    await Promise.all(active.map(async (k) => {
      try { out[k.id] = await get('/v1/keys/' + encodeURIComponent(k.id) + '/routing'); } catch (e) {
        if (!(e instanceof APIError) || e.status !== 404) throw e;
      }
    }));
    st.routings = out;
    if (fillKeys('#rt-key', active)) showRouting();
    return table([
      { h: 'Key', f: (k) => esc(k.name) + ' ' + id(k.prefix + '…') },
      { h: 'Routing', f: (k) => esc(routingSummary(out[k.id] && out[k.id].routing)) },
      { h: 'Updated', f: (k) => out[k.id] && out[k.id].updated_at ? when(out[k.id].updated_at) : '—' },
    ], active, 'No active keys.');
  }

  // routingSummary says in a line what a key's routing defaults do; set
  // them here, with "idlegrid key routing" or PUT /v1/keys/{id}/routing.
  function routingSummary(r) {
    if (!r || !Object.keys(r).length) return 'defaults';
    const list = (xs) => (xs || []).join(', ');
    const parts = [];
    if (r.sort) parts.push('sort by ' + r.sort);
    if (list(r.order)) parts.push('first ' + list(r.order));
    if (list(r.only)) parts.push('only ' + list(r.only));
    if (list(r.ignore)) parts.push('never ' + list(r.ignore));
    if (list(r.region)) parts.push('region ' + list(r.region));
    if (list(r.data_residency)) parts.push('residency ' + list(r.data_residency));
    if (r.max_price && (r.max_price.prompt || r.max_price.completion)) {
      parts.push('max $' + (r.max_price.prompt || '—') + ' in / $' + (r.max_price.completion || '—') + ' out per 1M tokens');
    }
    if (r.allow_fallbacks === false) parts.push('no failover');
    if (r.sticky === false) parts.push('no sticky routing');
    return parts.length ? parts.join(' · ') : 'defaults';
  }

  function budgetForm() {
    return `<form id="budget-form" class="stack" novalidate>
      <div><label for="b-key">Key</label><select id="b-key"></select></div>
      <div><label for="b-amount">Monthly budget, $</label><input id="b-amount" type="text" inputmode="decimal" placeholder="100.00"></div>
      <p id="budget-error" class="error full" role="alert"></p>
      <div class="row full"><button type="submit">Set budget</button>
        <button type="button" class="quiet" id="b-remove">Remove budget</button></div></form>`;
  }

  // fillKeys offers the active keys in the select sel, redrawn only when
  // they change (one revoked and another made is a change, though they
  // number the same), keeping the key chosen; true when it redrew them.
  function fillKeys(sel, keys) {
    const el = $(sel), html = keys.map((k) => `<option value="${esc(k.id)}">${esc(k.name)} (${esc(k.prefix)}…)</option>`).join('');
    if (!el || el.dataset.html === html) return false;
    const chosen = el.value;
    el.innerHTML = el.dataset.html = html;
    if (keys.some((k) => k.id === chosen)) el.value = chosen;
    return true;
  }

  function bindBudget() {
    const out = $('#budget-error');
    $('#budget-form').addEventListener('submit', async (ev) => {
      ev.preventDefault(); out.textContent = '';
      const amount = parseMoney($('#b-amount').value);
      if (amount === null) { out.textContent = 'Budget: write dollars, e.g. 100.00'; return; }
      try {
        await api('PUT', '/v1/keys/' + encodeURIComponent($('#b-key').value) + '/spend-limit', { limit_micros: amount });
        toast('Budget set'); refresh();
      } catch (e) { out.textContent = e.message; }
    });
    $('#b-remove').addEventListener('click', async () => {
      out.textContent = '';
      try { await api('DELETE', '/v1/keys/' + encodeURIComponent($('#b-key').value) + '/spend-limit'); toast('Budget removed'); refresh(); } catch (e) { out.textContent = e.message; }
    });
  }

  // The routing form's inputs, by the field of the routing object each
  // sets: a list is written comma-separated, a price in dollars per
  // million tokens.
  const ROUTING_LISTS = { region: 'rt-region', data_residency: 'rt-residency', only: 'rt-only', ignore: 'rt-ignore', order: 'rt-order' };

  function routingForm() {
    const text = (key, label, hint, placeholder) => `<div><label for="${key}">${label}</label>
      <input id="${key}" type="text" spellcheck="false" placeholder="${placeholder}" title="${hint}"></div>`;
    return `<form id="routing-form" class="stack" novalidate autocomplete="off">
      <div><label for="rt-key">Key</label><select id="rt-key"></select></div>
      <div><label for="rt-sort">Sort providers by</label><select id="rt-sort">
        <option value="">price, load and reliability (default)</option><option value="price">price</option>
        <option value="latency">latency</option><option value="throughput">throughput</option></select></div>
      ${text('rt-region', 'Regions (optional)', 'Only providers in these regions, comma-separated: eu-west, us-east', 'any')}
      ${text('rt-residency', 'Data residency (optional)', 'Only providers whose data stays in these jurisdictions, comma-separated: EU, US', 'any')}
      ${text('rt-only', 'Only these providers (optional)', 'Node IDs or names, comma-separated', 'any')}
      ${text('rt-ignore', 'Never these providers (optional)', 'Node IDs or names, comma-separated', 'none')}
      ${text('rt-order', 'Try these first (optional)', 'Node IDs or names, comma-separated, in order', 'none')}
      <div><label for="rt-in">Max $ per 1M input tokens (optional)</label>
        <input id="rt-in" type="text" inputmode="decimal" placeholder="no cap"></div>
      <div><label for="rt-out">Max $ per 1M output tokens (optional)</label>
        <input id="rt-out" type="text" inputmode="decimal" placeholder="no cap"></div>
      <label class="check"><input id="rt-fallbacks" type="checkbox" checked> Fail over to another provider</label>
      <label class="check"><input id="rt-sticky" type="checkbox" checked> Route by prompt prefix (KV-cache reuse)</label>
      <p id="routing-error" class="error full" role="alert"></p>
      <div class="row full"><button type="submit">Save routing</button>
        <button type="button" class="quiet" id="rt-remove">Remove routing</button></div></form>`;
  }

  // showRouting fills the form with the chosen key's routing, so that a
  // change starts from what the key has.
  function showRouting() {
    const kr = st.routings[$('#rt-key').value], r = (kr && kr.routing) || {};
    $('#rt-sort').value = r.sort || '';
    for (const [field, key] of Object.entries(ROUTING_LISTS)) $('#' + key).value = (r[field] || []).join(', ');
    $('#rt-in').value = (r.max_price && r.max_price.prompt) || '';
    $('#rt-out').value = (r.max_price && r.max_price.completion) || '';
    $('#rt-fallbacks').checked = r.allow_fallbacks !== false;
    $('#rt-sticky').checked = r.sticky !== false;
  }

  // routingOf is the routing object the form says: only what it sets.
  function routingOf() {
    const r = {}, list = (v) => v.split(',').map((x) => x.trim()).filter(Boolean);
    if ($('#rt-sort').value) r.sort = $('#rt-sort').value;
    for (const [field, key] of Object.entries(ROUTING_LISTS)) {
      const xs = list($('#' + key).value);
      if (xs.length) r[field] = xs;
    }
    const price = (key) => $(key).value.trim().replace(/^\$\s*/, '');
    if (price('#rt-in') || price('#rt-out')) {
      r.max_price = {};
      if (price('#rt-in')) r.max_price.prompt = price('#rt-in');
      if (price('#rt-out')) r.max_price.completion = price('#rt-out');
    }
    if (!$('#rt-fallbacks').checked) r.allow_fallbacks = false;
    if (!$('#rt-sticky').checked) r.sticky = false;
    return r;
  }

  // routingInput maps an error's field (routing.region[1], say) to the
  // form input it names.
  function routingInput(field) {
    const f = field.replace(/^routing\./, '').replace(/\[\d+\]$/, '');
    const key = ROUTING_LISTS[f] || { sort: 'rt-sort', 'max_price.prompt': 'rt-in', 'max_price.completion': 'rt-out', max_price: 'rt-in' }[f];
    return key ? document.getElementById(key) : null;
  }

  function bindRouting() {
    const out = $('#routing-error'), form = $('#routing-form');
    const path = () => '/v1/keys/' + encodeURIComponent($('#rt-key').value) + '/routing';
    const clear = () => { out.textContent = ''; for (const el of form.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid'); };
    $('#rt-key').addEventListener('change', () => { clear(); showRouting(); });
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault(); clear();
      try {
        await api('PUT', path(), routingOf());
        toast('Routing saved: requests with this key go by it unless they say otherwise'); refresh();
      } catch (e) {
        out.textContent = problemLines(e);
        const bad = (e.problems || []).map((p) => routingInput(p.field)).filter(Boolean);
        for (const el of bad) el.setAttribute('aria-invalid', 'true');
        if (bad.length) bad[0].focus();
      }
    });
    $('#rt-remove').addEventListener('click', async () => {
      clear();
      try { await api('DELETE', path()); toast('Routing removed: the key routes by the defaults'); refresh(); } catch (e) { out.textContent = e.message; }
    });
  }

  // registryLogins lists the renter's logins to private registries, which
  // its jobs' images are pulled with (docs/api.md, "Private images"); the
  // server never answers their passwords.
  async function registryLogins() {
    const logins = remember((await get('/v1/registry-logins')).logins, (l) => l.registry);
    return table([
      { h: 'Registry', f: (l) => esc(l.registry) }, { h: 'Username', f: (l) => esc(l.username) },
      { h: 'Since', f: (l) => when(l.created_at) }, { h: 'Updated', f: (l) => when(l.updated_at) },
      { h: '', f: (l) => actionButton('logout', l.registry, 'Remove', 'the login to ' + l.registry, true) },
    ], logins, 'No registry logins: your jobs pull their images without one.');
  }

  function registryForm() {
    return `<form id="registry-form" class="stack" novalidate autocomplete="off">
      <div><label for="r-registry">Registry</label>
        <input id="r-registry" type="text" placeholder="ghcr.io" spellcheck="false" required
          title="The host your images name: ghcr.io, nvcr.io, registry.example.com:5000; docker.io for Docker Hub."></div>
      <div><label for="r-user">Username</label><input id="r-user" type="text" spellcheck="false" required></div>
      <div class="full"><label for="r-password">Password or token (a read-only pull token)</label>
        <input id="r-password" type="password" autocomplete="new-password" required></div>
      <p id="registry-error" class="error full" role="alert"></p>
      <div class="full"><button type="submit">Save login</button></div></form>`;
  }

  function bindRegistry() {
    $('#registry-form').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const out = $('#registry-error'); out.textContent = '';
      const inputs = { registry: $('#r-registry'), username: $('#r-user'), password: $('#r-password') };
      for (const el of Object.values(inputs)) el.removeAttribute('aria-invalid');
      const reg = inputs.registry.value.trim().replace(/^https?:\/\//, '').replace(/\/$/, '');
      if (!reg) { // the path needs one: the server would be asked about "-"
        out.textContent = 'Registry: write the host your images name, e.g. ghcr.io (docker.io for Docker Hub).';
        inputs.registry.setAttribute('aria-invalid', 'true'); inputs.registry.focus();
        return;
      }
      try {
        const l = await api('PUT', '/v1/registry-logins/' + enc(reg),
          { username: inputs.username.value.trim(), password: inputs.password.value });
        inputs.password.value = '';
        toast('Login to ' + l.registry + ' saved: your jobs pull its images as ' + l.username); refresh();
      } catch (e) {
        out.textContent = problemLines(e);
        const bad = (e.problems || []).map((p) => inputs[p.field]).filter(Boolean);
        for (const el of bad) el.setAttribute('aria-invalid', 'true');
        if (bad.length) bad[0].focus();
      }
    });
  }

  // -- provider --

  // servedModels is how the gateway routes to the models nodes serve (a
  // provider's own; every node's for an operator): load, speed, success,
  // its circuit breaker and the endpoints it is skipped for
  // (GET /v1/inference/stats; docs/gateway.md, "Statistics").
  async function servedModels() {
    const p = await probe(['/v1/inference/stats']);
    if (p.missing) return unavailable('The inference gateway');
    let rows = p.data.providers || [];
    if (st.me.role !== 'admin') {
      const mine = new Set((await shared('/v1/nodes')).nodes.map((n) => n.id));
      rows = rows.filter((r) => mine.has(r.node_id));
    }
    const trips = {};
    for (const b of p.data.breakers || []) trips[b.node_id + '/' + b.model] = b.trips;
    return table([
      { h: 'Node', f: (r) => esc(r.node_name) + '<br>' + id(r.node_id) },
      { h: 'Model', f: (r) => esc(r.model) },
      { h: 'In flight', num: true, f: (r) => `${esc(r.in_flight)} of ${esc(r.max_concurrency)}` +
        (r.queued != null ? `<br><span class="hint">${esc(r.queued)} queued at its server</span>` : '') },
      { h: 'Success', num: true, f: (r) => pct(r.success_rate) },
      { h: 'First token', num: true, f: (r) => r.ttft_ms ? esc(Math.round(r.ttft_ms)) + ' ms' : '—' },
      { h: 'Tokens/s', num: true, f: (r) => r.tokens_per_second ? esc(Math.round(r.tokens_per_second)) : '—' },
      { h: 'Circuit breaker', f: (r) => {
        const n = trips[r.node_id + '/' + r.model];
        return breakerTag(r.breaker) + (n ? `<br><span class="hint">tripped ${esc(n)} time${n === 1 ? '' : 's'}</span>` : '');
      } },
      { h: 'Skipped for', f: (r) => skips(r) },
    ], rows, st.me.role === 'admin' ? 'No node serves a model through the gateway now.'
      : 'No node of yours serves a model through the gateway now. List the models in agent.yaml (models:) and restart the agent; docs/gateway.md says how.') +
      '<p class="hint">As routing sees them since the server started. A circuit breaker cuts a node off after failures in a row, ' +
      'then lets one trial request through after its cooldown; a 429 (at max_concurrency) is no failure.</p>';
  }

  // skips says which endpoints routing skips at a node, until when: its
  // model server answered one of their requests 404, as a chat-only one
  // does text completions, and one from before the Responses API does
  // responses.
  function skips(r) {
    const out = [];
    if (r.text_completions_skipped_until) out.push(`text completions until ${when(r.text_completions_skipped_until)}`);
    if (r.responses_skipped_until) out.push(`responses until ${when(r.responses_skipped_until)}`);
    return out.length ? out.join('<br>') + '<br><span class="hint">its model server answered one 404: it does not serve them</span>' : '—';
  }

  // breakerTag names a circuit breaker's state as a provider reads it.
  const breakerTag = (s) => `<span class="state breaker-${esc(s)}">${esc({ closed: 'taking requests', open: 'cut off', 'half-open': 'on trial' }[s] || s)}</span>`;

  async function providerNodes() {
    const gen = st.gen; // what it found is this user's: another's sign-in must not see it
    const [nodes, leases] = await Promise.all([shared('/v1/nodes'), get('/v1/leases?state=assigned,running&limit=500')]);
    const live = leases.leases;
    // Telemetry: the latest signed usage receipt of each running lease.
    const util = {};
    const running = live.filter((l) => l.state === 'running');
    await Promise.all(running.slice(0, 20).map(async (l) => {
      try {
        const r = await get('/v1/leases/' + encodeURIComponent(l.id) + '/receipts');
        const last = (r.receipts || [])[r.receipts.length - 1];
        if (last) util[l.id] = last;
      } catch (_) { /* a lease that just ended */ }
    }));
    const total = nodes.nodes.reduce((a, n) => a + (n.state === 'online' ? n.gpus.length : 0), 0);
    const busy = live.reduce((a, l) => a + l.gpu_uuids.length, 0);
    if (st.gen === gen) { // the samples and the windows' node list live beyond this body
      if (total) st.samples.push([Date.now(), busy / total]);
      st.samples = st.samples.slice(-300);
      fillWindowNodes(nodes.nodes);
    }
    const rows = remember(nodes.nodes.map((n) => {
      const ls = live.filter((l) => l.node_id === n.id);
      return Object.assign({}, n, { __leases: ls });
    }));
    return kpis([['Nodes', esc(nodes.nodes.length)], ['GPUs online', esc(total)], ['GPUs busy', esc(busy)]]) + table([
      { h: 'Node', f: (n) => esc(n.name) + '<br>' + id(n.id) },
      { h: 'State', f: (n) => stateTag(n.state) + (n.draining_since ? ' ' + stateTag('draining') : '') +
        `<br><span class="hint">heartbeat ${ago(n.last_heartbeat)}</span>` },
      { h: 'GPUs', f: (n) => esc(gpuSummary(n.gpus)) },
      { h: 'Region', f: (n) => esc(n.region) + ' / ' + esc(n.residency) },
      { h: 'Window', f: (n) => esc(scheduleText(n.schedule)) },
      { h: 'Running now', f: (n) => n.__leases.length ? n.__leases.map((l) => {
        const r = util[l.id];
        return `${id(l.id)} ${leaseStateTag(l)} ${pct(l.progress)} · ${price(l.price_micros_per_gpu_hour)}` +
          (r ? ` · GPU ${esc(r.avg_util_pct)}% · ${esc(r.energy_wh)} Wh` : '');
      }).join('<br>') : '<span class="muted">idle</span>' },
      { h: 'Maintenance', f: (n) => n.draining_since
        ? actionButton('undrain', n.id, 'Undrain', 'node ' + n.name)
        : actionButton('drain', n.id, 'Drain', 'node ' + n.name) },
    ], rows, 'No nodes yet. Create a join token (idlegrid token create) and start an agent with it.') +
      (running.length > 20 ? `<p class="hint">GPU use and energy shown for 20 of ${esc(running.length)} running leases; ` +
        '<code>idlegrid lease receipts ID</code> shows any lease\'s.</p>' : '');
  }

  function gpuSummary(gpus) {
    const c = {};
    for (const g of gpus) c[g.model] = (c[g.model] || 0) + 1;
    return Object.keys(c).map((m) => c[m] + '× ' + m).join(', ');
  }

  function scheduleText(s) {
    if (!s || s.mode === 'always') return 'always';
    const tz = s.time_zone || 'UTC';
    const w = (s.weekly || []).map((x) => x.days.join(',') + ' ' + x.start + '–' + x.end).join('; ');
    const o = (s.one_off || []).length ? ' +' + s.one_off.length + ' one-off' : '';
    return (w || 'windows') + ' ' + tz + o;
  }

  // The window editor. Its form is drawn once and filled when a node is
  // chosen, so that the refresh never discards an edit in progress.
  const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];

  function windowForm() {
    return `<form id="window-form" novalidate>
      <div class="stack">
        <div><label for="w-node">Node</label><select id="w-node"></select></div>
        <div><label for="w-mode">Offered</label><select id="w-mode">
          <option value="always">always</option><option value="windows">only in the windows below</option></select></div>
        <div><label for="w-tz">Time zone</label><input id="w-tz" type="text" value="UTC" spellcheck="false"></div>
      </div>
      <h3 id="w-h">Weekly windows</h3>
      <div id="w-list" class="windows" aria-labelledby="w-h"></div>
      <p class="row"><button type="button" class="quiet small" id="w-add">Add a window</button></p>
      <p id="window-error" class="error" role="alert"></p>
      <p class="row"><button type="submit">Save windows</button>
        <button type="button" class="quiet" id="w-reset">Use the agent's schedule</button></p>
    </form>`;
  }

  function windowRow(w, i) {
    return `<fieldset class="window" data-window>
      <legend>Window ${i + 1}</legend>
      <div class="days" role="group" aria-label="Days of window ${i + 1}">${DAYS.map((d) => `<label><input type="checkbox"
        name="day" value="${d}"${w.days.includes(d) ? ' checked' : ''}> ${d}</label>`).join('')}</div>
      <div><label for="w-start-${i}">From</label><input id="w-start-${i}" name="start" type="time" value="${esc(w.start)}"></div>
      <div><label for="w-end-${i}">To</label><input id="w-end-${i}" name="end" type="time" value="${esc(w.end)}"></div>
      <button type="button" class="quiet small" data-action="w-remove" aria-label="Remove window ${i + 1}">Remove</button>
    </fieldset>`;
  }

  function drawWindows(weekly) {
    $('#w-list').innerHTML = weekly.map(windowRow).join('') ||
      '<p class="muted">No weekly windows. Add one, or offer the node always.</p>';
  }

  function readWindows() {
    return [...document.querySelectorAll('[data-window]')].map((f) => ({
      days: [...f.querySelectorAll('input[name=day]:checked')].map((c) => c.value),
      start: f.querySelector('input[name=start]').value, end: f.querySelector('input[name=end]').value,
    }));
  }

  // fillWindowNodes offers the provider's nodes in the window editor,
  // redrawn only when they change, so that an edit in progress survives
  // the refresh; a node chosen that is gone gives way to the first.
  function fillWindowNodes(nodes) {
    if (!nodes.some((n) => n.id === st.node)) st.node = nodes.length ? nodes[0].id : ''; // the panel shows its windows, editor or not
    const sel = $('#w-node'), html = nodes.map((n) => `<option value="${esc(n.id)}">${esc(n.name)}</option>`).join('');
    if (!sel || sel.dataset.html === html) return;
    const chosen = sel.value;
    sel.innerHTML = sel.dataset.html = html;
    sel.value = st.node;
    if (st.node !== chosen) loadWindows();
  }

  async function loadWindows() {
    if (!st.node) return;
    const gen = st.gen; // the form is filled for the user who asked, or not at all
    $('#window-error').textContent = ''; // said of the node shown before
    try {
      const ns = await get('/v1/nodes/' + encodeURIComponent(st.node) + '/schedule');
      if (st.gen !== gen) return;
      const s = ns.owner || ns.schedule;
      $('#w-mode').value = s.mode;
      $('#w-tz').value = s.time_zone || 'UTC';
      drawWindows(s.weekly || []);
    } catch (e) { if (st.gen === gen) $('#window-error').textContent = e.message; }
  }

  function bindWindows() {
    $('#w-node').addEventListener('change', (ev) => { st.node = ev.target.value; loadWindows(); refresh(); });
    $('#w-add').addEventListener('click', () => {
      const ws = readWindows();
      ws.push({ days: ['sat', 'sun'], start: '00:00', end: '00:00' });
      drawWindows(ws);
      $('#w-mode').value = 'windows';
      const boxes = document.querySelectorAll('[data-window]');
      boxes[boxes.length - 1].querySelector('input').focus();
    });
    $('#w-list').addEventListener('click', (ev) => {
      const b = ev.target.closest('[data-action=w-remove]');
      if (!b) return;
      b.closest('[data-window]').remove();
      drawWindows(readWindows());
    });
    $('#window-form').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const out = $('#window-error'); out.textContent = '';
      const schedule = { mode: $('#w-mode').value, time_zone: $('#w-tz').value.trim() };
      if (schedule.mode === 'windows') schedule.weekly = readWindows();
      try {
        await api('PUT', '/v1/nodes/' + encodeURIComponent(st.node) + '/schedule', { schedule });
        toast('Windows saved: ' + scheduleText(schedule)); refresh();
      } catch (e) { out.textContent = problemLines(e); }
    });
    $('#w-reset').addEventListener('click', async () => {
      const out = $('#window-error'); out.textContent = '';
      try {
        await api('DELETE', '/v1/nodes/' + encodeURIComponent(st.node) + '/schedule');
        toast("The agent's schedule applies again"); await loadWindows(); refresh();
      } catch (e) { out.textContent = e.message; }
    });
  }

  async function windowStatus() {
    if (!st.node) return '<p class="muted">No node to edit yet.</p>';
    const p = await probe(['/v1/nodes/' + encodeURIComponent(st.node) + '/schedule']);
    if (p.missing) return unavailable('Editing windows');
    const ns = p.data;
    return `<p>In force: <strong id="w-inforce">${esc(scheduleText(ns.schedule))}</strong>
      (${ns.owner ? 'set by you ' + when(ns.updated_at) : "from the agent's config"}).
      The agent publishes: ${esc(scheduleText(ns.published))}.</p>
      <p class="hint">Windows you save here replace the agent's config until you switch back; an agent that withdraws its
      GPUs (its owner is using the machine) still closes the node.</p>`;
  }

  async function providerAsks() {
    const [nodes, market] = await Promise.all([shared('/v1/nodes'), marketStats()]);
    const rows = [];
    for (const n of nodes.nodes) {
      const models = [...new Set(n.gpus.map((g) => g.model))];
      for (const m of models) {
        const s = market.find((x) => x.gpu_model === m && x.region === n.region) || {};
        for (const tier of ['gold', 'silver', 'bronze']) {
          const ask = (n.ask.floor_micros_per_gpu_hour || {})[tier];
          const sug = (s.suggested_ask_micros_per_gpu_hour || {})[tier];
          if (!ask && !sug) continue;
          rows.push({ node: n.name, model: m, tier, ask, sug });
        }
      }
    }
    return table([
      { h: 'Node', f: (r) => esc(r.node) }, { h: 'GPU', f: (r) => esc(r.model) }, { h: 'Tier', f: (r) => esc(r.tier) },
      { h: 'Your ask', num: true, f: (r) => r.ask ? price(r.ask) : 'not sold' },
      { h: 'Suggested', num: true, f: (r) => r.sug ? price(r.sug) : '—' },
      { h: '', f: (r) => !r.ask || !r.sug ? '' : r.ask > r.sug * 1.1 ? 'above the market: may sit idle'
        : r.ask < r.sug * 0.9 ? 'below the market: could ask more' : 'in line' },
    ], rows, 'No asks yet.') + '<p class="hint">Suggested: the median recent clearing price for the GPU in the region, ' +
      'raised when demand exceeds free GPUs, lowered when less than half is filled. Asks come from the agent\'s config.</p>';
  }

  // fillChart draws the provider's fill rate per UTC day from the server's
  // history (GET /v1/providers/{id}/fill); on a server without it, the
  // page's own samples since it opened.
  async function fillChart() {
    const p = await probe(['/v1/providers/' + encodeURIComponent(st.me.id) + '/fill?days=14']);
    if (p.missing) return lineChart('Share of your online GPUs in use, since this page opened', [{ name: 'fill rate', points: st.samples }], pct);
    const points = p.data.days.map((d) => [Date.parse(d.start), d.fill]);
    return lineChart('Fill rate per UTC day, last 14 days', [{ name: 'fill rate', points }], pct) +
      '<p class="hint" id="fill-source">Fill rate: GPU-hours leased ÷ GPU-hours your nodes\' windows offered, per UTC day ' +
      '(today so far). Past days apply each node\'s current windows.</p>';
  }

  // earnedAllTime sums the earnings (net of fees, leases and inference) of
  // the provider's monthly statements, less what upheld disputes refunded
  // of them to renters (each statement's net_micros), from the month its
  // account was made to this one. The balance cannot say it: a bond staked from payable
  // earnings leaves pending + payable + in flight + paid out, and one
  // released comes back into them. A month that ended over a day ago (by
  // this browser's clock, which may be off a little) no longer changes,
  // so each is asked once (st.earned); the others at every refresh.
  async function earnedAllTime() {
    const now = month(), kept = st.earned; // a sign-out leaves this map behind
    const ended = new Date(Date.now() - 86400e3).toISOString().slice(0, 7); // months before it are over
    const made = Date.parse(st.me.created_at);
    const months = [];
    for (let m = Number.isNaN(made) ? now : new Date(made).toISOString().slice(0, 7); m <= now; m = nextMonth(m)) months.push(m);
    const sums = await Promise.all(months.map(async (m) => {
      if (m in kept) return kept[m];
      const sm = await get('/v1/statements?month=' + m);
      const v = sm.net_micros || 0;
      if (m < ended) kept[m] = v;
      return v;
    }));
    return sums.reduce((a, v) => a + v, 0);
  }

  // nextMonth is the month after m ("2026-12" → "2027-01").
  function nextMonth(m) {
    const d = new Date(m + '-01T00:00:00Z');
    d.setUTCMonth(d.getUTCMonth() + 1);
    return d.toISOString().slice(0, 7);
  }

  async function providerEarnings() {
    const [bal, tx, fill, total] = await Promise.all([shared('/v1/balance'), transfersSince(Date.now() - 24 * 3600e3), fillChart(),
      earnedAllTime()]);
    const earned = charged(tx, /^provider:.*:pending$/);
    return kpis([
      ['Earned, all time', money(total)], ['Pending', money(bal.pending_micros)], ['Payable', money(bal.payable_micros)],
      ['Paid out', money(bal.paid_out_micros)],
    ]) + lineChart('Earnings per hour, last 24 hours', [{ name: 'earnings', points: hourly(earned, 24) }], (v) => rough(v, 4)) + fill;
  }

  // reputations asks the server for each node's reputation (docs/trust.md);
  // it answers null where the server has none.
  // Only the first 20 nodes are asked, to keep a refresh light; the
  // panels say so (reputationNote). Reliability and Badges share them,
  // asked once a refresh.
  function reputations(nodes) {
    const first = nodes.slice(0, 20);
    return once('reputations ' + first.map((n) => n.id).join(','), async () => {
      const out = {};
      let missing = false;
      await Promise.all(first.map(async (n) => {
        const p = await probe(['/v1/nodes/' + encodeURIComponent(n.id) + '/reputation']);
        if (p.missing) missing = true; else out[n.id] = p.data;
      }));
      return missing ? null : out;
    });
  }

  const reputationNote = (nodes) => nodes.length <= 20 ? '' : `<p class="hint">Reputations shown for 20 of ${esc(nodes.length)} ` +
    'nodes; <code>idlegrid node reputation ID</code> shows any node\'s.</p>';

  async function providerReliability() {
    const nodes = (await shared('/v1/nodes')).nodes;
    const reps = await reputations(nodes);
    const advice = (n) => {
      const r = reps && reps[n.id];
      if (!r || !r.detail) return esc(raise(n));
      const tips = (r.detail.level_reasons || []).concat((r.detail.advice || []).slice(0, 2).map((a) => a.text));
      return '<ul>' + tips.map((t) => `<li>${esc(t)}</li>`).join('') + '</ul>';
    };
    return table([
      { h: 'Node', f: (n) => esc(n.name) },
      { h: 'Score', num: true, f: (n) => pct(reps && reps[n.id] ? reps[n.id].score : n.reliability) },
      { h: 'Level', f: (n) => reps && reps[n.id] ? esc(reps[n.id].level_name) : '—' },
      { h: 'Completed', num: true, f: (n) => esc(n.leases_completed) }, { h: 'Failed (yours)', num: true, f: (n) => esc(n.leases_failed) },
      { h: 'What would raise it', f: advice },
    ], nodes, 'No nodes yet.') + (reps ? reputationNote(nodes) : unavailable('The reputation score (levels and what decides them)'));
  }

  // raise says how many clean completions lift a node's reliability to the
  // next whole percent step, from ReliabilityOf's formula
  // (completed + 9) / (completed + failed + 10).
  function raise(n) {
    const c = n.leases_completed, f = n.leases_failed, r = (c + 9) / (c + f + 10);
    if (r >= 0.99) return 'At the top: keep completing leases and stay online through your windows.';
    const target = Math.min(0.99, Math.floor(r * 100 + 1) / 100);
    const more = Math.max(1, Math.ceil((target * (c + f + 10) - (c + 9)) / (1 - target)));
    return `${more} more completed lease${more === 1 ? '' : 's'} without a failure you cause would lift it to ${pct(target)}. ` +
      'Failures you cause (a node lost mid-lease, an image that will not start) lower it.';
  }

  // providerBadges shows the badges of the provider's and its nodes'
  // reputations.
  async function providerBadges() {
    const p = await probe(['/v1/providers/' + encodeURIComponent(st.me.id) + '/reputation']);
    if (p.missing) return unavailable('Badges');
    const nodes = (await shared('/v1/nodes')).nodes;
    const reps = (await reputations(nodes)) || {};
    const list = (bs) => (bs || []).length ? (bs || []).map((b) => `<span class="badge">${esc(b)}</span>`).join(' ') : '<span class="muted">none yet</span>';
    return `<p>You: ${list(p.data.badges)}</p>` + table([
      { h: 'Node', f: (n) => esc(n.name) }, { h: 'Badges', f: (n) => list(reps[n.id] && reps[n.id].badges) },
    ], nodes, 'No nodes yet.') + reputationNote(nodes);
  }

  async function providerPayouts() {
    const [bal, payouts] = await Promise.all([shared('/v1/balance'), get('/v1/payouts?limit=50')]);
    const ps = payouts.payouts;
    const rest = more(ps, 50, 'idlegrid payout ls --before ' + (ps.length ? ps[ps.length - 1].id : ''));
    return kpis([['Payable now', money(bal.payable_micros)], ['In flight', money(bal.payout_in_flight_micros)]]) + table([
      { h: 'Payout', f: (p) => id(p.id) }, { h: 'Amount', num: true, f: (p) => money(p.amount_micros) },
      { h: 'State', f: (p) => stateTag(p.state) }, { h: 'Requested', f: (p) => when(p.created_at) },
      { h: 'Note', f: (p) => esc(p.reason || '') },
    ], payouts.payouts, 'No payouts yet.') + rest;
  }

  function payoutForm() {
    return `<form id="payout-form" class="stack" novalidate>
      <div><label for="p-amount">Amount, $</label><input id="p-amount" type="text" inputmode="decimal" placeholder="50.00"></div>
      <div><button type="submit">Request payout</button></div>
      <p id="payout-error" class="error full" role="alert"></p></form>`;
  }

  // bindPayout sends the payout form once per request: the button waits
  // for the answer, and a retry of the same amount after a failure (no
  // answer, or the server's 5xx) carries the same Idempotency-Key, so that
  // one the server did take is not paid twice; after a refusal (4xx) a
  // retry is a new request.
  function bindPayout() {
    let intent = null; // {amount, key} of the request not yet answered with success
    $('#payout-form').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const out = $('#payout-error'); out.textContent = '';
      const amount = parseMoney($('#p-amount').value);
      if (amount === null) { out.textContent = 'Amount: write dollars, e.g. 50.00'; return; }
      if (!intent || intent.amount !== amount) intent = { amount, key: 'web-' + crypto.randomUUID() };
      const button = ev.target.querySelector('button[type=submit]');
      button.disabled = true;
      try {
        await api('POST', '/v1/payouts', { amount_micros: amount }, { 'Idempotency-Key': intent.key });
        intent = null;
        $('#p-amount').value = ''; // a second press asks for a second payout: not by accident
        toast('Payout requested'); refresh();
      } catch (e) {
        out.textContent = e.message;
        // Refused: the server took nothing, so a retry is a new request.
        if (e instanceof APIError && e.status < 500) intent = null;
      } finally { button.disabled = false; }
    });
  }

  // -- market --

  // marketStats is GET /v1/market with every list present, asked once a
  // refresh for every panel that shows it.
  function marketStats() {
    return once('market', async () => ((await get('/v1/market')) || []).map((s) => Object.assign(s, { prices: s.prices || [] })));
  }

  async function marketPrices() {
    const stats = await marketStats();
    const series = stats.filter((s) => s.prices.length).slice(0, 4).map((s) => ({
      name: s.gpu_model + ' ' + s.region,
      points: s.prices.map((p) => [Date.parse(p.at), p.price_micros_per_gpu_hour]),
    }));
    return lineChart('Clearing prices, $/GPU-hour', series, (v) => rough(v, 2)) + table([
      { h: 'GPU', f: (s) => esc(s.gpu_model) }, { h: 'Region', f: (s) => esc(s.region) },
      { h: 'Latest price', num: true, f: (s) => s.prices.length ? price(s.prices[s.prices.length - 1].price_micros_per_gpu_hour) : '—' },
      { h: 'Suggested ask (silver)', num: true, f: (s) => (s.suggested_ask_micros_per_gpu_hour || {}).silver
        ? price(s.suggested_ask_micros_per_gpu_hour.silver) : '—' },
      { h: 'Trades', num: true, f: (s) => esc(s.prices.length) },
    ], stats, 'No GPUs on offer yet.');
  }

  async function marketSupply() {
    const stats = await marketStats();
    return barChart('GPUs offered and GPUs wanted by queued jobs', ['supply', 'free', 'queued demand'],
      stats.map((s) => ({ label: s.gpu_model + ' ' + s.region, values: [s.supply_gpus, s.free_gpus, s.queued_gpus] })), String);
  }

  async function marketFill() {
    const stats = await marketStats();
    return table([
      { h: 'GPU', f: (s) => esc(s.gpu_model) }, { h: 'Region', f: (s) => esc(s.region) },
      { h: 'Leased now', num: true, f: (s) => pct(s.fill_rate) },
      { h: 'Queued jobs', num: true, f: (s) => esc(s.queued_jobs) },
    ], stats, 'No GPUs on offer yet.') +
      '<p class="hint">The share of each cell\'s GPUs on offer that leases hold at this moment; a provider\'s own fill rate, per day, is on its earnings panel.</p>';
  }

  // -- operator --

  async function systemHealth() {
    const [health, sum, nodes, names] = await Promise.all([
      fetch('/v1/healthz', { cache: 'no-store' }).then((r) => r.json()), get('/v1/summary'), shared('/v1/nodes'), providerNames(),
    ]);
    const byState = (o) => Object.keys(o || {}).map((k) => k + ' ' + o[k]).join(', ') || 'none';
    const lost = nodes.nodes.filter((n) => n.state === 'lost');
    return kpis([
      ['API', health.ok ? '<span class="state succeeded">ok</span>' : '<span class="state failed">down</span>'],
      ['Agent protocol', esc(health.protocol)], ['Jobs', esc(byState(sum.jobs_by_state))],
      ['Nodes', esc(byState(sum.nodes_by_state))], ['GPUs busy', esc(sum.gpus_busy + ' of ' + sum.gpus_total)],
      ['Renters paid', money(sum.spent_micros)], ['Providers earned', money(sum.earned_micros)],
      ['Fees', money(sum.fees_micros)], ['Refunded by disputes', money(sum.refunded_micros)], ['In escrow', money(sum.held_micros)],
    ]) + (lost.length ? '<h3>Lost nodes</h3>' + table([
      { h: 'Node', f: (n) => esc(n.name) + ' ' + id(n.id) }, { h: 'Provider', f: (n) => providerCell(names, n.provider_id) },
      { h: 'Last heartbeat', f: (n) => when(n.last_heartbeat) },
    ], lost) : '');
  }

  // providerNames is the providers' names by account ID, for the
  // operator's panels: read once a refresh, a page at a time, oldest
  // first, up to 5,000 providers. A provider not among them, or a server
  // that would not say, shows as its ID alone: names are a help, not what
  // a panel is for. The dialogs read the last names drawn (st.names).
  const providerNames = () => once('provider names', async () => {
    try {
      const all = await pages('/v1/accounts?role=provider', 'accounts', 5000, 500, 'after');
      st.names = new Map(all.rows.map((a) => [a.id, a.name]));
    } catch (e) {
      if (!(e instanceof APIError)) throw e;
      st.names = st.names || new Map();
    }
    return st.names;
  });
  // providerCell draws a provider as its name and ID; who says it in words.
  const providerCell = (names, pid) => names.has(pid) ? esc(names.get(pid)) + '<br>' + id(pid) : id(pid);
  const who = (pid) => st.names && st.names.has(pid) ? `${st.names.get(pid)} (${pid})` : pid;

  // st.rows remembers the rows an action button may name, by ID (payout_…,
  // dispute_…, node_…), as last drawn.
  const remember = (rows, key = (r) => r.id) => { for (const r of rows) st.rows[key(r)] = r; return rows; };
  const enc = encodeURIComponent;
  const words = (s) => String(s || '').replace(/_/g, ' ');
  const actionButton = (action, rowID, text, what, danger) => !may(ACTIONS[action].need) ? '' : `<button type="button" class="small${danger ? ' danger' : ''}"
    data-action="${action}" data-id="${esc(rowID)}" aria-haspopup="dialog" aria-label="${esc(text + ' ' + what)}">${esc(text)}…</button>`;

  // payoutsToSettle lists the payouts waiting, the longest waiting first;
  // past 5,000 the page says that newer ones wait too.
  async function payoutsToSettle() {
    const [all, names] = await Promise.all([pages('/v1/payouts?state=requested&order=oldest', 'payouts', 5000, 500, 'after'), providerNames()]);
    const p = remember(all.rows);
    const rest = all.more ? `<p class="hint">More payouts wait than shown: these are the ${esc(p.length.toLocaleString('en-US'))} ` +
      'that have waited longest; newer requests are not shown. ' +
      '<code>idlegrid payout ls --state requested --oldest</code> lists them all, a page at a time.</p>' : '';
    return table([
      { h: 'Payout', f: (x) => id(x.id) }, { h: 'Provider', f: (x) => providerCell(names, x.provider_id) },
      { h: 'Amount', num: true, f: (x) => money(x.amount_micros) }, { h: 'Requested', f: (x) => when(x.created_at) },
      { h: 'Decide', f: (x) => '<div class="row">' + actionButton('settle', x.id, 'Settle', 'payout ' + x.id) +
        actionButton('reject', x.id, 'Reject', 'payout ' + x.id, true) + '</div>' },
    ], p, 'No payouts waiting.') + rest;
  }

  // refunded is what an upheld dispute gave the renter back of the lease's
  // charge: of the provider's pending earnings and of the market's fee.
  const refunded = (d) => (d.refund_micros || 0) + (d.fee_refund_micros || 0);

  // disputeColumns are a dispute's columns, for the operator and for the
  // provider charged.
  const disputeColumns = [
    { h: 'Dispute', f: (d) => id(d.id) + '<br>' + when(d.created_at) },
    { h: 'Offence', f: (d) => esc(words(d.offence)) }, { h: 'State', f: (d) => stateTag(d.state) },
    { h: 'Node / lease', f: (d) => (d.node_id ? id(d.node_id) : '—') + (d.lease_id ? '<br>' + id(d.lease_id) : '') },
    { h: 'Harm', num: true, f: (d) => money(d.harm_micros) },
    { h: 'Penalty', num: true, f: (d) => d.state === 'upheld' ? money(d.penalty_micros) + (d.penalty_to ? ' to ' + esc(d.penalty_to) : '') : '—' },
    { h: 'Refund', num: true, f: (d) => (d.refund_micros > 0 ? money(d.refund_micros) : '—') +
      (d.fee_refund_micros > 0 ? `<br><span class="hint">and ${money(d.fee_refund_micros)} of the market's fee</span>` : '') },
    { h: 'Evidence', f: (d) => esc(d.evidence) },
    { h: 'Resolution', f: (d) => d.resolution ? esc(d.resolution) + `<br><span class="hint">${esc(d.resolved_by || '')} ${when(d.resolved_at)}</span>` : '—' },
  ];

  // disputeList is every open dispute (of the caller's, as the server
  // shows them), then the newest 30 decided ones, asked for as such (not
  // the decided among the newest 30, which many open ones would crowd
  // out): {rows, open, more}, open the number open and more whether some
  // open ones were left unread. It is null when the server has no
  // disputes.
  async function disputeList() {
    const p = await probe(['/v1/disputes?state=upheld,dismissed&limit=30']);
    if (p.missing) return null;
    const open = await pages('/v1/disputes?state=open', 'disputes');
    const decided = (p.data.disputes || []).filter((d) => d.state !== 'open');
    return { rows: open.rows.concat(decided), open: open.rows.length, more: open.more };
  }

  const atLeast = (n, more) => esc(n) + (more ? '+' : '');

  async function disputes() {
    const [list, names] = await Promise.all([disputeList(), providerNames()]);
    if (!list) return unavailable('Disputes');
    const ds = remember(list.rows);
    // An open dispute holds its provider's bond until it is decided: the
    // oldest says how long the queue keeps one waiting (more: older ones
    // were left unread, so it waited longer still).
    const oldest = list.open ? list.rows[list.open - 1] : null;
    const waited = oldest ? atLeast(dur(Math.max(0, Math.round((Date.now() - Date.parse(oldest.created_at)) / 1000))), list.more) : '—';
    return kpis([['Open', atLeast(list.open, list.more)], ['Oldest open, waiting', waited], ['Shown', esc(ds.length)]]) + table([
      { h: 'Provider', f: (d) => providerCell(names, d.provider_id) }, ...disputeColumns,
      { h: 'Decide', f: (d) => d.state !== 'open' ? '' : '<div class="row">' +
        actionButton('uphold', d.id, 'Uphold', 'dispute ' + d.id) + actionButton('dismiss', d.id, 'Dismiss', 'dispute ' + d.id, true) + '</div>' },
    ], ds, 'None right now.');
  }

  async function quarantined() {
    const p = await probe(['/v1/quarantine?limit=1']);
    if (p.missing) return unavailable('Quarantine');
    const [all, names] = await Promise.all([pages('/v1/quarantine', null), providerNames()]);
    const qs = remember(all.rows, (q) => q.node_id);
    const rest = all.more ? `<p class="hint">The newest ${esc(qs.length)} shown; <code>idlegrid node quarantine ls</code> lists them all, a page at a time.</p>` : '';
    return table([
      { h: 'Node', f: (q) => id(q.node_id) }, { h: 'Provider', f: (q) => providerCell(names, q.provider_id) },
      { h: 'Since', f: (q) => when(q.since) }, { h: 'Reason', f: (q) => esc(q.reason) },
      { h: 'Evidence', f: (q) => q.evidence ? `<code>${esc(JSON.stringify(q.evidence).slice(0, 200))}</code>` : '—' },
      { h: 'Decide', f: (q) => actionButton('lift', q.node_id, 'Lift', 'the quarantine of node ' + q.node_id) },
    ], qs, 'None right now.') + rest;
  }

  // verifications lists re-runs of verifiable work: a renter's own, or
  // every one for an operator.
  async function verifications() {
    const p = await probe(['/v1/verifications?limit=50']);
    if (p.missing) return unavailable('Verification of results');
    const vs = p.data.verifications || [];
    const run = (r) => r ? id(r.job_id) + (r.provider_id ? '<br><span class="hint">by ' + esc(r.provider_id) + '</span>' : '') +
      (r.digest ? '<br><span class="hint">output ' + esc(r.digest.slice(0, 12)) + '…</span>' : '') : '—';
    return table([
      { h: 'Verification', f: (v) => id(v.id) + '<br>' + when(v.created_at) }, { h: 'State', f: (v) => stateTag(v.state) },
      { h: 'Original', f: (v) => run(v.original) }, { h: 'Re-run', f: (v) => run(v.rerun) }, { h: 'Tie-break', f: (v) => run(v.tiebreak) },
      { h: 'Outcome', f: (v) => esc(v.outcome || 'pending') + (v.dispute_id ? '<br>dispute ' + id(v.dispute_id) : '') },
    ], vs, 'No verifications yet. A verifiable job (deterministic output) is re-run on another ' +
      'provider\'s node for a sample of its leases.') +
      more(vs, 50, 'idlegrid dispute verifications --before ' + (vs.length ? vs[vs.length - 1].id : ''));
  }

  // NOTICE_KINDS name what a notice is about (GET /v1/notices).
  const NOTICE_KINDS = { runout: 'money ran short', spend_limit: 'spend limit', dispute: 'dispute' };

  // notices lists what the market told the account, newest first: leases
  // stopped before its money or spend limit ran out (a renter's), a
  // complaint about its lease or a dispute decided (a provider's and a
  // renter's).
  async function notices() {
    const p = await probe(['/v1/notices?limit=20']);
    if (p.missing) return unavailable('Notices');
    const ns = p.data.notices || [];
    return table([
      { h: 'When', f: (n) => when(n.created_at) }, { h: 'About', f: (n) => esc(NOTICE_KINDS[n.kind] || n.kind || '—') },
      { h: 'Lease', f: (n) => n.lease_id ? id(n.lease_id) : '—' }, { h: 'Notice', f: (n) => esc(n.message) },
    ], ns, 'No notices: the market tells you here when it stops a lease for money, or a dispute about your work opens or is decided.') +
      more(ns, 20, 'idlegrid account notices --before ' + (ns.length ? ns[ns.length - 1].id : ''));
  }

  // providerBond shows the provider's bond and the disputes against it.
  async function providerBond() {
    const [bal, list] = await Promise.all([shared('/v1/balance'), disputeList()]);
    const head = [['Bond', money(bal.bond_micros)]];
    if (!list) return kpis(head) + unavailable('Disputes');
    const upheld = await pages('/v1/disputes?state=upheld', 'disputes');
    const taken = upheld.rows.reduce((a, d) => a + (d.penalty_micros || 0), 0);
    const ds = list.rows;
    return kpis(head.concat([['Open disputes', atLeast(list.open, list.more)], ['Penalties taken', money(taken) + (upheld.more ? '+' : '')]])) +
      table(disputeColumns, ds, 'No disputes against you.') +
      '<p class="hint">A bond backs your promises: an upheld dispute takes the trust policy\'s penalty from it. ' +
      'Post one with <code>idlegrid bond post</code>; see docs/trust.md.</p>';
  }

  // renterDisputes lists the disputes about the renter's leases, newest
  // first: its own complaints and those an admin opened naming it as the
  // harmed renter (GET /v1/disputes shows a renter only those).
  async function renterDisputes() {
    const [p, pol] = await Promise.all([probe(['/v1/disputes?limit=50']), probe(['/v1/trust-policy'])]);
    if (p.missing) return unavailable('Complaints');
    const ds = p.data.disputes || [];
    if (!pol.missing) st.complaintHours = pol.data.complaint_window_hours;
    return table([
      { h: 'Dispute', f: (d) => id(d.id) }, { h: 'Offence', f: (d) => esc(words(d.offence)) },
      { h: 'Lease', f: (d) => d.lease_id ? id(d.lease_id) : '—' }, { h: 'State', f: (d) => stateTag(d.state) },
      { h: 'Harm', num: true, f: (d) => money(d.harm_micros) },
      { h: 'Penalty to you', num: true, f: (d) => d.state !== 'upheld' ? '—' : d.penalty_to === 'renter' ? money(d.penalty_micros)
        : d.penalty_micros > 0 ? `<span class="muted">none: it went to the ${esc(d.penalty_to || 'platform')}</span>` : '—' },
      { h: 'Refund', num: true, f: (d) => refunded(d) > 0 ? money(refunded(d)) : '—' },
      { h: 'Opened', f: (d) => when(d.created_at) }, { h: 'Resolved', f: (d) => when(d.resolved_at) },
      { h: 'Resolution', f: (d) => d.resolution ? esc(d.resolution) : d.state === 'open' ? '<span class="muted">an admin decides it</span>' : '—' },
    ], ds, 'No complaints or disputes about your leases. To complain about a lease (' + complaintWithin() + ' of its end), choose its ' +
      'job in Jobs and press Complain… beside the lease in Job details; an admin decides it.') +
      more(ds, 50, 'idlegrid dispute ls --before ' + (ds.length ? ds[ds.length - 1].id : '')) +
      '<p class="hint">Upheld, a dispute takes the trust policy\'s penalty from the provider\'s bond (paid to you where the policy ' +
      'says so) and refunds what the bond did not pay of your harm from the lease\'s earnings still pending, then from the market\'s fee on it; see docs/trust.md.</p>';
  }

  // complaintWithin says how long after a lease's end its renter may
  // complain, as the server says (its --complaint-window, in
  // GET /v1/trust-policy): "within 30 days".
  function complaintWithin() {
    const h = st.complaintHours;
    if (!(h > 0)) return 'within the market\'s complaint window';
    return h % 24 === 0 ? `within ${h / 24} day${h === 24 ? '' : 's'}` : `within ${h} hour${h === 1 ? '' : 's'}`;
  }

  // OFFENCES are what a renter may complain of, in the trust policy's
  // words (docs/trust.md), each with what it means.
  const OFFENCES = [
    ['broken_notice', 'Broken notice: stopped without the notice it was guaranteed'],
    ['mismatched_result', 'Mismatched result: output differs from a re-run elsewhere'],
    ['fake_hardware', 'Fake hardware: the GPUs are not what the node claimed'],
    ['forged_receipt', 'Forged receipt: usage reported that did not happen'],
  ];

  // complaintFields are the complaint dialog's questions about lease l.
  function complaintFields(l) {
    const cost = money(live(l) ? l.hold_micros : l.charged_micros);
    return `<div><label for="c-offence">Offence</label><select id="c-offence">${OFFENCES.map(([v, text]) =>
      `<option value="${esc(v)}">${esc(text)}</option>`).join('')}</select></div>
      <div><label for="c-evidence">Evidence: what went wrong, in words an admin can check (required)</label>
        <textarea id="c-evidence" rows="4" maxlength="8192" required></textarea></div>
      <div><label for="c-harm">Harm, $ (optional: at most, and when empty, what the lease cost you, ${esc(cost)})</label>
        <input id="c-harm" type="text" inputmode="decimal" placeholder="${esc(cost)}"></div>`;
  }

  // readComplaint reads the complaint dialog: {offence, evidence, harm} or
  // {error, input}, the input at fault.
  function readComplaint() {
    const evidence = $('#c-evidence').value.trim(), harmText = $('#c-harm').value.trim();
    if (!evidence) return { error: 'Evidence: required. Say what went wrong, so that an admin can check it.', input: $('#c-evidence') };
    const harm = harmText ? parseMoney(harmText) : 0;
    if (harm === null) return { error: 'Harm: write dollars, e.g. 2.50, or leave it empty for what the lease cost.', input: $('#c-harm') };
    return { offence: $('#c-offence').value, evidence, harm };
  }

  // ---- operator actions, each confirmed in a dialog ------------------

  // ACTIONS are the actions on a row (an operator's, a provider's drain, a
  // renter's cancel or complaint): the access they take (need), what the
  // dialog asks (a line of text, label; or its own questions, fields, read
  // by read), the call made once it is confirmed, what the panel then says,
  // and the words of the button that backs out (back; "Cancel" when unset).
  // key is an Idempotency-Key made when the dialog opens, so that retrying
  // one confirmation is applied once.
  const ACTIONS = {
    cancel: { panel: 'job', need: 'use', ok: 'Cancel job', back: 'Keep the job', danger: true,
      title: (j) => 'Cancel job ' + (j.name || j.id),
      what: (j) => j.state === 'queued' ? `Job ${j.name || j.id} has not started: it ends now and is charged nothing more.`
        : `Job ${j.name || j.id} is asked to stop now: it is charged for the time its leases ran, and the rest of their hold ` +
          'returns to your balance. It cannot be resumed; submit it again to run it again.',
      run: (j) => api('POST', '/v1/jobs/' + enc(j.id) + '/cancel'),
      done: (j) => j.state === 'cancelled' ? `Job ${j.id} cancelled.`
        : `Cancel requested: job ${j.id} ends once its leases have stopped.` },
    complain: { panel: 'job', need: 'use', ok: 'Open complaint', fields: complaintFields, read: readComplaint,
      inputs: { 'dispute.offence': 'c-offence', 'dispute.evidence': 'c-evidence', 'dispute.harm_micros': 'c-harm' },
      conflict: 'a complaint of this offence about this lease was opened already: see Complaints and disputes',
      title: (l) => 'Complain about lease ' + l.id,
      what: (l) => `Opens a dispute against the provider of node ${(st.nodes[l.node_id] || {}).name || l.node_id}, which an admin ` +
        'decides: upheld, the trust policy\'s penalty is taken from the provider\'s bond, and what it does not pay of your harm is ' +
        'refunded from the lease\'s earnings still pending, then from the market\'s fee; dismissed, nothing moves. You may complain ' +
        complaintWithin() +
        ' of the lease\'s end, once per offence.',
      run: (l, text, key, v) => api('POST', '/v1/disputes', Object.assign({ offence: v.offence, lease_id: l.id, evidence: v.evidence },
        v.harm ? { harm_micros: v.harm } : {}), { 'Idempotency-Key': key }),
      done: (d) => `Complaint ${d.id} opened: an admin decides it. Harm claimed: ${money(d.harm_micros)}; ` +
        'it is listed under Complaints and disputes.' },
    settle: { panel: 'settle', need: 'all', ok: 'Settle payout', required: true, label: 'Payment reference (e.g. the bank transfer ID)',
      title: (r) => 'Settle payout ' + r.id,
      what: (r) => `Marks ${money(r.amount_micros)} to provider ${who(r.provider_id)} as paid. Settle once the money has left: it cannot be undone.`,
      run: (r, text, key) => api('POST', '/v1/payouts/' + enc(r.id) + '/settle', { reason: text }, { 'Idempotency-Key': key }),
      done: (x) => `Payout ${x.id} settled: ${money(x.amount_micros)} paid to ${who(x.provider_id)}.` },
    reject: { panel: 'settle', need: 'all', ok: 'Reject payout', danger: true, required: true, label: 'Reason, for the provider',
      title: (r) => 'Reject payout ' + r.id,
      what: (r) => `Refuses ${money(r.amount_micros)} to provider ${who(r.provider_id)}; the money is payable to them again.`,
      run: (r, text, key) => api('POST', '/v1/payouts/' + enc(r.id) + '/reject', { reason: text }, { 'Idempotency-Key': key }),
      done: (x) => `Payout ${x.id} rejected: ${money(x.amount_micros)} is payable to ${who(x.provider_id)} again.` },
    uphold: { panel: 'disputes', need: 'all', ok: 'Uphold dispute', danger: true, required: true, label: 'Resolution: why it is upheld',
      title: (r) => 'Uphold dispute ' + r.id,
      what: (r) => `Finds provider ${who(r.provider_id)} guilty of ${words(r.offence)}: the trust policy's penalty is taken from their bond ` +
        `(what it does not pay of a renter's harm, from the lease's earnings still pending, then the market's fee) and counts against their reputation. ` +
        `Evidence: ${r.evidence || 'none given'}`,
      run: (r, text) => api('POST', '/v1/disputes/' + enc(r.id) + '/uphold', { resolution: text }),
      done: (d) => `Dispute ${d.id} upheld: ` + (d.penalty_micros > 0 || refunded(d) > 0
        ? (d.penalty_micros > 0 ? `${money(d.penalty_micros)} taken from the bond of ${who(d.provider_id)}${d.penalty_to ? ' to the ' + d.penalty_to : ''}.` : '') +
          (refunded(d) > 0 ? ` ${money(refunded(d))} of the lease's charge refunded to the renter (its pending earnings, then the market's fee).` : '')
        : `no money moved (the bond of ${who(d.provider_id)} was empty, the lease's earnings had matured, or the policy sets no penalty).`) },
    dismiss: { panel: 'disputes', need: 'all', ok: 'Dismiss dispute', required: true, label: 'Resolution: why it is dismissed',
      title: (r) => 'Dismiss dispute ' + r.id,
      what: (r) => `Clears provider ${who(r.provider_id)} of ${words(r.offence)}: nothing is taken from their bond.`,
      run: (r, text) => api('POST', '/v1/disputes/' + enc(r.id) + '/dismiss', { resolution: text }),
      done: (d) => `Dispute ${d.id} dismissed: nothing moved.` },
    drain: { panel: 'nodes', need: 'use', ok: 'Drain node',
      title: (r) => 'Drain node ' + r.name,
      what: (r) => `Node ${r.name} takes no new leases: its bronze leases get their notice now, its gold and silver ` +
        `leases run to their end (${r.__leases.length} live now). Stop its agent once it is empty; undrain it to offer it again.`,
      run: (r) => api('PUT', '/v1/nodes/' + enc(r.id) + '/drain'),
      done: (n) => `Node ${n.name} is draining: no new leases. Stop its agent once "Running now" says idle.` },
    undrain: { panel: 'nodes', need: 'use', ok: 'Undrain node',
      title: (r) => 'Undrain node ' + r.name,
      what: (r) => `Node ${r.name} takes new leases again, in its windows.`,
      run: (r) => api('DELETE', '/v1/nodes/' + enc(r.id) + '/drain'),
      done: (n) => `Node ${n.name} is drained no more: it takes new leases again.` },
    logout: { panel: 'registries', need: 'all', ok: 'Remove login', danger: true,
      title: (r) => 'Remove your login to ' + r.registry,
      what: (r) => `Your jobs that start from now on pull their images from ${r.registry} without a login; those private there will fail to start. ` +
        'Revoke the token at the registry too if you no longer use it.',
      run: (r) => api('DELETE', '/v1/registry-logins/' + enc(r.registry)),
      done: () => 'Login removed.' },
    lift: { panel: 'quarantine', need: 'all', ok: 'Lift quarantine', label: 'Note, for the record',
      title: (r) => 'Lift the quarantine of node ' + r.node_id,
      what: (r) => `Node ${r.node_id} takes new leases again. It was quarantined because: ${r.reason}`,
      run: (r, text) => api('POST', '/v1/nodes/' + enc(r.node_id) + '/quarantine/lift', { note: text }),
      done: (q) => `Node ${q.node_id}: quarantine lifted; it takes new leases again.` },
  };

  let confirming = null; // the action whose dialog is open: {a, row, rowID, name, key}

  function openConfirm(name, rowID) {
    // The close event comes after the dialog closed, in a task of its own:
    // a dialog opened before it came (a quick Cancel, then another
    // button) first reports the last one, so the late event finds this one
    // open and leaves it be (see confirmClosed).
    if (confirming) confirmClosed();
    const a = ACTIONS[name], row = st.rows[rowID];
    confirming = { a, row, rowID, name, key: 'web-' + name + '-' + crypto.randomUUID() };
    $('#confirm-h').textContent = a.title(row);
    $('#confirm-what').textContent = a.what(row);
    $('#confirm-label').textContent = a.label ? a.label + (a.required ? '' : ' (optional)') : '';
    $('#confirm-label').hidden = $('#confirm-text').hidden = !a.label; // an action that records no words asks for none
    $('#confirm-fields').innerHTML = a.fields ? a.fields(row) : '';
    $('#confirm-fields').hidden = !a.fields;
    $('#confirm-text').value = '';
    $('#confirm-text').required = !!a.required;
    $('#confirm-error').textContent = '';
    $('#confirm-cancel').textContent = a.back || 'Cancel';
    const ok = $('#confirm-ok');
    ok.textContent = a.ok; ok.className = a.danger ? 'danger' : ''; ok.disabled = false;
    $('#confirm').showModal();
    (a.fields ? $('#confirm-fields').querySelector('input, select, textarea') : a.label ? $('#confirm-text') : ok).focus();
  }

  async function confirmSubmit(ev) {
    ev.preventDefault();
    const c = confirming;
    if (!c) return;
    const out = $('#confirm-error'), text = $('#confirm-text').value.trim();
    out.textContent = '';
    for (const el of $('#confirm-fields').querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
    if (c.a.required && !text) { out.textContent = c.a.label + ': required.'; $('#confirm-text').focus(); return; }
    const values = c.a.read ? c.a.read() : null; // the action's own questions, answered
    if (values && values.error) {
      out.textContent = values.error; values.input.setAttribute('aria-invalid', 'true'); values.input.focus();
      return;
    }
    $('#confirm-ok').disabled = true;
    try {
      const res = await c.a.run(c.row, text, c.key, values);
      c.result = c.a.done(res);
      $('#confirm').close();
    } catch (e) {
      if (confirming !== c) return; // backed out of, or signed out, meanwhile
      // Said as the server said it, a line a field at fault, each of the
      // action's own inputs at fault marked and the first focused.
      const bad = (e.problems || []).map((p) => document.getElementById((c.a.inputs || {})[p.field])).filter(Boolean);
      // A conflict is said in the action's words (conflict); one over its
      // idempotency key means what was sent before, unanswered, was taken
      // and the dialog's text has changed since.
      const conflict = !c.a.conflict ? 'someone may have decided it already; the list refreshes'
        : e.field === 'idempotency_key' ? 'what you sent before was taken: back out, and see Complaints and disputes' : c.a.conflict;
      out.textContent = problemLines(e) + (e.status === 409 ? ' (' + conflict + ')' : '');
      for (const el of bad) el.setAttribute('aria-invalid', 'true');
      $('#confirm-ok').disabled = false;
      (bad[0] || (c.a.label ? $('#confirm-text') : $('#confirm-ok'))).focus();
      refresh();
    }
  }

  // confirmClosed runs however the dialog closed (done, Cancel, Escape):
  // it reports the result in the panel and moves the focus there, or back
  // to the button that opened the dialog.
  function confirmClosed() {
    if ($('#confirm').open) return; // the late close event of a dialog reported when this one opened
    const c = confirming;
    confirming = null;
    if (!c) return;
    const res = document.getElementById('result-' + c.a.panel);
    if (c.result && res) {
      res.textContent = c.result; res.className = 'result'; res.tabIndex = -1; res.focus();
      refresh();
      return;
    }
    const b = document.querySelector(`button[data-action="${c.name}"][data-id="${CSS.escape(c.rowID)}"]`);
    if (b) b.focus();
  }

  // ---- actions in redrawn bodies (event delegation) ------------------

  document.addEventListener('click', async (ev) => {
    const b = ev.target.closest('button[data-action]');
    if (!b || b.dataset.action === 'w-remove') return;
    const idv = b.dataset.id;
    try {
      if (b.dataset.action === 'job') {
        st.job = idv;
        const res = $('#result-job'); if (res) res.textContent = ''; // said of the job shown before
        await refresh();
        const h = $('#panel-job h2'); if (h) { h.tabIndex = -1; h.focus(); }
      } else if (ACTIONS[b.dataset.action] && st.rows[idv]) {
        openConfirm(b.dataset.action, idv);
      }
    } catch (e) { toast(e.message, true); }
  });

  // ---- shell: sign-in, navigation, refresh ---------------------------

  let toastTimer = 0;
  function toast(msg, bad) {
    const t = $('#toast');
    t.textContent = msg; t.className = 'toast show' + (bad ? ' bad' : '');
    clearTimeout(toastTimer);
    toastTimer = setTimeout(() => { t.className = 'toast'; }, 6000);
  }

  function signOut(why) {
    st.gen++;
    sessionStorage.removeItem(KEY);
    st.key = ''; st.me = null; st.view = ''; st.job = ''; st.node = ''; st.samples = []; st.rows = {}; st.nodes = {}; st.offers = ''; st.explained = {}; st.earned = {};
    follow(); // ends the loop following the job
    if ($('#confirm').open) $('#confirm').close();
    $('#toast').className = 'toast';
    clearTimeout(st.timer);
    history.replaceState(null, '', location.pathname + location.search); // the next key starts at its own view
    $('#view').hidden = true; $('#view').innerHTML = '';
    $('#nav').hidden = true; $('#who').hidden = true;
    $('#signin').hidden = false;
    $('#signin-error').textContent = why || '';
    $('#key').value = '';
    $('#key').focus();
  }

  async function signIn(key) {
    st.gen++;
    st.key = key;
    try {
      st.me = await api('GET', '/v1/me');
    } catch (e) {
      st.key = '';
      // Only a refusal says the key is no good: a server that could not
      // answer (down, restarting, 5xx, 429) says nothing about it.
      if (e instanceof APIError && e.status === 401) sessionStorage.removeItem(KEY);
      throw e;
    }
    sessionStorage.setItem(KEY, key);
    $('#signin-error').textContent = '';
    $('#signin').hidden = true;
    $('#who-name').textContent = st.me.name + ' (' + st.me.role + ')';
    $('#who-access').textContent = st.me.key_access ? 'key access: ' + st.me.key_access : '';
    $('#who-access').hidden = !st.me.key_access; // a server that does not say
    $('#who').hidden = false;
    const views = viewsFor(st.me.role);
    $('#nav').innerHTML = views.map((v) => `<a href="#${v}" data-view="${v}">${esc(VIEWS[v].title)}</a>`).join('');
    $('#nav').hidden = false;
    route();
  }

  // resume signs in again, at page load, with the key this tab kept. Only
  // a refusal of the key (401) signs out and forgets it; any other failure
  // (the server unreachable or restarting, 5xx, 429) is said on the
  // sign-in form and the key is tried again after 1 s, 2 s, 4 s … up to
  // 30 s (or a 429's Retry-After), until the server answers or someone
  // signs in with the form, which ends the retries.
  const RESUME_PAUSE_MAX_MS = 30000;
  async function resume(key, pause = 0) {
    try { await signIn(key); } catch (e) {
      if (e instanceof APIError && e.status === 401) { signOut('Your key was refused: ' + e.message); return; }
      const gen = st.gen;
      pause = Math.min(Math.max(pause ? pause * 2 : 1000, e.retryAfterMs || 0), RESUME_PAUSE_MAX_MS);
      $('#signin-error').textContent = `Could not check your key with the server: ${e.message}. ` +
        `Trying again in ${Math.round(pause / 1000)} s; your key is kept.`;
      setTimeout(() => { if (st.gen === gen && !st.me) resume(key, pause); }, pause);
    }
  }

  function route() {
    if (!st.me) return;
    const views = viewsFor(st.me.role);
    const want = location.hash.slice(1);
    const v = views.includes(want) ? want : views[0];
    if (location.hash.slice(1) !== v) history.replaceState(null, '', '#' + v);
    for (const a of document.querySelectorAll('#nav a')) {
      if (a.dataset.view === v) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
    if (st.view !== v) mount(v);
  }

  function mount(v) {
    st.view = v;
    const view = $('#view');
    const panels = VIEWS[v].panels();
    view.innerHTML = `<h1>${esc(VIEWS[v].title)}</h1><div class="grid">` + panels.map((p) =>
      `<section class="panel${p.wide ? ' wide' : ''}" id="panel-${p.id}" aria-labelledby="h-${p.id}">
        <h2 id="h-${p.id}">${esc(p.title)}</h2>
        ${p.body ? `<div class="body" data-panel="${p.id}" aria-live="off"><p class="muted">Loading…</p></div>` : ''}
        ${p.result ? `<p class="result" id="result-${p.id}" role="status" aria-live="polite"></p>` : ''}
        ${!may(p.need) ? denied(p) : p.form ? p.form() : ''}</section>`).join('') + '</div>';
    view.hidden = false;
    view.panels = panels;
    for (const p of panels) if (p.bind && may(p.need)) p.bind();
    document.title = VIEWS[v].title + ' · idlegrid';
    refresh();
  }

  // refresh redraws every panel body of the current view, then schedules
  // the next refresh. A body whose HTML did not change is left alone, so
  // that focus and selection inside it survive. One asked for while another
  // runs (a job chosen, a change the watch saw) runs as soon as it ends,
  // since the one running may have read what was there before.
  async function refresh() {
    clearTimeout(st.timer);
    follow();
    if (!st.me) return; // signed out: signing in starts the refreshes again
    if (st.busy) { st.again = true; st.timer = setTimeout(refresh, REFRESH_MS); return; }
    st.busy = true;
    const answers = st.shared = new Map(); // one refresh's: the next asks again
    // A panel may ask several things in turn; if its user signs out, or
    // someone else signs in, before it is done, what it found (partly with
    // the next user's key) belongs to nobody and is not drawn.
    const view = $('#view'), v = st.view, gen = st.gen;
    let ok = true;
    await Promise.all((view.panels || []).filter((p) => p.body).map(async (p) => {
      const r = await render(p);
      ok = ok && r.ok;
      const el = view.querySelector(`[data-panel="${p.id}"]`);
      if (el && st.gen === gen && st.view === v && r.fresh()) paint(el, r.html);
    }));
    if (st.shared === answers) st.shared = null;
    st.busy = false;
    const again = st.again;
    st.again = false;
    if (again && st.me) { refresh(); return; }
    if (st.gen !== gen) return; // the next user's refreshes are already scheduled
    $('#live').className = ok ? 'live' : 'live stale';
    $('#live').textContent = ok ? 'live' : 'reconnecting';
    if (st.me) st.timer = setTimeout(refresh, document.hidden ? REFRESH_MS * 5 : REFRESH_MS);
  }

  // render runs a panel's body: {html, fresh, ok}. A body answers its HTML,
  // or {html, fresh} where fresh() says, just before drawing, whether that
  // is still what the panel should show (an error may carry one too); ok is
  // false when the server could not be reached.
  async function render(p) {
    try {
      const out = await p.body();
      return typeof out === 'string' ? { html: out, fresh: () => true, ok: true } : Object.assign({ ok: true }, out);
    } catch (e) {
      return { html: `<p class="error">Could not load: ${esc(e.message)}</p>`, fresh: e.fresh || (() => true),
        ok: !(e instanceof TypeError) && !(e instanceof APIError && e.status >= 500) };
    }
  }

  // paint puts html into the panel body el unless it shows it already,
  // keeping the focus on the action button that had it.
  function paint(el, html) {
    if (el.dataset.html === html) return;
    const focus = focusedIn(el);
    el.innerHTML = html; el.dataset.html = html;
    if (focus) { const b = el.querySelector(focus); if (b) b.focus(); }
  }

  // focusedIn names the action button focused inside el, if any, so that a
  // redraw (a time that reads "5s ago" instead of "4s ago") keeps the focus
  // of a keyboard user on it.
  function focusedIn(el) {
    const a = document.activeElement;
    if (!a || !el.contains(a) || !a.dataset || !a.dataset.action) return '';
    return `button[data-action="${CSS.escape(a.dataset.action)}"][data-id="${CSS.escape(a.dataset.id || '')}"]`;
  }

  document.addEventListener('DOMContentLoaded', () => {
    $('#signin-form').addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const key = $('#key').value.trim();
      $('#signin-error').textContent = '';
      if (!key) { $('#signin-error').textContent = 'Paste an API key (it starts with igk_).'; return; }
      try { await signIn(key); } catch (e) { $('#signin-error').textContent = e.message; $('#key').focus(); }
    });
    $('#signout').addEventListener('click', () => signOut('Signed out.'));
    $('#confirm-form').addEventListener('submit', confirmSubmit);
    $('#confirm-cancel').addEventListener('click', () => $('#confirm').close());
    $('#confirm').addEventListener('close', confirmClosed);
    window.addEventListener('hashchange', route);
    document.addEventListener('visibilitychange', () => { if (!document.hidden) refresh(); });
    if (st.key) resume(st.key); else $('#key').focus();
  });
})();
