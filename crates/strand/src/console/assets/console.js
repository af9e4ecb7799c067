/* Strand web console: one page, hash routes, on the JSON API of docs/CONSOLE.md. Data reaches
 * the DOM only through textContent and attributes, never innerHTML.
 * Stable ids and data attributes, for tests (td[data-col=NAME] names every table cell):
 * all      #nav, a[data-nav=overview|topics|groups|throughput], #read-only-badge, #nav-cluster,
 *          #main, #flash (div.error / div.ok, text in span.text)
 * #/       #overview-cluster-id, #overview-controller, #overview-node, #overview-version,
 *          #overview-topics, #overview-partitions, #overview-under-replicated, #overview-offline,
 *          #brokers-table tr[data-broker=ID], #under-replicated and #offline-partitions
 *          tr[data-topic][data-partition]
 * #/topics #topics-filter, #topics-internal, #topics-prev, #topics-next, #topics-page,
 *          #topics-table tr[data-topic] (cols name partitions rf under-replicated bytes rate,
 *          td[data-rate]); details#create-topic (click its summary) > #create-topic-form,
 *          #create-topic-name, #create-topic-partitions, #create-topic-rf, #create-topic-configs
 *          (NAME=VALUE lines), #create-topic-submit
 * #/topics/NAME  #topic-name, #topic-id, #topic-rate, #browse-messages, #topic-throughput-chart,
 *          #partitions-table tr[data-partition], #configs-table tr[data-config=NAME] (cols
 *          name value source), #configs-show-all, #alter-config-form, #alter-config-set
 *          (NAME=VALUE lines), #alter-config-delete (names), #alter-config-submit, #delete-topic
 * #/messages/TOPIC[?partition=N]  #messages-partition, #messages-start (newest|offset|timestamp),
 *          #messages-offset, #messages-timestamp (datetime-local), #messages-limit, #messages-load,
 *          #messages-isolation (read_uncommitted|read_committed), #messages-format (text|json|hex), #messages-info, #messages-next, #messages-table
 *          tr[data-partition][data-offset] (cols offset timestamp key value headers; .note
 *          when the JSON view shows text)
 * #/groups #groups-filter, #groups-prev, #groups-next, #groups-page, #groups-table
 *          tr[data-group] (td[data-col=lag][data-lag])
 * #/groups/ID  #group-name, #group-state, #group-type, #group-coordinator, #group-lag[data-lag],
 *          #lag-chart, #group-members tr[data-member], #group-offsets tr[data-topic][data-partition]
 *          (cols committed log-end lag), #refreshed-at
 * #/throughput  #throughput-table tr[data-topic][data-rate] (svg chart), #refreshed-at
 * Charts are svg.chart[data-points][data-last][data-max]. Read-only: no create, alter or delete
 * control is rendered. Group and throughput pages refresh every 5 s while shown.
 */
'use strict';

const S = { readOnly: false, overview: null, timers: [], gen: 0, pending: [],
  topics: { offset: 0, limit: 50, filter: '', internal: false },
  groups: { offset: 0, limit: 50, filter: '' }, showAllConfigs: false, format: 'text' };
const $ = (id) => document.getElementById(id);

/* ---------- DOM helpers ---------- */
const el = (tag, props, ...kids) => fill(document.createElement(tag), props, kids);
const svg = (tag, props, ...kids) => fill(document.createElementNS('http://www.w3.org/2000/svg', tag), props, kids);
function fill(e, props, kids) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v == null || v === false) continue;
    if (k === 'class') e.setAttribute('class', v);
    else if (k === 'text') e.textContent = String(v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (['value', 'checked', 'disabled', 'selected'].includes(k)) e[k] = v;
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const k of kids.flat(4)) if (k != null && k !== false) e.append(k instanceof Node ? k : String(k));
  return e;
}
function show(...nodes) { $('main').replaceChildren(...nodes.flat().filter(Boolean)); }
function table(id, headers, rows, empty) {
  // a header ending in # is a numeric column
  const head = el('tr', null, headers.map((h) => h.endsWith('#') ? el('th', { class: 'num' }, h.slice(0, -1)) : el('th', null, h)));
  const body = el('tbody', null, rows.length ? rows
    : el('tr', null, el('td', { class: 'empty', colspan: headers.length }, empty || 'None')));
  return el('table', { id }, el('thead', null, head), body);
}
const td = (content, col, cls, extra) => el('td', Object.assign({ 'data-col': col, class: cls }, extra), content);
const numTd = (content, col, extra) => td(content, col, 'num', extra);
const link = (href, text, props) => el('a', Object.assign({ href }, props), text);
const muted = (tag, ...kids) => el(tag, { class: 'muted' }, ...kids);
const leader = (id) => (id == null || id < 0 ? 'none' : id);
const badge = (kind, text) => el('span', { class: 'badge ' + kind }, text);
const E = encodeURIComponent;

