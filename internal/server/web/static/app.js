// Haystack web UI. No framework and no build: this file is served as is.
//
// Safety rule for everything below: log data (lines, labels, error
// messages, the query) reaches the DOM only through textContent,
// createTextNode, attribute setters and .value, never through an API that
// parses HTML (web_test.go lists them and fails if one appears here).
'use strict';
(function () {
  const PAGE = 500;         // rows per search request unless the URL says limit=
  const TAIL_CAP = 1000;    // live tail keeps at most this many rows
  const HL_REGEX_MAX = 1000; // characters of a line a |~ highlight regex runs over
  const TRUNC = 1000;       // characters of a line shown before "expand"
  const META_SHOWN = 3; // metadata pairs a row shows before a "+N" button
  const MAX_MARKS = 500;    // highlights per line, against pathological regexes
  const FACET_VALUES = 20;  // values shown per label in the sidebar
  const SIDE_DELAY = 250;   // ms the histogram and facets wait for the search to answer
  const RANGES = { '15m': 'now-15m', '1h': 'now-1h', '24h': 'now-24h', '7d': 'now-7d' };
  const DEFAULTS = { q: '', from: 'now-24h', to: 'now', fold: false, dir: 'backward', live: false, limit: PAGE };

  const $ = (id) => document.getElementById(id);
  const el = {
    form: $('search'), q: $('q'), range: $('range'), custom: $('custom'), from: $('from'), to: $('to'),
    fold: $('fold'), dir: $('dir'), live: $('live'), permalink: $('permalink'), facets: $('facet-list'),
    hits: $('hits'), zoomout: $('zoomout'), hist: $('hist'), status: $('status'), rows: $('rows'),
    more: $('more'), moreFoot: $('more-foot'), stop: $('stop'),
  };

  // ---- URL state -------------------------------------------------------

  function validTime(s) { return /^now(-\d+[smhdw])?$/.test(s) || /^\d{1,16}$/.test(s); }

  function readURL() {
    const p = new URLSearchParams(location.search);
    const s = Object.assign({}, DEFAULTS);
    s.q = p.get('q') || '';
    const from = p.get('from'), to = p.get('to');
    if (from && validTime(from)) s.from = from;
    if (to && validTime(to)) s.to = to;
    s.fold = p.get('case') === '1';
    s.dir = p.get('dir') === 'forward' ? 'forward' : 'backward';
    s.live = p.get('live') === '1';
    const lim = parseInt(p.get('limit') || '', 10);
    if (lim >= 1 && lim <= 5000) s.limit = lim;
    return s;
  }

  function urlFor(s) {
    const p = new URLSearchParams();
    if (s.q) p.set('q', s.q);
    if (s.from !== DEFAULTS.from) p.set('from', s.from);
    if (s.to !== DEFAULTS.to) p.set('to', s.to);
    if (s.fold) p.set('case', '1');
    if (s.dir !== DEFAULTS.dir) p.set('dir', s.dir);
    if (s.live) p.set('live', '1');
    if (s.limit !== DEFAULTS.limit) p.set('limit', String(s.limit));
    const qs = p.toString();
    return qs ? '?' + qs : location.pathname;
  }

  const UNIT_MS = { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3, w: 7 * 86400e3 };

  // toMs resolves a URL time ("now", "now-1h", unix ms) against now.
  function toMs(t, now) {
    if (t === 'now') return now;
    const m = /^now-(\d+)([smhdw])$/.exec(t);
    if (m) return now - Number(m[1]) * UNIT_MS[m[2]];
    return Number(t);
  }

  // ---- controls <-> state ---------------------------------------------

  function showState(s) {
    el.q.value = s.q;
    el.fold.checked = s.fold;
    el.dir.value = s.dir;
    el.live.checked = s.live;
    let preset = 'custom';
    if (s.to === 'now') for (const k in RANGES) if (RANGES[k] === s.from) preset = k;
    el.range.value = preset;
    el.custom.hidden = preset !== 'custom';
    if (preset === 'custom') {
      const now = Date.now();
      el.from.value = localInput(toMs(s.from, now));
      el.to.value = localInput(toMs(s.to, now));
    }
    el.fold.disabled = isLogQL(s.q);
    el.permalink.href = urlFor(s);
    // Tabs (and history entries) say what they search.
    document.title = s.q ? s.q.slice(0, 80) + ' — Haystack' : 'Haystack';
  }

  function stateFromControls() {
    const s = Object.assign({}, state);
    s.q = el.q.value;
    s.fold = el.fold.checked;
    s.dir = el.dir.value === 'forward' ? 'forward' : 'backward';
    s.live = el.live.checked;
    if (el.range.value in RANGES) {
      s.from = RANGES[el.range.value];
      s.to = 'now';
    } else {
      // The inputs show whole seconds: read back only the one the user
      // changed, so that the other keeps its milliseconds (a bar click
      // or a drag sets them to the millisecond).
      const now = Date.now();
      if (el.from.value !== localInput(toMs(state.from, now))) {
        const f = Date.parse(el.from.value);
        if (!isNaN(f)) s.from = String(f);
      }
      if (el.to.value !== localInput(toMs(state.to, now))) {
        const t = Date.parse(el.to.value);
        if (!isNaN(t)) s.to = String(t);
      }
    }
    return s;
  }

  function pad(n, w) { return String(n).padStart(w || 2, '0'); }

  function localInput(ms) {
    const d = new Date(ms);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + 'T' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds());
  }

  // zoneName names the browser's zone and its offset at ms, as
  // "Asia/Kolkata (UTC+05:30)": the times on the page are in it, and two
  // responders reading one permalink in two zones see different times.
  function zoneName(ms) {
    const off = -new Date(ms).getTimezoneOffset(), a = Math.abs(off);
    const utc = 'UTC' + (off < 0 ? '-' : '+') + pad(Math.floor(a / 60)) + ':' + pad(a % 60);
    const name = Intl.DateTimeFormat().resolvedOptions().timeZone;
    return name && name !== 'UTC' ? name + ' (' + utc + ')' : utc;
  }

  function fmtTime(ms) {
    const d = new Date(ms);
    return d.getFullYear() + '-' + pad(d.getMonth() + 1) + '-' + pad(d.getDate()) + ' ' +
      pad(d.getHours()) + ':' + pad(d.getMinutes()) + ':' + pad(d.getSeconds()) + '.' + pad(d.getMilliseconds(), 3);
  }

  // ---- LogQL helpers ----------------------------------------------------

  function isLogQL(q) { return q.trimStart().startsWith('{'); }

  // readString reads a Go string literal ("..." or `...`) at s[i]:
  // {value, end} or null when it is not one (or uses an escape we skip).
  function readString(s, i) {
    if (s[i] === '`') {
      const j = s.indexOf('`', i + 1);
      return j < 0 ? null : { value: s.slice(i + 1, j), end: j + 1 };
    }
    if (s[i] !== '"') return null;
    let out = '';
    for (let j = i + 1; j < s.length; j++) {
      const c = s[j];
      if (c === '"') return { value: out, end: j + 1 };
      if (c === '\n') return null;
      if (c !== '\\') { out += c; continue; }
      const e = s[++j];
      const simple = { n: '\n', t: '\t', r: '\r', a: '\x07', b: '\b', f: '\f', v: '\v', '\\': '\\', '"': '"', "'": "'" };
      if (e in simple) { out += simple[e]; continue; }
      const len = { x: 2, u: 4, U: 8 }[e];
      if (!len) return null;
      const hex = s.slice(j + 1, j + 1 + len);
      if (!/^[0-9a-fA-F]+$/.test(hex) || hex.length !== len) return null;
      const cp = parseInt(hex, 16);
      if (e === 'x' && cp > 0x7f) return null; // a raw byte, not a character
      if (cp > 0x10ffff) return null;
      out += String.fromCodePoint(cp);
      j += len;
    }
    return null;
  }

  // selectorEnd returns the index just past the stream selector's '}', or -1.
  function selectorEnd(q) {
    let i = q.indexOf('{');
    if (i < 0) return -1;
    for (i++; i < q.length; i++) {
      const c = q[i];
      if (c === '"' || c === '`') {
        const r = readString(q, i);
        if (!r) return -1;
        i = r.end - 1;
      } else if (c === '}') return i + 1;
    }
    return -1;
  }

  // backtracks reports whether a pattern has a repeated group that holds
  // a repetition or an alternation, as (x+x+)+y or (a|ab)*c, or more than
  // three unbounded repetitions, as x*x*x*x*y: the
  // browser's regex engine backtracks, unlike the server's RE2, and such a
  // pattern over a line an attacker logged can take minutes, freezing the
  // tab (a crafted permalink is enough). Those are not highlighted.
  function backtracks(src) {
    const risky = []; // per open group: holds a repetition or '|'
    let unbounded = 0; // * + and {n,}: more than 3 make x*x*x*x*y-like blowups
    for (let i = 0; i < src.length; i++) {
      const c = src[i];
      if (c === '\\') { i++; continue; }
      if (c === '[') {
        for (i++; i < src.length && src[i] !== ']'; i++) if (src[i] === '\\') i++;
        continue;
      }
      if ((c === '*' || c === '+' || (c === '{' && /^\{\d*,\}/.test(src.slice(i)))) && ++unbounded > 3) return true;
      if (c === '(') { risky.push(false); continue; }
      if (c === ')') {
        const inner = risky.pop();
        const next = src[i + 1];
        if (inner && (next === '*' || next === '+' || next === '{')) return true;
        if (inner && risky.length) risky[risky.length - 1] = true;
        continue;
      }
      if ((c === '*' || c === '+' || c === '{' || c === '|') && risky.length) risky[risky.length - 1] = true;
    }
    return false;
  }

  // goRegexToJS turns an RE2 pattern into a JS RegExp, or null (also for
  // patterns that backtrack badly: see backtracks).
  function goRegexToJS(src) {
    if (backtracks(src)) return null;
    let flags = 'g';
    const m = /^\(\?([imsU]+)\)/.exec(src);
    if (m) {
      if (m[1].includes('U')) return null;
      src = src.slice(m[0].length);
      if (m[1].includes('i')) flags += 'i';
      if (m[1].includes('s')) flags += 's';
      if (m[1].includes('m')) flags += 'm';
    }
    src = src.replace(/\(\?P</g, '(?<').replace(/\\z/g, '$').replace(/\\A/g, '^');
    for (const f of [flags + 'u', flags]) {
      try { return new RegExp(src, f); } catch (e) { /* try without u */ }
    }
    return null;
  }

  function escapeRegExp(s) { return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'); }

  // highlighters returns the matchers whose matches get <mark>: the literal
  // for plain text, the |= literals and |~ regexes of LogQL.
  function highlighters(q, fold) {
    if (!isLogQL(q)) {
      if (!q) return [];
      if (!fold) return [{ lit: q }];
      try { return [{ re: new RegExp(escapeRegExp(q), 'giu') }]; } catch (e) { return [{ re: new RegExp(escapeRegExp(q), 'gi') }]; }
    }
    const out = [];
    const end = selectorEnd(q);
    if (end < 0) return out;
    const s = q.slice(end);
    for (let i = 0; i < s.length; i++) {
      const c = s[i];
      if (c === '"' || c === '`') {
        const r = readString(s, i);
        if (!r) return out;
        i = r.end - 1;
        continue;
      }
      const op = s.slice(i, i + 2);
      if (op !== '|=' && op !== '|~' && op !== '!=' && op !== '!~') continue;
      i += 2;
      // One filter may list alternatives: |= "a" or "b".
      for (;;) {
        while (/\s/.test(s[i] || '')) i++;
        const r = readString(s, i);
        if (!r) { i--; break; }
        if (op === '|=' && r.value) out.push({ lit: r.value });
        if (op === '|~') { const re = goRegexToJS(r.value); if (re) out.push({ re }); }
        i = r.end;
        const m = /^\s+or\s+/.exec(s.slice(i));
        if (!m) { i--; break; }
        i += m[0].length;
      }
    }
    return out;
  }

  // ranges returns the sorted, merged [start, end) spans of text to mark.
  function ranges(text, hl) {
    const rs = [];
    for (const h of hl) {
      if (h.lit !== undefined) {
        for (let i = text.indexOf(h.lit); i >= 0 && rs.length < MAX_MARKS; i = text.indexOf(h.lit, i + h.lit.length)) {
          rs.push([i, i + h.lit.length]);
        }
      } else {
        // A regex runs over the first HL_REGEX_MAX characters only: the
        // browser's engine backtracks (user.*id.*error over a 24 KB line
        // took over 15 s), and the rest of a long line starts folded.
        const part = text.length > HL_REGEX_MAX ? text.slice(0, HL_REGEX_MAX) : text;
        h.re.lastIndex = 0;
        let m;
        while (rs.length < MAX_MARKS && (m = h.re.exec(part)) !== null) {
          if (m[0].length === 0) { h.re.lastIndex++; continue; }
          rs.push([m.index, m.index + m[0].length]);
        }
      }
    }
    rs.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const merged = [];
    for (const r of rs) {
      const last = merged[merged.length - 1];
      // Overlapping spans merge; touching ones stay two marks, so that
      // "timeouttimeout" shows both matches of "timeout".
      if (last && r[0] < last[1]) last[1] = Math.max(last[1], r[1]);
      else merged.push(r);
    }
    return merged;
  }

  // quoteGo writes s as a Go string literal (JSON's escapes are a subset).
  function quoteGo(s) { return JSON.stringify(s); }

  // withLabel returns q narrowed to label=value, or widened again when that
  // matcher is already there (clicking a pressed facet removes it).
  function withLabel(q, fold, label, value) {
    const matcher = label + '=' + quoteGo(value);
    if (!isLogQL(q)) {
      const t = q;
      if (!t) return '{' + matcher + '}';
      const filter = fold ? '|~ ' + quoteGo('(?i)' + escapeRegExp(t)) : '|= ' + quoteGo(t);
      return '{' + matcher + '} ' + filter;
    }
    const end = selectorEnd(q);
    if (end < 0) return q;
    const open = q.indexOf('{');
    const inner = q.slice(open + 1, end - 1);
    const parts = splitMatchers(inner);
    const idx = parts.findIndex((p) => p.name === label && p.op === '=');
    let kept;
    if (idx >= 0 && parts[idx].value === value) kept = parts.filter((_, i) => i !== idx).map((p) => p.text);
    else if (idx >= 0) kept = parts.map((p, i) => (i === idx ? matcher : p.text));
    else kept = parts.map((p) => p.text).concat([matcher]);
    const rest = q.slice(end);
    if (kept.length === 0) {
      // {} is not LogQL: fall back to the plain text it came from, if any.
      const m = /^\s*\|=\s*/.exec(rest);
      if (!rest.trim()) return '';
      if (m) { const r = readString(rest, m[0].length); if (r && !rest.slice(r.end).trim()) return r.value; }
    }
    return q.slice(0, open) + '{' + kept.join(', ') + '}' + rest;
  }

  // splitMatchers splits a selector's inside into matchers.
  function splitMatchers(inner) {
    const out = [];
    let i = 0;
    while (i < inner.length) {
      const m = /^[\s,]*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*/.exec(inner.slice(i));
      if (!m) break;
      const vs = i + m[0].length;
      const r = readString(inner, vs);
      if (!r) break;
      out.push({ name: m[1], op: m[2], value: r.value, text: inner.slice(i, r.end).replace(/^[\s,]+/, '') });
      i = r.end;
    }
    return out;
  }

  function activeMatchers(q) {
    if (!isLogQL(q)) return [];
    const end = selectorEnd(q);
    if (end < 0) return [];
    return splitMatchers(q.slice(q.indexOf('{') + 1, end - 1)).filter((p) => p.op === '=');
  }

  // ---- rendering rows ------------------------------------------------------

  // Control characters become visible symbols: ESC shows as ␛ (U+241B), any
  // other C0 as its Control Pictures glyph, DEL as ␡, bidi overrides and
  // isolates as <U+202E>, and so do the characters that render as nothing
  // or reorder text: soft hyphen, ALM, zero-width space and joiners, LRM,
  // RLM, word joiner and invisible operators, BOM ("pass\u200bword" must not
  // read as "password"). Tab and newline stay as they are.
  const CTL = /[\x00-\x08\x0b-\x1f\x7f\u00ad\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g;

  function ctlGlyph(c) {
    const n = c.charCodeAt(0);
    if (n < 0x20) return String.fromCharCode(0x2400 + n);
    if (n === 0x7f) return '\u2421';
    return '<U+' + n.toString(16).toUpperCase().padStart(4, '0') + '>';
  }

  function appendText(parent, s) {
    CTL.lastIndex = 0;
    let last = 0, m;
    while ((m = CTL.exec(s)) !== null) {
      if (m.index > last) parent.appendChild(document.createTextNode(s.slice(last, m.index)));
      const span = document.createElement('span');
      span.className = 'ctl';
      span.title = 'control character 0x' + m[0].charCodeAt(0).toString(16).padStart(2, '0');
      span.textContent = ctlGlyph(m[0]);
      parent.appendChild(span);
      last = m.index + 1;
    }
    if (last < s.length) parent.appendChild(document.createTextNode(s.slice(last)));
  }

  // fillLine renders text[0:limit] into node with the spans in rs marked.
  function fillLine(node, text, rs, limit) {
    node.textContent = '';
    let pos = 0;
    for (const [a, b0] of rs) {
      if (a >= limit) break;
      const b = Math.min(b0, limit);
      if (a > pos) appendText(node, text.slice(pos, a));
      const mark = document.createElement('mark');
      appendText(mark, text.slice(a, b));
      node.appendChild(mark);
      pos = b;
    }
    if (pos < limit) appendText(node, text.slice(pos, limit));
  }

  function makeRow(e, hl) {
    const row = document.createElement('div');
    row.className = 'row';
    row.dataset.ts = e.ts;
    let ms;
    try { ms = Number(BigInt(e.ts) / 1000000n); } catch (err) { ms = Date.parse(e.time); }
    const ts = document.createElement('time');
    ts.className = 'ts';
    ts.dateTime = e.time || new Date(ms).toISOString();
    ts.title = e.time || '';
    ts.textContent = fmtTime(ms);
    row.appendChild(ts);
    const labels = document.createElement('span');
    labels.className = 'labels';
    const names = Object.keys(e.labels || {}).sort();
    for (const k of names) {
      const l = document.createElement('span');
      l.className = 'lbl';
      l.title = k + '=' + e.labels[k]; // the chip may be cut short (app.css)
      appendText(l, k + '=' + e.labels[k]);
      labels.appendChild(l);
    }
    // The entry's structured metadata (API.md), after its labels. OTLP
    // entries carry a dozen pairs or more: beyond META_SHOWN, the trace
    // id stays in sight and a "+N" button shows the rest, so that a
    // page of rows stays a page of lines.
    const meta = e.metadata && typeof e.metadata === 'object' ? e.metadata : {};
    const metaChip = (k) => {
      const l = document.createElement('span');
      l.className = 'lbl meta';
      l.title = 'metadata ' + k + '=' + meta[k];
      appendText(l, k + '=' + meta[k]);
      return l;
    };
    const metaNames = Object.keys(meta).sort();
    const shown = metaNames.length <= META_SHOWN ? metaNames : metaNames.filter((k) => k === 'trace_id');
    for (const k of shown) labels.appendChild(metaChip(k));
    if (shown.length < metaNames.length) {
      const rest = metaNames.filter((k) => !shown.includes(k));
      const more = document.createElement('button');
      more.type = 'button';
      more.className = 'lbl more-meta';
      more.textContent = '+' + rest.length + ' metadata';
      more.setAttribute('aria-label', 'Show ' + rest.length + ' more metadata of this entry');
      more.addEventListener('click', () => {
        for (const k of rest) labels.insertBefore(metaChip(k), more);
        more.remove();
      });
      labels.appendChild(more);
    }
    row.appendChild(labels);
    const line = document.createElement('span');
    line.className = 'line';
    const text = String(e.line);
    const rs = ranges(text, hl);
    if (text.length > TRUNC) {
      fillLine(line, text, rs, TRUNC);
      const more = document.createElement('button');
      more.type = 'button';
      more.className = 'expand';
      more.textContent = '… +' + (text.length - TRUNC) + ' chars';
      more.setAttribute('aria-label', 'Show the whole line (' + text.length + ' characters)');
      more.addEventListener('click', () => fillLine(line, text, rs, text.length));
      line.appendChild(more);
    } else {
      fillLine(line, text, rs, text.length);
    }
    row.appendChild(line);
    return row;
  }

  // Rows arrive faster than the screen refreshes: queue them and paint the
  // queue once per animation frame.
  // Search rows go to the bottom, tail rows to the top; both are queued and
  // painted once per frame.
  let queue = [], tops = [], frame = 0, paintDone = null;

  function enqueue(e, top) {
    (top ? tops : queue).push(e);
    // Frames do not run in a hidden tab: a live tail's queue would hold a
    // whole log storm, and the first frame back would build every row.
    // Only the newest TAIL_CAP can stay on screen.
    if (top && tops.length > TAIL_CAP) tops.splice(0, tops.length - TAIL_CAP);
    if (!frame) frame = requestAnimationFrame(paint);
  }

  function paint() {
    frame = 0;
    if (!queue.length && !tops.length) return;
    const hl = cur.hl;
    if (queue.length) {
      const frag = document.createDocumentFragment();
      for (const e of queue) frag.appendChild(makeRow(e, hl));
      el.rows.appendChild(frag);
      queue = [];
    }
    if (tops.length) {
      const frag = document.createDocumentFragment();
      for (let i = tops.length - 1; i >= 0; i--) frag.appendChild(makeRow(tops[i], hl));
      el.rows.insertBefore(frag, el.rows.firstChild);
      tops = [];
      while (el.rows.childElementCount > TAIL_CAP) el.rows.lastElementChild.remove();
    }
    if (window.__firstRowMs === undefined) {
      window.__firstRowMs = performance.now();
      performance.mark('haystack-first-row');
    }
    if (paintDone) { const f = paintDone; paintDone = null; f(); }
    updateStatus();
  }

  // ---- the current search -----------------------------------------------------

  let state = readURL();
  // cur describes the run on screen: its abort controller, resolved range
  // (ns, BigInt), counts, and paging cursor.
  let cur = { hl: [] };
  let tail = null;

  function api(path, params) {
    const p = new URLSearchParams();
    for (const k in params) if (params[k] !== undefined && params[k] !== null && params[k] !== '') p.set(k, params[k]);
    return 'api/' + path + '?' + p.toString();
  }

  function setStatus(text, isError) {
    el.status.textContent = text;
    el.status.classList.toggle('error', !!isError);
  }

  function updateStatus() {
    let shown = el.rows.childElementCount + queue.length + tops.length;
    if (tail) shown = Math.min(shown, TAIL_CAP);
    // The tail's state, for the style sheet (a lost tail is not an error)
    // and for tests; the title says why it is reconnecting.
    el.status.dataset.tail = !tail ? '' : tail.lost ? 'reconnecting' : 'live';
    if (tail && tail.lost) el.status.title = 'Live tail: ' + tail.why + '; reconnecting';
    else if (!tail && cur.phase === 'done' && cur.limited && cur.warning) el.status.title = cur.warning;
    else el.status.removeAttribute('title');
    el.status.dataset.state = cur.phase || '';
    if (cur.phase === 'error') { el.stop.hidden = !tail; return; }
    // A live tail that ended on an error says so until the next search,
    // whatever the search's own progress (its count is in the rows).
    if (cur.tailError) setStatus('Live tail: ' + cur.tailError, true);
    else if (tail) { setStatus('Live: ' + shown + ' rows' + (tail.lost ? ' (reconnecting…)' : '')); return; }
    else if (cur.phase === 'running') setStatus('Searching… ' + shown);
    else if (cur.phase === 'stopped') setStatus('Stopped at ' + shown + ' (Escape)');
    // A page the server cut for its size (hay serve --max-query-bytes)
    // says so; the title has the server's words.
    else if (cur.phase === 'done' && cur.limited) setStatus('Stopped at ' + shown + (cur.limitedBy === 'bytes' ? ' (the server\'s answer size limit)' : '') + ' — load more');
    else if (cur.phase === 'done') setStatus(shown + (shown === 1 ? ' result' : ' results') + (cur.elapsed !== undefined ? ' · ' + cur.elapsed + ' ms' : ''));
    el.stop.hidden = !(cur.phase === 'running' || tail);
    const more = cur.phase === 'done' && cur.limited && !tail;
    el.more.hidden = !more;
    el.moreFoot.hidden = !more;
  }

  function baseParams(s) {
    const p = { q: s.q };
    if (s.fold && !isLogQL(s.q)) p.fold = '1';
    return p;
  }

  // run starts a new search for s: the results first, then the histogram
  // and the facets (see SIDE_DELAY), and the live tail when it is on.
  function run(s) {
    stopAll();
    state = s;
    showState(s);
    const now = Date.now();
    const fromMs = toMs(s.from, now), toMsV = toMs(s.to, now);
    cur = {
      ac: new AbortController(), hl: highlighters(s.q, s.fold),
      startNs: BigInt(Math.floor(fromMs)) * 1000000n, endNs: BigInt(Math.floor(toMsV)) * 1000000n + 999999n,
      fromMs, toMs: toMsV, phase: 'running', limited: false,
    };
    el.rows.textContent = '';
    queue = [];
    tops = [];
    updateStatus();
    el.hits.textContent = '';
    el.hist.textContent = '';
    el.facets.textContent = '';
    el.facets.setAttribute('aria-busy', 'true');
    // The histogram and the facets scan the same data as the search: on a
    // small machine three scans at once slow the first rows down. So they
    // start when the search's answer begins (or after SIDE_DELAY ms at the
    // latest), and then run in parallel with the rest of the stream.
    const c = cur, p = Object.assign(baseParams(s), { start: String(c.startNs), end: String(c.endNs) });
    let sideStarted = false;
    c.startSide = () => {
      if (sideStarted || c !== cur) return;
      sideStarted = true;
      loadHits(c, p);
      loadFacets(c, p);
    };
    setTimeout(c.startSide, SIDE_DELAY);
    searchPage(c, c.startNs, c.endNs, 0).finally(c.startSide);
    if (s.live) startTail(s);
  }

  // searchPage streams one page of results into the list. The server
  // drops skip leading entries whose ts equals the paging boundary, the
  // ones already shown (see API.md).
  async function searchPage(c, startNs, endNs, skip) {
    const s = state;
    const params = Object.assign(baseParams(s), {
      start: String(startNs), end: String(endNs), limit: String(s.limit), direction: s.dir,
    });
    if (skip > 0) params.skip = String(skip);
    c.phase = 'running';
    c.limited = false;
    c.limitedBy = c.warning = '';
    updateStatus();
    let lastTs = null;
    try {
      const res = await fetch(api('v1/search', params), { signal: c.ac.signal });
      c.startSide();
      if (!res.ok) throw new Error(await errorText(res));
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buf = '', ended = false;
      const handle = (text) => {
        if (!text) return;
        const o = JSON.parse(text);
        if (o.error !== undefined) throw new Error(String(o.error));
        if (o.done) {
          ended = true;
          c.limited = !!o.limited;
          c.limitedBy = String(o.limited_by || '');
          c.warning = String(o.warning || '');
          c.elapsed = o.elapsed_ms;
          return;
        }
        lastTs = o.ts;
        // Rows of the last minute are remembered by the tail, whose
        // gap's search after a reconnection must not show them again.
        if (tail && tail.c === c) tailShown(tail, entryKey(o), o.ts);
        enqueue(o, false);
      };
      for (;;) {
        const { value, done } = await reader.read();
        if (c !== cur) return;
        if (done) break;
        const lines = (buf + value).split('\n');
        buf = lines.pop(); // a line cut by the chunk boundary waits for the rest
        for (const line of lines) handle(line.trim());
      }
      handle(buf.trim());
      if (!ended) throw new Error('connection lost before the end of the results');
      if (c.limited && lastTs === null) c.limited = false;
      await flushed();
      if (c !== cur) return;
      c.lastTs = lastTs;
      // How many shown rows share the last timestamp: the next page skips them.
      let same = 0;
      for (let r = el.rows.lastElementChild; r && r.dataset.ts === lastTs; r = r.previousElementSibling) same++;
      c.sameAtLast = same;
      c.phase = 'done';
      updateStatus();
    } catch (err) {
      if (c !== cur) return;
      if (err.name === 'AbortError') { c.phase = 'stopped'; await flushed(); updateStatus(); return; }
      c.phase = 'error';
      // fetch rejects a dropped connection with a TypeError whose message
      // ("network error", "Failed to fetch") does not say the rows on
      // screen are incomplete.
      await flushed();
      if (c !== cur) return;
      updateStatus();
      const shown = el.rows.childElementCount;
      const msg = !(err instanceof TypeError) ? err.message : shown
        ? 'connection lost after ' + shown + (shown === 1 ? ' row' : ' rows') + ': the results are incomplete'
        : 'connection lost (is the server reachable?)';
      setStatus('Error: ' + msg, true);
    }
  }

  // flushed resolves once the queued rows are on screen.
  function flushed() {
    if (!queue.length) return Promise.resolve();
    return new Promise((resolve) => { paintDone = resolve; if (!frame) frame = requestAnimationFrame(paint); });
  }

  function loadMore() {
    const c = cur;
    if (c.phase !== 'done' || !c.limited || c.lastTs === null || c.lastTs === undefined) return;
    const t = BigInt(c.lastTs);
    if (state.dir === 'forward') searchPage(c, t, c.endNs, c.sameAtLast);
    else searchPage(c, c.startNs, t, c.sameAtLast);
  }

  async function errorText(res) {
    const t = await res.text();
    try { const o = JSON.parse(t); if (o && o.error) return String(o.error); } catch (e) { /* not JSON */ }
    return (t.trim() || res.statusText || 'request failed') + ' (HTTP ' + res.status + ')';
  }

  async function getJSON(c, url) {
    const res = await fetch(url, { signal: c.ac.signal });
    if (!res.ok) throw new Error(await errorText(res));
    return res.json();
  }

  // ---- histogram -------------------------------------------------------------

  const SVG = 'http://www.w3.org/2000/svg';

  async function loadHits(c, p) {
    try {
      const h = await getJSON(c, api('v1/hits', p));
      if (c !== cur) return;
      if (!Array.isArray(h.buckets)) h.buckets = [];
      c.histData = h;
      el.hits.textContent = h.total + (h.total === 1 ? ' hit' : ' hits') + ' · ' + fmtTime(c.fromMs) + ' – ' + fmtTime(c.toMs) + ' ' + zoneName(c.toMs);
      drawHist(c);
    } catch (err) {
      if (c !== cur || err.name === 'AbortError') return;
      el.hits.textContent = 'Histogram: ' + err.message;
    }
  }

  function svgEl(name, attrs) {
    const n = document.createElementNS(SVG, name);
    for (const k in attrs) n.setAttribute(k, String(attrs[k]));
    return n;
  }

  function drawHist(c) {
    const h = c.histData;
    if (!h) return;
    const W = el.hist.clientWidth || 800, H = el.hist.clientHeight || 96, axis = 14;
    const span = Math.max(1, c.toMs - c.fromMs);
    const x = (ms) => ((ms - c.fromMs) / span) * W;
    let max = 1;
    for (const b of h.buckets) max = Math.max(max, b.count);
    const svg = svgEl('svg', { width: W, height: H, viewBox: '0 0 ' + W + ' ' + H, role: 'img' });
    svg.setAttribute('aria-label', 'Hits over time: ' + h.total + ' in ' + h.buckets.length + ' buckets');
    const bw = Math.max(1, (h.step_ms / span) * W - 1);
    for (const b of h.buckets) {
      if (!b.count) continue;
      const bh = Math.max(1, (b.count / max) * (H - axis - 4));
      const r = svgEl('rect', { class: 'bar', x: x(b.t).toFixed(1), y: (H - axis - bh).toFixed(1), width: bw.toFixed(1), height: bh.toFixed(1) });
      r.dataset.count = b.count;
      r.dataset.t = b.t;
      const title = svgEl('title', {});
      title.textContent = fmtTime(b.t) + ': ' + b.count;
      r.appendChild(title);
      svg.appendChild(r);
    }
    svg.appendChild(svgEl('line', { class: 'base', x1: 0, x2: W, y1: H - axis, y2: H - axis }));
    const ticks = Math.max(2, Math.floor(W / 160));
    for (let i = 0; i <= ticks; i++) {
      const t = svgEl('text', { class: 'axis', x: (i / ticks) * W, y: H - 2, 'text-anchor': i === 0 ? 'start' : i === ticks ? 'end' : 'middle' });
      t.textContent = fmtTime(c.fromMs + (span * i) / ticks).slice(5, 16);
      svg.appendChild(t);
    }
    const top = svgEl('text', { class: 'axis', x: 2, y: 10 });
    top.textContent = String(max);
    svg.appendChild(top);
    c.sel = svgEl('rect', { class: 'sel', x: 0, y: 0, width: 0, height: H - axis });
    svg.appendChild(c.sel);
    el.hist.textContent = '';
    el.hist.appendChild(svg);
  }

  // Dragging across the histogram zooms to the dragged span; a click zooms
  // to the bucket under the pointer.
  let drag = null;
  el.hist.addEventListener('pointerdown', (ev) => {
    if (!cur.histData || ev.button !== 0) return;
    const r = el.hist.getBoundingClientRect();
    drag = { left: r.left, width: r.width, x0: ev.clientX - r.left, x1: ev.clientX - r.left };
    el.hist.setPointerCapture(ev.pointerId);
    ev.preventDefault();
  });
  el.hist.addEventListener('pointermove', (ev) => {
    if (!drag) return;
    drag.x1 = Math.min(drag.width, Math.max(0, ev.clientX - drag.left));
    if (cur.sel) {
      cur.sel.setAttribute('x', String(Math.min(drag.x0, drag.x1)));
      cur.sel.setAttribute('width', String(Math.abs(drag.x1 - drag.x0)));
    }
  });
  el.hist.addEventListener('pointerup', (ev) => {
    if (!drag) return;
    const d = drag;
    drag = null;
    const c = cur, span = c.toMs - c.fromMs;
    const at = (px) => Math.round(c.fromMs + (px / d.width) * span);
    let from, to;
    if (Math.abs(d.x1 - d.x0) >= 4) {
      from = at(Math.min(d.x0, d.x1));
      to = at(Math.max(d.x0, d.x1));
    } else {
      const t = at(d.x0), step = c.histData.step_ms;
      from = Math.floor(t / step) * step;
      to = from + step - 1;
    }
    if (to <= from) return;
    navigate(Object.assign({}, state, { from: String(from), to: String(to) }));
  });
  el.hist.addEventListener('pointercancel', () => { drag = null; });

  el.zoomout.addEventListener('click', () => {
    const now = Date.now();
    const f = toMs(state.from, now), t = toMs(state.to, now), span = 3 * Math.max(20e3, t - f);
    const to = Math.min(now, (f + t) / 2 + span / 2);
    navigate(Object.assign({}, state, { from: String(Math.round(to - span)), to: to === now ? 'now' : String(Math.round(to)) }));
  });

  let resizeTimer = 0;
  new ResizeObserver(() => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => drawHist(cur), 100);
  }).observe(el.hist);

  // ---- facets ----------------------------------------------------------------

  async function loadFacets(c, p) {
    const names = getJSON(c, 'loki/api/v1/labels').catch(() => null);
    try {
      const f = await getJSON(c, api('v1/facets', p));
      const ln = await names;
      if (c !== cur) return;
      drawFacets(f.labels || {}, ln && Array.isArray(ln.data) ? ln.data : null);
    } catch (err) {
      if (c !== cur || err.name === 'AbortError') return;
      el.facets.textContent = err.message;
    } finally {
      if (c === cur) el.facets.removeAttribute('aria-busy');
    }
  }

  function drawFacets(labels, names) {
    const order = names ? names.slice() : [];
    for (const k of Object.keys(labels).sort()) if (!order.includes(k)) order.push(k);
    const active = activeMatchers(state.q);
    const frag = document.createDocumentFragment();
    for (const name of order) {
      const box = document.createElement('section');
      box.className = 'facet';
      box.dataset.label = name;
      const h = document.createElement('h3');
      h.textContent = name;
      box.appendChild(h);
      const vals = Object.entries(labels[name] || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).slice(0, FACET_VALUES);
      if (!vals.length) {
        const none = document.createElement('div');
        none.className = 'none';
        none.textContent = 'no matches';
        box.appendChild(none);
      }
      const ul = document.createElement('ul');
      for (const [v, n] of vals) {
        const li = document.createElement('li');
        const b = document.createElement('button');
        b.type = 'button';
        b.dataset.label = name;
        b.dataset.value = v;
        const pressed = active.some((m) => m.name === name && m.value === v);
        b.setAttribute('aria-pressed', String(pressed));
        b.title = (pressed ? 'Remove ' : 'Filter by ') + name + '="' + v + '"';
        const vs = document.createElement('span');
        vs.className = 'v';
        appendText(vs, v);
        const ns = document.createElement('span');
        ns.className = 'n';
        ns.textContent = String(n);
        b.append(vs, ns);
        li.appendChild(b);
        ul.appendChild(li);
      }
      box.appendChild(ul);
      frag.appendChild(box);
    }
    el.facets.textContent = '';
    el.facets.appendChild(frag);
  }

  el.facets.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-label]');
    if (!b) return;
    const q = withLabel(state.q, state.fold, b.dataset.label, b.dataset.value);
    navigate(Object.assign({}, state, { q, fold: isLogQL(q) ? false : state.fold }));
  });

  // ---- live tail -------------------------------------------------------------

  // The tail is read with fetch, not EventSource: EventSource reconnects
  // at its own pace and cannot tell a server that is restarting (503
  // while it drains, a proxy's 502) from one that refuses the tail (401,
  // 403), whose message it cannot read either.
  //
  // A tail that is lost (the server's shutdown event: most often a
  // restart; the connection dropped; the stream ended) says
  // "reconnecting…" and is connected again, after a pause (tailBackoff)
  // unless it had delivered something. Then what arrived meanwhile is
  // shown from a search that starts TAIL_WINDOW before the latest time
  // shown and skips the entries shown already, as hay search --server -f
  // does (cmd/hay/remote.go). A refusal, or an error event other than the
  // shutdown, ends the tail with the server's message.
  const TAIL_WINDOW = 60000000000n;  // ns: how far before the latest time shown a gap's search starts
  const TAIL_RECENT_MAX = 100000;    // entries remembered to be skipped by a gap's search
  const TAIL_RETRY_AFTER_MAX = 30000; // ms: the longest a Retry-After makes the page wait
  const MAX_SKIP = 100000;           // the server's limit on skip (API.md)
  const END_OF_TIME = '9223372036854775807'; // a gap's search also finds entries stamped in the future

  function nowNs() { return BigInt(Date.now()) * 1000000n; }

  // entryKey identifies an entry shown: entries equal in all of it are
  // told apart by count.
  function entryKey(o) {
    const pairs = (m) => (m && typeof m === 'object' ? Object.keys(m).sort().map((k) => [k, m[k]]) : []);
    return JSON.stringify([String(o.ts), pairs(o.labels), o.line_base64 || String(o.line), pairs(o.metadata)]);
  }

  function startTail(s) {
    const t = {
      c: cur, s, conn: null, wake: null,
      lost: false, why: '', tries: 0,
      // What a gap's search needs (see tailShown): the latest time shown,
      // at most the time it was shown (at first, when the tail started);
      // the entries shown from TAIL_WINDOW before it, counted by key, in
      // the order shown (order[head:]); and the entries the last gap's
      // search showed, which the new tail may send again.
      latest: nowNs(), recent: new Map(), order: [], head: 0, filled: new Map(),
    };
    tail = t;
    followTail(t);
    updateStatus();
  }

  // tailOn reports whether t is still the page's tail (not stopped, not
  // replaced by another search).
  function tailOn(t) { return tail === t && t.c === cur; }

  // tailShown records an entry shown while t runs (by the tail, a gap's
  // search, or the search under it), and forgets those that fell out of
  // the window. An entry stamped in the future counts as shown now: else
  // the next gap's search would start after the break.
  function tailShown(t, k, ts) {
    let n;
    try { n = BigInt(ts); } catch (e) { return; }
    const now = nowNs();
    if (n > t.latest) t.latest = n < now ? n : now;
    const from = t.latest - TAIL_WINDOW;
    if (n < from) return;
    t.recent.set(k, (t.recent.get(k) || 0) + 1);
    t.order.push({ n, k });
    while (t.head < t.order.length && (t.order[t.head].n < from || t.order.length - t.head > TAIL_RECENT_MAX)) {
      const o = t.order[t.head++];
      const left = t.recent.get(o.k) - 1;
      if (left > 0) t.recent.set(o.k, left); else t.recent.delete(o.k);
    }
    if (t.head > 1024 && t.head > t.order.length / 2) { t.order = t.order.slice(t.head); t.head = 0; }
  }

  // tailBackoff is how long to wait before the next attempt: from a
  // quarter second, doubling, at most 5 s, each ±25% at random (the pages
  // of a restarted server do not all come back at once); longer when the
  // server asked (Retry-After, at most TAIL_RETRY_AFTER_MAX).
  function tailBackoff(t, retryAfterMs) {
    t.tries++;
    const d = Math.min(250 * 2 ** Math.min(t.tries - 1, 5), 5000);
    return Math.max(d * 0.75 + Math.random() * d / 2, Math.min(retryAfterMs || 0, TAIL_RETRY_AFTER_MAX));
  }

  function retryAfterMs(res) {
    const n = parseInt(res.headers.get('Retry-After') || '', 10);
    return n > 0 ? n * 1000 : 0;
  }

  // An HTTP answer that may go away by itself: too many requests, a proxy
  // whose server is down, a server draining before a restart.
  function transientStatus(code) { return code === 429 || code === 502 || code === 503 || code === 504; }

  // tailFailure is an error of a reconnection: transient ones are retried
  // (after at least wait ms), the others end the tail with their message.
  function tailFailure(msg, transient, wait) {
    const err = new Error(msg);
    err.transient = transient;
    err.wait = wait || 0;
    return err;
  }

  function tailPause(t, ms) {
    return new Promise((resolve) => {
      const id = setTimeout(resolve, ms);
      t.wake = () => { clearTimeout(id); resolve(); };
    });
  }

  // followTail runs t until it is stopped or refused.
  async function followTail(t) {
    const p = baseParams(t.s);
    let wait = 0;
    const lost = (why, delay) => {
      t.lost = true;
      t.why = why;
      if (t.conn) t.conn.abort();
      wait = delay;
      updateStatus();
    };
    for (;;) {
      if (wait > 0) await tailPause(t, wait);
      if (!tailOn(t)) return;
      t.conn = new AbortController();
      let res, end;
      try {
        res = await fetch(api('v1/tail', p), { signal: t.conn.signal });
        if (!tailOn(t)) return;
        if (!res.ok) {
          const msg = await errorText(res);
          throw tailFailure(msg, transientStatus(res.status), retryAfterMs(res));
        }
        if (t.lost) await fillGap(t);
        if (!tailOn(t)) return;
        if (t.lost) { t.lost = false; t.why = ''; updateStatus(); }
        end = await readTail(t, res);
      } catch (err) {
        if (!tailOn(t)) return;
        // fetch rejects a refused or dropped connection with a TypeError.
        if (err instanceof TypeError || err.transient || err.name === 'AbortError') {
          lost(err instanceof TypeError ? 'the server is unreachable (' + err.message + ')' : err.message, tailBackoff(t, err.wait));
          continue;
        }
        endTail(t, err.message);
        return;
      }
      if (!tailOn(t)) return;
      if (end.error !== undefined) { endTail(t, end.error); return; }
      // A tail that worked is tried again at once, and backs off from
      // the start if that fails; one that ends at once (a proxy that
      // accepts and closes) is not tried in a tight loop.
      if (end.delivered) t.tries = 0;
      lost(end.why, end.delivered ? 0 : tailBackoff(t, 0));
    }
  }

  // readTail shows the events of one tail connection until it ends, and
  // says how: {why, delivered} when it was lost, {error} when the server
  // ended it with an error.
  async function readTail(t, res) {
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '', data = [], delivered = false;
    for (;;) {
      let r;
      try {
        r = await reader.read();
      } catch (err) {
        if (err.name === 'AbortError') throw err;
        return { why: 'the connection was lost', delivered };
      }
      if (!tailOn(t)) return {};
      if (r.done) return { why: 'the server ended the live tail', delivered };
      const lines = (buf + r.value).split('\n');
      buf = lines.pop(); // a line cut by the chunk boundary waits for the rest
      for (let line of lines) {
        if (line.endsWith('\r')) line = line.slice(0, -1);
        if (line.startsWith('data:')) { data.push(line.slice(line[5] === ' ' ? 6 : 5)); continue; }
        if (line !== '' || !data.length) continue; // a comment (": ping"), or no event yet
        const text = data.join('\n');
        data = [];
        let o;
        try { o = JSON.parse(text); } catch (e) { continue; }
        if (o.error !== undefined) {
          // The shutdown event (API.md): most often a restart.
          if (o.reason === 'shutting_down') return { why: 'the server is shutting down (a restart?)', delivered };
          return { error: String(o.error) };
        }
        delivered = true;
        if (o.dropped !== undefined) continue;
        const k = entryKey(o);
        const f = t.filled.get(k);
        if (f) {
          // Shown already by the gap's search: the tail connected
          // before it searched.
          if (f > 1) t.filled.set(k, f - 1); else t.filled.delete(k);
          continue;
        }
        enqueue(o, true);
        tailShown(t, k, o.ts);
      }
    }
  }

  // fillGap shows, after a reconnection, the entries stored from
  // TAIL_WINDOW before the latest time shown on that were not shown,
  // oldest first above the rows shown before. It searches newest first
  // and stops at TAIL_CAP new entries: the older ones would not stay on
  // screen.
  async function fillGap(t) {
    const start = String(t.latest - TAIL_WINDOW);
    const found = [];      // entries to show, newest first
    const skipped = new Map(); // per key, the entries equal to ones shown before that were skipped
    t.filled = new Map();
    let end = END_OF_TIME, skip = 0;
    for (;;) {
      const params = Object.assign(baseParams(t.s), { start, end, limit: String(TAIL_CAP), direction: 'backward' });
      if (skip > 0) params.skip = String(skip);
      const res = await fetch(api('v1/search', params), { signal: t.conn.signal });
      if (!res.ok) {
        const msg = await errorText(res);
        throw tailFailure(msg, transientStatus(res.status), retryAfterMs(res));
      }
      let got = 0;
      const limited = await readAnswer(res, (o) => {
        got++;
        if (o.ts === end) skip++;
        else { end = o.ts; skip = 1; }
        const k = entryKey(o);
        const n = skipped.get(k) || 0;
        if (n < (t.recent.get(k) || 0)) { skipped.set(k, n + 1); return; }
        found.push(o);
      });
      if (!tailOn(t)) return;
      if (!limited || got === 0 || found.length >= TAIL_CAP || skip > MAX_SKIP) break;
    }
    for (let i = found.length - 1; i >= 0; i--) {
      const o = found[i], k = entryKey(o);
      enqueue(o, true);
      t.filled.set(k, (t.filled.get(k) || 0) + 1);
      tailShown(t, k, o.ts);
    }
  }

  // readAnswer calls fn for each entry of a /api/v1/search answer and
  // returns whether the server stopped at the limit. An answer cut
  // before its trailer is a lost connection (transient).
  async function readAnswer(res, fn) {
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = '';
    for (;;) {
      let r;
      try {
        r = await reader.read();
      } catch (err) {
        if (err.name === 'AbortError') throw err;
        r = { done: true };
      }
      // The last line, without its newline, may be cut: the answer was.
      const lines = r.done ? [] : (buf + r.value).split('\n');
      buf = r.done ? buf : lines.pop();
      for (const raw of lines) {
        const line = raw.trim();
        if (!line) continue;
        let o;
        try { o = JSON.parse(line); } catch (e) { throw tailFailure('a line of the answer is not JSON', false); }
        if (o.error !== undefined) throw tailFailure(String(o.error), false);
        if (o.done) return !!o.limited;
        fn(o);
      }
      if (r.done) {
        let o = null;
        try { o = JSON.parse(buf.trim()); } catch (e) { /* cut */ }
        if (o && o.done) return !!o.limited;
        if (o && o.error !== undefined) throw tailFailure(String(o.error), false);
        throw tailFailure('the connection was lost during the search for what arrived meanwhile', true);
      }
    }
  }

  // endTail ends t on an error: the Live box and the URL say so, as
  // after Escape (ticking Live again starts a new one).
  function endTail(t, msg) {
    stopTail();
    t.c.tailError = msg;
    navigateQuiet(Object.assign({}, state, { live: false }));
    updateStatus();
  }

  function stopTail() {
    const t = tail;
    if (!t) return;
    tail = null;
    if (t.conn) t.conn.abort();
    if (t.wake) t.wake();
  }

  function stopAll() {
    stopTail();
    if (cur.ac) cur.ac.abort();
  }

  // ---- navigation ------------------------------------------------------------

  // navigate records s as a new history entry and runs it.
  function navigate(s) {
    const url = urlFor(s);
    if (url !== location.search && !(url === location.pathname && !location.search)) history.pushState(null, '', url);
    run(s);
  }

  el.form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    navigate(stateFromControls());
  });
  for (const c of [el.fold, el.dir, el.live, el.from, el.to]) c.addEventListener('change', () => navigate(stateFromControls()));
  el.range.addEventListener('change', () => {
    if (el.range.value === 'custom') {
      // Show the inputs filled with the range on screen; the user edits them.
      const now = Date.now();
      el.from.value = localInput(toMs(state.from, now));
      el.to.value = localInput(toMs(state.to, now));
      el.custom.hidden = false;
      el.from.focus();
      return;
    }
    navigate(stateFromControls());
  });
  el.q.addEventListener('input', () => { el.fold.disabled = isLogQL(el.q.value); });
  el.more.addEventListener('click', loadMore);
  el.stop.addEventListener('click', stop);
  el.moreFoot.addEventListener('click', loadMore);
  window.addEventListener('popstate', () => run(readURL()));

  document.addEventListener('keydown', (ev) => {
    const t = ev.target;
    const typing = (t instanceof HTMLInputElement && t.type !== 'checkbox') || t instanceof HTMLSelectElement || t instanceof HTMLTextAreaElement;
    if (ev.key === '/' && !typing && !ev.ctrlKey && !ev.metaKey && !ev.altKey) {
      ev.preventDefault();
      el.q.focus();
      el.q.select();
    } else if (ev.key === 'Escape') {
      if (cur.phase === 'running' || tail) {
        ev.preventDefault();
        stop();
      }
    }
  });

  // stop ends the running search and the live tail (Escape, the Stop button).
  function stop() {
    if (tail) {
      stopTail();
      navigateQuiet(Object.assign({}, state, { live: false }));
    }
    if (cur.ac) cur.ac.abort();
    updateStatus();
  }

  // navigateQuiet updates the URL for a state change that needs no new search.
  function navigateQuiet(s) {
    state = s;
    history.replaceState(null, '', urlFor(s));
    showState(s);
  }

  // Copying from the rows gives the log's own characters: each control
  // character's symbol (see ctlGlyph) is turned back into the character.
  el.rows.addEventListener('copy', (ev) => {
    const sel = getSelection();
    if (!sel.rangeCount || !ev.clipboardData) return;
    let changed = false;
    const parts = [];
    for (let i = 0; i < sel.rangeCount; i++) {
      const box = document.createElement('div');
      box.appendChild(sel.getRangeAt(i).cloneContents());
      for (const c of box.querySelectorAll('.ctl')) {
        const g = c.textContent, n = g.codePointAt(0);
        let raw = null;
        if (g.length === 1 && n >= 0x2400 && n < 0x2420) raw = String.fromCharCode(n - 0x2400);
        else if (g === '\u2421') raw = '\x7f';
        else { const m = /^<U\+([0-9A-F]{4})>$/.exec(g); if (m) raw = String.fromCharCode(parseInt(m[1], 16)); }
        if (raw !== null) { c.replaceWith(raw); changed = true; }
      }
      for (const b of box.querySelectorAll('button.expand')) b.remove();
      parts.push(box.textContent);
    }
    if (!changed) return; // the browser's own copy keeps the row layout
    ev.clipboardData.setData('text/plain', parts.join('\n'));
    ev.preventDefault();
  });

  // The pure helpers, for browser_test.go to check against Go's parsers.
  window.__haystack = { highlighters, withLabel, ranges };

  run(state);
})();