/* ---------- formatting ---------- */
function fmtBytes(n) {
  if (n == null) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (Math.abs(n) >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(n < 10 ? 2 : 1)) + ' ' + units[i];
}
function fmtRate(r) {
  if (r == null) return '–';
  return r === 0 ? '0' : r >= 100 ? Math.round(r).toLocaleString('en-US') : r >= 10 ? r.toFixed(1) : r.toFixed(2);
}
const fmtNum = (n) => (n == null ? '–' : Number(n).toLocaleString('en-US'));
const fmtList = (a) => (a && a.length ? a.join(', ') : '–');
const fmtTime = (ms) => new Date(ms).toLocaleTimeString([], { hour12: false });
function fmtIso(ms) { try { return new Date(ms).toISOString(); } catch (e) { return String(ms); } }

/* ---------- API ---------- */
async function api(method, path, body) {
  const opts = { method, headers: { Accept: 'application/json' } };
  if (method !== 'GET') {
    opts.headers['Content-Type'] = 'application/json';
    if (body !== undefined) opts.body = JSON.stringify(body);
  }
  let res;
  try { res = await fetch(path, opts); } catch (e) { throw new Error(`${method} ${path}: ${e.message}`); }
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch (e) { /* not JSON */ }
  if (!res.ok) {
    const why = data && data.error ? data.error : text.slice(0, 300) || res.statusText;
    throw new Error(`${method} ${path} → ${res.status}: ${why}`);
  }
  return data;
}
const qs = (o) => new URLSearchParams(Object.entries(o).filter(([, v]) => v !== '' && v != null)).toString();

/* ---------- messages area ---------- */
function flash(text, kind = 'error', keep = false) {
  if (keep) { S.pending.push([text, kind]); return; }
  const box = el('div', { class: kind }, el('span', { class: 'text' }, text),
    el('button', { type: 'button', title: 'Dismiss', onclick: () => box.remove() }, '×'));
  $('flash').append(box);
  if (kind === 'ok') setTimeout(() => box.remove(), 8000);
}
const report = (e) => flash(e && e.message ? e.message : String(e));

/* ---------- charts ---------- */
// points: [[unix_ms, value], ...]. A line chart with max / 0 on the value axis and the first
// and last times on the time axis.
function lineChart(points, o = {}) {
  const w = o.width || 560, h = o.height || 160;
  const pl = 52, pr = 12, pt = 10, pb = 22;
  const pts = (points || []).filter((p) => Array.isArray(p) && p[1] != null);
  const last = pts.length ? pts[pts.length - 1][1] : null;
  const root = svg('svg', { class: 'chart', id: o.id, width: w, height: h, viewBox: `0 0 ${w} ${h}`,
    role: 'img', 'aria-label': o.label || 'chart', 'data-points': pts.length, 'data-last': last == null ? '' : last });
  const x0 = pl, x1 = w - pr, y0 = h - pb, y1 = pt;
  root.append(svg('line', { class: 'axis', x1: x0, y1: y0, x2: x1, y2: y0 }));
  root.append(svg('line', { class: 'axis', x1: x0, y1: y1, x2: x0, y2: y0 }));
  if (!pts.length) {
    root.append(svg('text', { x: (x0 + x1) / 2, y: (y0 + y1) / 2, 'text-anchor': 'middle' }, 'no data yet'));
    return root;
  }
  const ts = pts.map((p) => p[0]), vs = pts.map((p) => Number(p[1]));
  const tMin = Math.min(...ts), tMax = Math.max(...ts);
  const hi = Math.max(...vs), vMin = Math.min(0, ...vs), vMax = hi > vMin ? hi : vMin + 1;
  root.setAttribute('data-max', hi);
  const X = (t) => (tMax === tMin ? (x0 + x1) / 2 : x0 + ((t - tMin) / (tMax - tMin)) * (x1 - x0));
  const Y = (v) => y0 - ((v - vMin) / (vMax - vMin)) * (y0 - y1);
  const fmt = o.fmt || fmtRate;
  root.append(svg('line', { class: 'grid', x1: x0, y1: y1, x2: x1, y2: y1 }),
    svg('text', { x: x0 - 6, y: y1 + 4, 'text-anchor': 'end' }, fmt(vMax)),
    svg('text', { x: x0 - 6, y: y0, 'text-anchor': 'end' }, fmt(vMin)),
    svg('text', { x: x0, y: h - 6 }, fmtTime(tMin)),
    svg('text', { x: x1, y: h - 6, 'text-anchor': 'end' }, fmtTime(tMax)));
  if (o.label) root.append(svg('text', { x: (x0 + x1) / 2, y: h - 6, 'text-anchor': 'middle' }, o.label));
  if (pts.length === 1) {
    root.append(svg('circle', { class: 'dot', cx: X(ts[0]), cy: Y(vs[0]), r: 3 }));
  } else {
    const line = pts.map((p, i) => `${i ? 'L' : 'M'}${X(p[0]).toFixed(1)},${Y(Number(p[1])).toFixed(1)}`).join('');
    root.append(svg('path', { class: 'area', d: `${line}L${X(tMax).toFixed(1)},${y0}L${X(tMin).toFixed(1)},${y0}Z` }));
    root.append(svg('path', { class: 'line', d: line }));
  }
  root.append(svg('title', null, `${o.label || ''} last ${fmt(last)}`));
  return root;
}

/* ---------- router ---------- */
const routes = [
  [/^\/$/, overviewPage, 'overview'],
  [/^\/topics$/, topicsPage, 'topics'],
  [/^\/topics\/(.+)$/, topicPage, 'topics'],
  [/^\/messages\/(.+)$/, messagesPage, 'topics'],
  [/^\/groups$/, groupsPage, 'groups'],
  [/^\/groups\/(.+)$/, groupPage, 'groups'],
  [/^\/throughput$/, throughputPage, 'throughput'],
];
function stopTimers() { S.timers.forEach(clearInterval); S.timers = []; }
function every(ms, fn) { S.timers.push(setInterval(fn, ms)); }
function route() {
  stopTimers();
  const gen = ++S.gen;
  const alive = () => gen === S.gen;
  $('flash').replaceChildren();
  S.pending.splice(0).forEach(([t, k]) => flash(t, k));
  const raw = location.hash.replace(/^#/, '') || '/';
  const [path, query] = raw.split('?');
  const params = new URLSearchParams(query || '');
  for (const [re, page, nav] of routes) {
    const m = path.match(re);
    if (!m) continue;
    document.querySelectorAll('#nav nav a').forEach((a) => a.classList.toggle('active', a.dataset.nav === nav));
    let arg = m[1];
    if (arg !== undefined) { try { arg = decodeURIComponent(arg); } catch (e) { /* keep raw */ } }
    show(muted('p', 'Loading…'));
    Promise.resolve(page({ alive, arg, params })).catch((e) => {
      if (!alive()) return;
      report(e);
      show(muted('p', 'Could not load this page.'));
    });
    return;
  }
  show(el('h1', null, 'Not found'), el('p', null, link('#/', 'Back to the overview')));
}
function setReadOnly(ro) {
  S.readOnly = !!ro;
  $('read-only-badge').hidden = !S.readOnly;
}
function pager(prefix, st, total, count, reload) {
  const from = total ? st.offset + 1 : 0, to = st.offset + count;
  return el('div', { class: 'pager' },
    el('button', { id: `${prefix}-prev`, type: 'button', disabled: st.offset <= 0,
      onclick: () => { st.offset = Math.max(0, st.offset - st.limit); reload(); } }, '‹ Prev'),
    el('span', { id: `${prefix}-page`, class: 'muted' }, `${fmtNum(from)}–${fmtNum(to)} of ${fmtNum(total)}`),
    el('button', { id: `${prefix}-next`, type: 'button', disabled: st.offset + count >= total,
      onclick: () => { st.offset += st.limit; reload(); } }, 'Next ›'));
}
const refreshed = () => muted('p', 'Refreshes every 5 s; updated ', el('span', { id: 'refreshed-at' }, fmtTime(Date.now())), '.');
async function live(ctx, draw) {
  await draw();
  every(5000, () => draw().catch((e) => { if (ctx.alive()) report(e); }));
}
function debounce(fn, ms) { let t; return (...a) => { clearTimeout(t); t = setTimeout(() => fn(...a), ms); }; }
function parseLines(text) {
  const out = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    const i = line.indexOf('=');
    if (i <= 0) throw new Error(`not NAME=VALUE: ${line}`);
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}
function stat(label, value, id) {
  return el('div', { class: 'stat' }, el('div', { class: 'label' }, label), el('div', { class: 'value', id }, value));
}

/* ---------- #/ overview ---------- */
function partitionList(id, parts, count) {
  const rows = parts.map((p) => el('tr', { 'data-topic': p.topic, 'data-partition': p.partition },
    td(link(`#/topics/${E(p.topic)}`, p.topic), 'topic'), numTd(p.partition, 'partition'),
    numTd(leader(p.leader), 'leader'),
    td(fmtList(p.replicas), 'replicas'), td(fmtList(p.isr), 'isr')));
  const more = count > parts.length ? muted('p', `Showing ${parts.length} of ${count}.`) : null;
  return [table(id, ['Topic', 'Partition#', 'Leader#', 'Replicas', 'ISR'], rows, 'None'), more];
}
async function overviewPage({ alive }) {
  const o = await api('GET', '/api/overview');
  if (!alive()) return;
  S.overview = o;
  setReadOnly(o.read_only);
  const quorumOf = (b) => b.quorum_role == null ? '–'
    : b.quorum_role + (b.quorum_lag ? ` (${fmtNum(b.quorum_lag)} behind)` : '');
  const brokers = (o.brokers || []).map((b) => el('tr', { 'data-broker': b.id },
    numTd(b.id, 'id'), td(b.roles || 'broker', 'roles'),
    td(badge(b.state === 'fenced' ? 'bad' : '', b.state || 'running'), 'state'),
    td(b.port ? `${b.host}:${b.port}` : '–', 'address', 'mono'), td(b.rack || '–', 'rack'),
    td(b.controller ? badge('', 'yes') : 'no', 'controller'), td(quorumOf(b), 'quorum'),
    numTd(fmtNum(b.replicas), 'replicas'), numTd(fmtNum(b.leaders), 'leaders'),
    numTd(fmtBytes(b.disk_bytes), 'disk', { 'data-bytes': b.disk_bytes == null ? '' : b.disk_bytes })));
  show(
    el('h1', null, 'Cluster overview'),
    el('div', { class: 'stats' },
      stat('Cluster id', o.cluster_id || '–', 'overview-cluster-id'),
      stat('Controller', o.controller == null || o.controller < 0 ? 'none' : `node ${o.controller}`, 'overview-controller'),
      stat('This node', `node ${o.node_id}`, 'overview-node'),
      stat('Version', o.version || '–', 'overview-version'),
      stat('Topics', fmtNum(o.topics), 'overview-topics'),
      stat('Partitions', fmtNum(o.partitions), 'overview-partitions'),
      stat('Under-replicated', fmtNum(o.under_replicated_count), 'overview-under-replicated'),
      stat('Offline', fmtNum(o.offline_count), 'overview-offline')),
    el('h2', null, 'Nodes'),
    table('brokers-table', ['Id#', 'Roles', 'State', 'Host:port', 'Rack', 'Controller', 'Metadata quorum',
      'Replicas#', 'Leaders#', 'Disk use#'], brokers, 'No brokers'),
    el('h2', null, `Under-replicated partitions (${fmtNum(o.under_replicated_count)})`),
    partitionList('under-replicated', o.under_replicated || [], o.under_replicated_count || 0),
    el('h2', null, `Offline partitions (${fmtNum(o.offline_count)})`),
    partitionList('offline-partitions', o.offline || [], o.offline_count || 0));
}

/* ---------- #/topics ---------- */
// A paged list with a filter box (topics, groups): `url` gives the page `st` describes,
// `draw` the table of its items.
function pagedList(ctx, name, st, url, draw, extra) {
  const box = el('div'), slot = el('div');
  let seq = 0;
  const load = async () => {
    const mine = ++seq;
    try {
      const r = await api('GET', url());
      if (!ctx.alive() || mine !== seq) return;
      if (st.offset > 0 && st.offset >= r.total) { st.offset = Math.max(0, r.total - (r.total % st.limit || st.limit)); return load(); }
      slot.replaceChildren(pager(name, st, r.total, r[name].length, load));
      box.replaceChildren(draw(r[name]));
    } catch (e) { if (ctx.alive()) report(e); }
  };
  const again = () => { st.offset = 0; load(); };
  const filter = el('input', { id: `${name}-filter`, type: 'search', placeholder: `Filter ${name}…`, value: st.filter,
    oninput: debounce(() => { st.filter = filter.value.trim(); again(); }, 250) });
  return { load, box, bar: el('div', { class: 'toolbar' }, filter, extra && extra(again), el('span', { class: 'spacer' }), slot) };
}
async function topicsPage(ctx) {
  const st = S.topics;
  const list = pagedList(ctx, 'topics', st, () => '/api/topics?' + qs(st), (topics) => table('topics-table',
    ['Name', 'Partitions#', 'RF#', 'Under-replicated#', 'Size#', 'Msg/s#'], topics.map((t) => el('tr', { 'data-topic': t.name },
      td([link(`#/topics/${E(t.name)}`, t.name), t.internal ? [' ', badge('', 'internal')] : null], 'name'),
      numTd(fmtNum(t.partitions), 'partitions'), numTd(fmtNum(t.replication_factor), 'rf'),
      numTd(t.under_replicated ? badge('bad', String(t.under_replicated)) : '0', 'under-replicated'),
      numTd(fmtBytes(t.bytes), 'bytes'),
      numTd(fmtRate(t.messages_per_sec), 'rate', { 'data-rate': t.messages_per_sec == null ? '' : t.messages_per_sec }))),
    st.filter ? 'No topic matches the filter' : 'No topics'),
  (again) => el('label', null, el('input', { id: 'topics-internal', type: 'checkbox', checked: st.internal,
    onchange: (ev) => { st.internal = ev.target.checked; again(); } }), ' show internal topics'));
  show(el('h1', null, 'Topics'), S.readOnly ? null : createTopicForm(list.load), list.bar, list.box);
  await list.load();
}
function createTopicForm(reload) {
  const name = el('input', { id: 'create-topic-name', type: 'text', required: true, placeholder: 'my-topic', autocomplete: 'off' });
  const parts = el('input', { id: 'create-topic-partitions', type: 'number', min: 1, value: '1', required: true });
  const rf = el('input', { id: 'create-topic-rf', type: 'number', min: 1, value: '1', required: true });
  const configs = el('textarea', { id: 'create-topic-configs', placeholder: 'retention.ms=86400000\ncleanup.policy=compact' });
  const submit = el('button', { id: 'create-topic-submit', type: 'submit', class: 'primary' }, 'Create topic');
  const form = el('form', { id: 'create-topic-form', class: 'grid', onsubmit: async (ev) => {
    ev.preventDefault();
    let body;
    try {
      body = { name: name.value.trim(), partitions: parseInt(parts.value, 10), replication_factor: parseInt(rf.value, 10), configs: parseLines(configs.value) };
      if (!body.name) throw new Error('a topic needs a name');
    } catch (e) { return report(e); }
    submit.disabled = true;
    try {
      await api('POST', '/api/topics', body);
      flash(`Topic ${body.name} created.`, 'ok');
      name.value = ''; configs.value = '';
      await reload();
    } catch (e) { report(e); } finally { submit.disabled = false; }
  } },
  el('label', null, 'Name', name), el('label', null, 'Partitions', parts), el('label', null, 'Replication factor', rf),
  el('label', { class: 'wide' }, 'Configs (optional, one NAME=VALUE a line)', configs),
  el('div', { class: 'actions' }, submit));
  return el('details', { class: 'card', id: 'create-topic' }, el('summary', null, 'Create topic'), form);
}

/* ---------- #/topics/NAME ---------- */
function partStatus(p) {
  // offline: no leader (the API may give a boolean or the list of offline replicas)
  const down = Array.isArray(p.offline) ? p.offline : [];
  if (p.offline === true || p.leader == null || p.leader < 0) return badge('bad', 'offline');
  const note = down.length ? muted('span', ` replicas offline: ${down.join(', ')}`) : null;
  if ((p.isr || []).length < (p.replicas || []).length) return [badge('warn', 'under-replicated'), note];
  return [badge('good', 'ok'), note];
}
async function topicPage(ctx) {
  const name = ctx.arg;
  const t = await api('GET', `/api/topics/${E(name)}`);
  if (!ctx.alive()) return;
  const enc = E(name);
  const parts = (t.partitions || []).map((p) => el('tr', { 'data-partition': p.partition },
    numTd(p.partition, 'partition'), numTd(leader(p.leader), 'leader'),
    numTd(p.leader_epoch, 'epoch'), td(fmtList(p.replicas), 'replicas'), td(fmtList(p.isr), 'isr'),
    td(partStatus(p), 'status'),
    numTd(fmtNum(p.log_start_offset), 'log-start'), numTd(fmtNum(p.high_watermark), 'high-watermark'),
    numTd(fmtBytes(p.bytes), 'bytes'),
    td(link(`#/messages/${enc}?partition=${p.partition}`, 'browse'), 'browse')));
  const configBox = el('div');
  const renderConfigs = () => {
    const all = t.configs || [];
    const shown = S.showAllConfigs ? all : all.filter((c) => c.source !== 'DEFAULT_CONFIG');
    configBox.replaceChildren(table('configs-table', ['Name', 'Value', 'Source'], shown.map((c) =>
      el('tr', { 'data-config': c.name }, td(c.name, 'name', 'mono'),
        td(c.value == null ? el('span', { class: 'null' }, 'null') : c.value, 'value', 'mono'),
        td(c.source, 'source', 'muted'))), S.showAllConfigs ? 'No configs' : 'Every config has its default value'));
  };
  renderConfigs();
  const toggle = el('input', { id: 'configs-show-all', type: 'checkbox', checked: S.showAllConfigs,
    onchange: () => { S.showAllConfigs = toggle.checked; renderConfigs(); } });
  t.partitions = t.partitions || [];
  const total = t.partitions.reduce((a, p) => a + Math.max(0, (p.high_watermark || 0) - (p.log_start_offset || 0)), 0);
  const bytes = t.partitions.some((p) => p.bytes != null) ? t.partitions.reduce((a, p) => a + (p.bytes || 0), 0) : null;
  const tp = t.throughput || [];
  show(
    el('h1', null, el('span', { id: 'topic-name' }, t.name), t.internal ? [' ', badge('', 'internal')] : null),
    el('div', { class: 'stats' }, stat('Topic id', t.id || '–', 'topic-id'), stat('Partitions', fmtNum(t.partitions.length)),
      stat('Messages (log start to end)', fmtNum(total)), stat('Size', fmtBytes(bytes)),
      stat('Msg/s', fmtRate(tp.length ? tp[tp.length - 1][1] : null), 'topic-rate')),
    el('div', { class: 'toolbar' }, link(`#/messages/${enc}`, 'Browse messages →', { id: 'browse-messages' })),
    el('h2', null, 'Throughput (last 5 minutes, msg/s)'),
    el('div', { class: 'card chart-card' }, lineChart(tp, { id: 'topic-throughput-chart', width: 720, height: 170, label: 'msg/s' })),
    el('h2', null, 'Partitions'),
    table('partitions-table', ['Partition#', 'Leader#', 'Epoch#', 'Replicas', 'ISR', 'Status',
      'Log start#', 'High watermark#', 'Size#', ''], parts, 'No partitions'),
    el('h2', null, 'Configs'),
    el('div', { class: 'toolbar' }, el('label', null, toggle, ' show all configs, defaults included')),
    configBox,
    S.readOnly ? null : alterConfigForm(name),
    S.readOnly ? null : el('div', { class: 'card' }, el('h2', null, 'Delete topic'),
      el('button', { id: 'delete-topic', type: 'button', class: 'danger', onclick: async (ev) => {
        if (!confirm(`Delete topic "${name}"? Its records are lost.`)) return;
        ev.target.disabled = true;
        try {
          await api('DELETE', `/api/topics/${enc}`);
          flash(`Topic ${name} deleted.`, 'ok', true);
          location.hash = '#/topics';
        } catch (e) { report(e); ev.target.disabled = false; }
      } }, `Delete ${name}`)));
}
function alterConfigForm(name) {
  const set = el('textarea', { id: 'alter-config-set', placeholder: 'retention.ms=604800000' });
  const del = el('input', { id: 'alter-config-delete', type: 'text', placeholder: 'cleanup.policy, …' });
  const submit = el('button', { id: 'alter-config-submit', type: 'submit', class: 'primary' }, 'Apply');
  return el('div', { class: 'card' }, el('h2', null, 'Alter configs'),
    el('form', { id: 'alter-config-form', class: 'grid', onsubmit: async (ev) => {
      ev.preventDefault();
      let body;
      try {
        body = { set: parseLines(set.value), delete: del.value.split(/[\s,]+/).filter(Boolean) };
        if (!Object.keys(body.set).length && !body.delete.length) throw new Error('nothing to set or delete');
      } catch (e) { return report(e); }
      submit.disabled = true;
      try {
        await api('POST', `/api/topics/${E(name)}/configs`, body);
        flash(`Configs of ${name} changed.`, 'ok', true);
        route();
      } catch (e) { report(e); submit.disabled = false; }
    } },
    el('label', { class: 'wide' }, 'Set (one NAME=VALUE a line)', set),
    el('label', { class: 'wide' }, 'Delete (back to the default; names separated by commas)', del),
    el('div', { class: 'actions' }, submit)));
}

/* ---------- #/messages/TOPIC ---------- */
function b64bytes(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
const utf8 = new TextDecoder('utf-8', { fatal: true }), lossy = new TextDecoder('utf-8');
function render(b64, format, tryJson) {
  if (b64 == null) return el('span', { class: 'null' }, 'null');
  let bytes;
  try { bytes = b64bytes(b64); } catch (e) { return el('span', { class: 'note' }, 'not base64: ' + b64); }
  if (format === 'hex') {
    return el('pre', { class: 'hex' }, Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(' '));
  }
  let text;
  try { text = utf8.decode(bytes); } catch (e) {
    return el('div', null, el('pre', null, lossy.decode(bytes)), el('span', { class: 'note' }, 'not UTF-8: see hex'));
  }
  if (format === 'json' && tryJson) {
    try { return el('pre', { class: 'json' }, JSON.stringify(JSON.parse(text), null, 2)); } catch (e) {
      return el('div', null, el('pre', null, text), el('span', { class: 'note' }, 'not JSON: shown as text'));
    }
  }
  return el('pre', null, text);
}
async function messagesPage(ctx) {
  const topic = ctx.arg, enc = E(topic);
  const t = await api('GET', `/api/topics/${enc}`);
  if (!ctx.alive()) return;
  const want = parseInt(ctx.params.get('partition') || '0', 10);
  const partition = el('select', { id: 'messages-partition' }, (t.partitions || []).map((p) =>
    el('option', { value: p.partition, selected: p.partition === want }, `${p.partition}`)));
  const start = el('select', { id: 'messages-start' }, el('option', { value: 'newest' }, 'newest'),
    el('option', { value: 'offset' }, 'from offset'), el('option', { value: 'timestamp' }, 'from time'));
  const offset = el('input', { id: 'messages-offset', type: 'number', min: 0, value: '0', style: 'width:110px' });
  const stamp = el('input', { id: 'messages-timestamp', type: 'datetime-local', step: 1 });
  const limit = el('input', { id: 'messages-limit', type: 'number', min: 1, max: 500, value: '50', style: 'width:80px' });
  const format = el('select', { id: 'messages-format' }, ['text', 'json', 'hex'].map((f) =>
    el('option', { value: f, selected: f === S.format }, f === 'json' ? 'JSON' : f)));
  const isolation = el('select', { id: 'messages-isolation', title: 'isolation.level' },
    el('option', { value: 'read_uncommitted' }, 'uncommitted'), el('option', { value: 'read_committed' }, 'committed'));
  const info = el('span', { id: 'messages-info', class: 'muted' });
  const box = el('div');
  let last = [];
  const sync = () => { offset.hidden = start.value !== 'offset'; stamp.hidden = start.value !== 'timestamp'; };
  start.onchange = sync;
  const draw = () => {
    const rows = last.map((m) => el('tr', { 'data-partition': m.partition, 'data-offset': m.offset },
      numTd(m.offset, 'offset'), td(fmtIso(m.timestamp), 'timestamp', 'mono'),
      td(render(m.key, S.format, false), 'key'),
      td([render(m.value, S.format, true), m.truncated ? badge('warn', 'truncated at 64 KiB') : null], 'value'),
      td((m.headers || []).map((h) => el('div', { class: 'mono' }, el('b', null, `${h.key}: `),
        h.value == null ? el('span', { class: 'null' }, 'null') : render(h.value, S.format === 'hex' ? 'hex' : 'text', false).textContent)), 'headers')));
    const next = el('button', { id: 'messages-next', type: 'button', disabled: !last.length, onclick: () => {
      start.value = 'offset'; offset.value = String(last[last.length - 1].offset + 1); sync(); load();
    } }, 'Next page ›');
    box.replaceChildren(table('messages-table', ['Offset#', 'Timestamp', 'Key', 'Value', 'Headers'], rows, 'No messages here'),
      el('div', { class: 'toolbar' }, el('span', { class: 'spacer' }), next));
  };
  format.onchange = () => { S.format = format.value; draw(); };
  let seq = 0;
  const load = async () => {
    const mine = ++seq;
    const q = { partition: partition.value, limit: Math.min(500, Math.max(1, parseInt(limit.value, 10) || 50)),
      isolation: isolation.value };
    if (start.value === 'offset') q.offset = Math.max(0, parseInt(offset.value, 10) || 0);
    if (start.value === 'timestamp') {
      const ms = new Date(stamp.value).getTime();
      if (!stamp.value || isNaN(ms)) return report(new Error('choose a date and time to start from'));
      q.timestamp = ms;
    }
    try {
      const r = await api('GET', `/api/topics/${enc}/messages?` + qs(q));
      if (!ctx.alive() || mine !== seq) return;
      last = r.messages || [];
      const stable = r.last_stable_offset != null && r.last_stable_offset !== r.high_watermark
        ? `, last stable ${fmtNum(r.last_stable_offset)}` : '';
      info.textContent = `partition ${r.partition}: log start ${fmtNum(r.log_start_offset)}, high watermark ${fmtNum(r.high_watermark)}${stable}; ${last.length} shown`;
      draw();
    } catch (e) { if (ctx.alive()) report(e); }
  };
  partition.onchange = load;
  sync();
  show(el('h1', null, 'Messages of ', link(`#/topics/${enc}`, topic)),
    el('form', { class: 'toolbar card', id: 'messages-form', onsubmit: (ev) => { ev.preventDefault(); load(); } },
      el('label', { class: 'field' }, 'Partition', partition), el('label', { class: 'field' }, 'Start', start),
      offset, stamp, el('label', { class: 'field' }, 'Limit', limit),
      el('label', { class: 'field' }, 'Isolation', isolation),
      el('button', { id: 'messages-load', type: 'submit', class: 'primary' }, 'Load'),
      el('span', { class: 'spacer' }), el('label', { class: 'field' }, 'Format', format)),
    info, box);
  await load();
}

/* ---------- #/groups ---------- */
async function groupsPage(ctx) {
  const st = S.groups;
  const list = pagedList(ctx, 'groups', st, () => '/api/groups?' + qs(st), (groups) => table('groups-table',
    ['Group', 'State', 'Type', 'Protocol type', 'Lag#'], groups.map((g) => el('tr', { 'data-group': g.group },
      td(link(`#/groups/${E(g.group)}`, g.group), 'group'), td(stateBadge(g.state), 'state'),
      td(g.type || '–', 'type'), td(g.protocol_type || '–', 'protocol-type'),
      numTd(fmtNum(g.lag), 'lag', { 'data-lag': g.lag == null ? '' : g.lag }))),
    st.filter ? 'No group matches the filter' : 'No consumer groups'));
  show(el('h1', null, 'Consumer groups'), list.bar, list.box);
  await list.load();
}

function stateBadge(state) {
  const cls = { Stable: 'good', Empty: '', Dead: 'bad', PreparingRebalance: 'warn', CompletingRebalance: 'warn',
    Assigning: 'warn', Reconciling: 'warn' }[state];
  return el('span', { class: cls == null ? 'badge' : `badge ${cls}` }, state || '–');
}

/* ---------- #/groups/ID ---------- */
async function groupPage(ctx) {
  const id = ctx.arg;
  const draw = async () => {
    const g = await api('GET', `/api/groups/${E(id)}`);
    if (!ctx.alive()) return;
    const offsets = g.offsets || [];
    const known = offsets.filter((o) => o.lag != null);
    const lag = known.length ? known.reduce((a, o) => a + o.lag, 0) : null;
    const members = (g.members || []).map((m) => el('tr', { 'data-member': m.member_id },
      td(m.member_id, 'member', 'mono'), td(m.client_id, 'client'), td(m.host, 'host', 'mono'),
      td((m.assignment || []).map((a) => el('div', null, `${a.topic}: ${fmtList(a.partitions)}`)), 'assignment')));
    const rows = offsets.map((o) => el('tr', { 'data-topic': o.topic, 'data-partition': o.partition },
      td(link(`#/topics/${E(o.topic)}`, o.topic), 'topic'), numTd(o.partition, 'partition'),
      numTd(fmtNum(o.committed_offset), 'committed'), numTd(fmtNum(o.log_end_offset), 'log-end'),
      numTd(fmtNum(o.lag), 'lag', { 'data-lag': o.lag == null ? '' : o.lag }),
      td(o.member_id || '–', 'member', 'mono muted')));
    show(
      el('h1', null, 'Group ', el('span', { id: 'group-name' }, g.group)),
      el('div', { class: 'stats' }, stat('State', g.state, 'group-state'), stat('Type', g.type || '–', 'group-type'),
        stat('Coordinator', g.coordinator == null ? '–' : `node ${g.coordinator}`, 'group-coordinator'),
        stat('Members', fmtNum((g.members || []).length)),
        el('div', { class: 'stat' }, el('div', { class: 'label' }, 'Total lag'),
          el('div', { class: 'value', id: 'group-lag', 'data-lag': lag == null ? '' : lag }, fmtNum(lag)))),
      el('h2', null, 'Lag over the last hour'),
      el('div', { class: 'card chart-card' }, lineChart(g.lag_history, { id: 'lag-chart', width: 720, height: 170, label: 'lag', fmt: (v) => fmtNum(Math.round(v)) })),
      el('h2', null, 'Members'),
      table('group-members', ['Member id', 'Client id', 'Host', 'Assignment'], members, 'No members'),
      el('h2', null, 'Committed offsets'),
      table('group-offsets', ['Topic', 'Partition#', 'Committed#', 'Log end#', 'Lag#', 'Member'], rows, 'No committed offsets'),
      refreshed());
  };
  await live(ctx, draw);
}

/* ---------- #/throughput ---------- */
async function throughputPage(ctx) {
  const draw = async () => {
    const r = await api('GET', '/api/throughput');
    if (!ctx.alive()) return;
    const rows = (r.topics || []).map((t) => el('tr', { 'data-topic': t.topic, 'data-rate': t.messages_per_sec == null ? '' : t.messages_per_sec },
      td(link(`#/topics/${E(t.topic)}`, t.topic), 'topic'),
      numTd(fmtRate(t.messages_per_sec), 'rate'),
      numTd(fmtRate(Math.max(0, ...(t.history || []).map((p) => p[1] || 0))), 'peak'),
      td(lineChart(t.history, { width: 720, height: 84, label: 'msg/s' }), 'chart')));
    show(el('h1', null, 'Throughput'),
      muted('p', `The ${rows.length < 20 ? rows.length : 20} busiest topics, messages per second over the last five minutes (sampled every ${(r.interval_ms || 5000) / 1000} s).`),
      table('throughput-table', ['Topic', 'Msg/s#', 'Peak#', 'Last 5 minutes'], rows, 'No traffic yet'),
      refreshed());
  };
  await live(ctx, draw);
}

/* ---------- boot ---------- */
async function boot() {
  try {
    const o = await api('GET', '/api/overview');
    S.overview = o;
    setReadOnly(o.read_only);
    $('nav-cluster').textContent = `${o.cluster_id || ''} · node ${o.node_id}${o.version ? ' · ' + o.version : ''}`;
  } catch (e) { flash(e.message, 'error', true); }
  window.addEventListener('hashchange', route);
  route();
}
boot();
