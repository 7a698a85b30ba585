// crucible's web view: sessions, a session's transcript and prompt, its diff, and the inbox.
// State comes from /api/call/<method>; changes arrive as Server-Sent Events from
// /api/events and are applied to the DOM as they come (nothing polls).
// All data goes into the DOM through textContent: nothing from the daemon is parsed as HTML.
(() => {
  'use strict';

  const $ = (id) => document.getElementById(id);
  // An element with a class and text.
  const h = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = text;
    return e;
  };
  const btn = (cls, text) => {
    const b = h('button', cls, text);
    b.type = 'button';
    return b;
  };
  // A token safe to put in a class name.
  const tok = (s) => String(s || 'none').toLowerCase().replace(/[^a-z0-9_-]/g, '');

  const st = {
    csrf: '',
    ro: true,
    kilns: null, // through the person's hub: every kiln's name; a kiln's own page: null
    reach: new Map(), // through the hub: kiln name → {state, host, error}
    agents: [],
    drivers: [],
    sessions: new Map(),
    messages: new Map(),
    open: null, // the open session's id
    seqs: new Set(), // transcript seqs shown for the open session
    lastSeq: 0,
    tools: new Map(), // tool_call_id → the call's line
    stream: [], // provisional streamed blocks: {kind, text, el, body}
    streamBox: null,
    tLoading: false, // a transcript load is under way: hold its entries
    tBuf: [],
    stuck: true, // the transcript is scrolled to the bottom
    diffOpen: false,
    tab: null,
    loading: false, // a full reload is under way: queue events
    again: false,
    queue: [],
    started: false,
  };
  window.cruEvents = 0;
  window.cruLastEventAt = 0;
  const applied = () => {
    window.cruLastEventAt = performance.now();
    window.cruEvents += 1;
  };

  // ---- status line ----
  let statusTimer = 0;
  const status = (text, isError) => {
    const s = $('status');
    s.textContent = text;
    s.className = isError ? 'error' : '';
    s.hidden = !text;
    clearTimeout(statusTimer);
    if (text) statusTimer = setTimeout(() => { s.hidden = true; }, isError ? 9000 : 5000);
  };
  $('status').addEventListener('click', () => { $('status').hidden = true; });

  const toPair = () => location.replace('/pair');

  // ---- calls ----
  const call = async (method, params, silent) => {
    let res;
    try {
      res = await fetch('/api/call/' + method, {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-Crucible-Csrf': st.csrf },
        body: JSON.stringify(params || {}),
        credentials: 'same-origin',
      });
    } catch (e) {
      if (!silent) status('Cannot reach the crucible daemon.', true);
      throw e;
    }
    if (res.status === 401) {
      toPair();
      throw new Error('not paired');
    }
    let body = null;
    try { body = await res.json(); } catch (_) { /* empty or not JSON */ }
    if (!res.ok) {
      const err = body && body.error;
      const msg = (err && (err.message || (typeof err === 'string' ? err : ''))) ||
        `${method} failed (${res.status})`;
      if (!silent) status(msg, true);
      throw new Error(msg);
    }
    return body || {};
  };
  // Runs a call for a click; its error is already in the status line.
  const quiet = (p) => p.catch(() => null);

  // ---- small helpers on the data ----
  const blocks = (m) => m.msg_type === 'decision_needed' || m.msg_type === 'approval_required';
  // Waiting for an answer: it has options (or is a question that takes one) and is open.
  const isWaiting = (m) => !m.responded && !m.withdrawn && (Array.isArray(m.options) || blocks(m));
  const answers = (m) => (m.options && m.options.length ? m.options
    : m.msg_type === 'approval_required' ? ['approve', 'deny'] : []);
  const isAllow = (m, option, idx) => {
    const kinds = m.option_kinds;
    if (Array.isArray(kinds) && m.options && idx >= 0 && kinds[idx]) return kinds[idx].startsWith('allow');
    return /^\s*(allow|approve|yes)/i.test(option);
  };
  const time = (s) => Date.parse(s) || 0;
  const driverKind = (d) => (d && typeof d === 'object'
    ? (typeof d.kind === 'string' ? d.kind : Object.keys(d)[0] || 'local') : 'local');
  const waitingSessions = () => {
    const set = new Set();
    for (const m of st.messages.values()) if (isWaiting(m)) set.add(m.session_id);
    return set;
  };
  const rank = (s, wait) => (wait.has(s.id) || s.state === 'waiting' ? 0 : s.state === 'working' ? 1 : 2);
  const stateMark = (state) => {
    const span = h('span', `state st-${tok(state)}`);
    span.append(h('span', 'dot'), h('span', 'word', state || 'unknown'));
    return span;
  };
  const shortTime = (s) => {
    const d = new Date(s);
    if (isNaN(d)) return '';
    const today = new Date().toDateString() === d.toDateString();
    return today ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
      : d.toLocaleDateString([], { month: 'short', day: 'numeric' });
  };
  // Replaces a list's children only when their order or identity changed (keeps focus and
  // typed text in the items that did not change).
  const place = (list, els) => {
    const kids = list.children;
    if (els.length !== kids.length || els.some((e, i) => kids[i] !== e)) list.replaceChildren(...els);
  };

  // ---- tabs (phones) ----
  const setTab = (tab) => {
    st.tab = tab;
    $('main').className = 'show-' + tab;
    for (const b of $('tabs').children) b.classList.toggle('active', b.dataset.tab === tab);
    if (tab === 'session') stick();
  };
  $('tabs').addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-tab]');
    if (b && !b.disabled) setTab(b.dataset.tab);
  });

  // ---- session list ----
  const sessEls = new Map(); // id → {key, el}
  const sessionItem = (s, asks) => {
    const li = h('li', 'session' + (s.id === st.open ? ' open' : '') + (asks ? ' asks' : ''));
    li.dataset.sessionId = s.id;
    const b = btn('session-btn');
    if (s.id === st.open) b.setAttribute('aria-current', 'true');
    const top = h('span', 'line1');
    top.append(h('span', 'name', s.display_name || s.id));
    if (st.kilns && s.kiln) {
      const away = awayWord(s.kiln);
      const tag = h('span', 'tag kiln' + (away ? ' away' : ''), s.kiln + (away ? ' · ' + away : ''));
      li.classList.toggle('away', !!away);
      top.append(tag);
    }
    if (asks) top.append(h('span', 'tag ask', 'answer'));
    if (s.channel && s.channel.kind) top.append(h('span', 'tag ch-' + tok(s.channel.kind), s.channel.kind));
    const sub = h('span', 'line2');
    sub.append(stateMark(s.state), h('span', 'agent', s.agent_name || s.agent_type || ''));
    if (s.branch) sub.append(h('span', 'branch', s.branch));
    b.append(top, sub);
    if (s.task) b.append(h('span', 'line3 task', s.task.split('\n')[0]));
    li.append(b);
    return li;
  };
  // A kiln the hub does not reach now: the word for it, else ''.
  const awayWord = (kiln) => {
    const r = st.reach.get(kiln);
    return r && r.state !== 'connected' ? r.state : '';
  };
  // The kilns the hub does not reach now, said above the sessions.
  const renderReach = () => {
    const away = [...st.reach.entries()].filter(([, r]) => r.state !== 'connected');
    const note = $('kilns-away');
    note.hidden = away.length === 0;
    note.replaceChildren(...away.map(([kiln, r]) => {
      const el = h('span', 'kiln-away st-' + tok(r.state),
        `${kiln}${r.host ? ' on ' + r.host : ''}: ${r.state === 'resting' ? 'resting (its daemon starts when you act on it)' : r.state}`);
      if (r.error) el.title = r.error;
      return el;
    }));
  };
  const renderSessions = () => {
    const wait = waitingSessions();
    const list = [...st.sessions.values()].sort((a, b) =>
      rank(a, wait) - rank(b, wait) || time(b.updated_at || b.started_at) - time(a.updated_at || a.started_at));
    const els = list.map((s) => {
      const asks = wait.has(s.id);
      const key = JSON.stringify(s) + asks + (s.id === st.open) + awayWord(s.kiln);
      let c = sessEls.get(s.id);
      if (!c || c.key !== key) sessEls.set(s.id, (c = { key, el: sessionItem(s, asks) }));
      return c.el;
    });
    for (const id of sessEls.keys()) if (!st.sessions.has(id)) sessEls.delete(id);
    place($('sessions'), els);
    $('sessions-empty').hidden = els.length > 0;
  };
  $('sessions').addEventListener('click', (ev) => {
    const li = ev.target.closest('[data-session-id]');
    if (li) openSession(li.dataset.sessionId, true);
  });

  // ---- the open session ----
  const renderHead = () => {
    const s = st.open && st.sessions.get(st.open);
    $('session-none').hidden = !!s;
    $('session-head').hidden = !s;
    $('transcript').hidden = !s || st.diffOpen;
    $('diff-view').hidden = !s || !st.diffOpen;
    $('prompt-form').hidden = !s || st.ro;
    const tab = $('tab-session');
    tab.disabled = !s;
    tab.textContent = s ? s.display_name || s.id : 'Session';
    if (!s) return;
    $('session-name').textContent = s.display_name || s.id;
    $('session-state').replaceChildren(stateMark(s.state));
    const meta = $('session-meta');
    const bits = [s.agent_name || s.agent_type, driverKind(s.driver)];
    if (s.branch) bits.push(s.base_branch ? `${s.branch} → ${s.base_branch}` : s.branch);
    if (s.turn_count != null) bits.push(`${s.turn_count} turn${s.turn_count === 1 ? '' : 's'}`);
    if (s.usage && typeof s.usage.cost === 'number') bits.push(`${s.usage.cost.toFixed(2)} ${s.usage.currency || ''}`.trim());
    meta.replaceChildren(...bits.filter(Boolean).map((t) => h('span', 'bit', t)));
    if (s.channel && s.channel.kind) meta.append(h('span', 'tag ch-' + tok(s.channel.kind), s.channel.kind));
    if (s.state_reason) meta.append(h('span', 'reason', s.state_reason));
    const live = ['creating', 'starting', 'working', 'waiting'].includes(s.state);
    $('cancel').hidden = st.ro;
    $('stop').hidden = st.ro;
    $('cancel').disabled = !live;
    $('stop').disabled = s.state === 'stopped';
    $('merge').hidden = st.ro;
  };

  // Keeps the transcript at the bottom when it was there (st.stuck follows the reader's
  // scrolling; a hidden transcript keeps the last answer).
  const stick = (fn) => {
    if (fn) fn();
    const t = $('transcript');
    if (st.stuck) t.scrollTop = t.scrollHeight;
  };
  $('transcript').addEventListener('scroll', () => {
    const t = $('transcript');
    if (t.clientHeight > 0) st.stuck = t.scrollHeight - t.scrollTop - t.clientHeight < 48;
  }, { passive: true });

  const resetTranscript = () => {
    st.seqs = new Set();
    st.lastSeq = 0;
    st.tools = new Map();
    st.stream = [];
    st.streamBox = h('div', 'stream');
    $('transcript').replaceChildren(st.streamBox);
  };

  const toolStatus = (s) => h('span', 'tool-status ts-' + tok(s), s || '');

  // The agent's words drawn from their Markdown (markdown.js builds the elements from
  // text); everything else as it is.
  const fillText = (body, kind, text) => {
    if (kind === 'message' && window.cruMarkdown) {
      body.classList.add('md');
      body.replaceChildren(window.cruMarkdown(text));
    } else {
      body.textContent = text;
    }
  };
  const textEl = (kind, text) => {
    const body = h('div', 'text');
    fillText(body, kind, text);
    return body;
  };

  const entryEl = (e) => {
    const el = h('div', `entry entry-${tok(e.kind)}`);
    el.dataset.seq = e.seq;
    if (e.at) el.title = e.at;
    const text = e.text || '';
    switch (e.kind) {
      case 'prompt':
        el.append(h('div', 'who', 'you'), h('div', 'text', text));
        break;
      case 'thought': {
        const d = h('details');
        d.append(h('summary', null, 'thought'), h('div', 'text', text));
        el.append(d);
        break;
      }
      case 'tool_call':
      case 'tool_update':
        el.append(h('span', 'icon', e.kind === 'tool_call' ? '⚙' : '↳'), h('span', 'tool-title', text), toolStatus(e.status));
        if (e.kind === 'tool_call' && e.tool_call_id) st.tools.set(e.tool_call_id, el);
        break;
      case 'plan': {
        const ul = h('ul', 'plan');
        for (const line of text.split('\n')) {
          if (!line.trim()) continue;
          const m = /^\[([\w-]+)\]\s*(.*)$/.exec(line); // "[status] step"
          ul.append(h('li', m ? 'plan-' + tok(m[1]) : '', m ? m[2] : line));
        }
        el.append(h('div', 'who', 'plan'), ul);
        break;
      }
      case 'permission':
        el.append(h('span', 'icon', '?'), h('span', 'text', 'permission: ' + text));
        if (e.status) el.append(toolStatus(e.status));
        break;
      case 'file':
        el.append(h('span', 'icon', '▤'), h('span', 'text', text));
        if (e.status) el.append(toolStatus(e.status));
        break;
      case 'turn_end':
        el.append(h('span', 'label', e.status ? 'turn ended · ' + e.status : 'turn ended'));
        break;
      case 'state':
        el.textContent = (e.status || 'state') + (text ? ' — ' + text : '');
        break;
      default: // message, error
        el.append(textEl(e.kind, text));
    }
    return el;
  };

  // A stored message or thought replaces the streamed text it was made of; a turn's end
  // ends all streaming (as the terminal view does).
  const settleStream = (e) => {
    if (e.kind === 'turn_end') {
      st.stream = [];
      st.streamBox.replaceChildren();
      return;
    }
    if (e.kind !== 'message' && e.kind !== 'thought') return;
    const i = st.stream.findIndex((b) => b.kind === e.kind);
    if (i < 0) return;
    const b = st.stream[i];
    const stored = e.text || '';
    if (stored && b.text.length > stored.length && b.text.startsWith(stored)) {
      b.text = b.text.slice(stored.length); // more of the next message already came
      fillText(b.body, b.kind, b.text);
    } else {
      b.el.remove();
      st.stream.splice(i, 1);
    }
  };

  const addEntry = (e) => {
    if (st.seqs.has(e.seq)) return;
    st.seqs.add(e.seq);
    settleStream(e);
    const line = e.kind === 'tool_update' && e.tool_call_id && st.tools.get(e.tool_call_id);
    if (line) { // fold the update onto its call's line, as the terminal view does
      if (e.status) line.querySelector('.tool-status').replaceWith(toolStatus(e.status));
      if (e.text) line.querySelector('.tool-title').textContent = e.text;
      return;
    }
    const el = entryEl(e);
    const t = $('transcript');
    if (e.seq > st.lastSeq) {
      st.lastSeq = e.seq;
      t.insertBefore(el, st.streamBox);
    } else { // late: put it in order
      const after = [...t.querySelectorAll('.entry[data-seq]')].find((x) => +x.dataset.seq > e.seq);
      t.insertBefore(el, after || st.streamBox);
    }
  };

  const addChunk = (c) => {
    const last = st.stream[st.stream.length - 1];
    if (last && last.kind === c.kind) {
      last.text += c.text;
      if (last.kind === 'message') fillText(last.body, last.kind, last.text);
      else last.body.append(c.text);
      return;
    }
    const el = h('div', `entry entry-${tok(c.kind)} streaming`);
    const body = textEl(c.kind, c.text);
    if (c.kind === 'thought') {
      const d = h('details');
      d.append(h('summary', null, 'thinking…'), body);
      el.append(d);
    } else {
      el.append(body);
    }
    st.streamBox.append(el);
    st.stream.push({ kind: c.kind, text: c.text, el, body });
  };

  const loadTranscript = async () => {
    const id = st.open;
    if (!id) return;
    st.tLoading = true;
    st.tBuf = [];
    try {
      const r = await call('session.transcript', { session_id: id, limit: 500 });
      if (st.open !== id) return;
      stick(() => {
        resetTranscript();
        for (const e of r.entries || []) addEntry(e);
        for (const e of st.tBuf) addEntry(e);
      });
    } catch (_) { /* shown */ } finally {
      if (st.open === id) { st.tLoading = false; st.tBuf = []; }
    }
  };

  const openSession = async (id, toTab) => {
    if (!st.sessions.has(id)) {
      const r = await quiet(call('session.get', { session_id: id }));
      if (!r || !r.session) return;
      st.sessions.set(r.session.id, r.session);
    }
    if (st.open !== id) {
      st.open = id;
      st.diffOpen = false;
      st.stuck = true;
      resetTranscript();
      history.replaceState(null, '', '#s=' + encodeURIComponent(id));
      renderHead();
      renderSessions();
      renderAsks();
      if (toTab) setTab('session');
      await loadTranscript();
    } else if (toTab) {
      setTab('session');
    }
  };

  const closeSession = () => {
    st.open = null;
    st.diffOpen = false;
    resetTranscript();
    history.replaceState(null, '', location.pathname);
    renderHead();
    renderAsks();
    if (st.tab === 'session') setTab('sessions');
  };

  // ---- prompt ----
  // On a touch screen (no hover, a coarse pointer) Enter makes a new line and the Send
  // button sends: a phone's keyboard has no Shift+Enter.
  const touch = matchMedia('(hover: none) and (pointer: coarse)').matches;
  if (touch) $('prompt').placeholder = 'Message the agent';
  $('prompt').addEventListener('keydown', (ev) => {
    if (!touch && ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
      ev.preventDefault();
      const f = $('prompt-form');
      if (f.requestSubmit) f.requestSubmit();
      else f.dispatchEvent(new Event('submit', { cancelable: true }));
    }
  });
  $('prompt-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const text = $('prompt').value;
    if (!text.trim() || !st.open || st.ro) return;
    // `/commit [message]` commits the worktree, as in the workbench: it is no prompt.
    const commit = /^\s*\/commit(?:\s+([\s\S]*))?$/.exec(text);
    if (commit) {
      $('send').disabled = true;
      const params = { session_id: st.open };
      if (commit[1] && commit[1].trim()) params.message = commit[1].trim();
      const c = await quiet(call('session.commit', params));
      $('send').disabled = false;
      if (c) {
        $('prompt').value = '';
        status(c.commit ? `Committed ${String(c.commit).slice(0, 8)}.` : 'Nothing to commit.');
      }
      return;
    }
    $('send').disabled = true;
    const r = await quiet(call('session.prompt', { session_id: st.open, text }));
    $('send').disabled = false;
    if (r) {
      $('prompt').value = '';
      if (r.queued) status('Queued: the agent gets it after this turn.');
    }
  });

  $('cancel').addEventListener('click', async () => {
    if (st.open && await quiet(call('session.cancel', { session_id: st.open }))) status('Cancel sent.');
  });
  $('stop').addEventListener('click', async () => {
    const s = st.sessions.get(st.open);
    if (!s || !confirm(`Stop ${s.display_name || s.id}?`)) return;
    const r = await quiet(call('session.stop', { session_id: s.id }));
    if (r && r.session) {
      st.sessions.set(r.session.id, r.session);
      renderSessions();
      renderHead();
    }
  });

  // ---- diff ----
  let diffInfo = null;
  const hunkEl = (hk) => {
    const pre = h('pre', 'hunk');
    const lines = h('span', 'lines');
    lines.append(h('span', 'hunk-head',
      `@@ -${hk.old_start},${hk.old_lines} +${hk.new_start},${hk.new_lines} @@ ${hk.header || ''}`));
    for (const l of hk.lines || []) {
      const [cls, mark] = l.kind === 'added' ? ['add', '+'] : l.kind === 'removed' ? ['del', '-'] : ['ctx', ' '];
      const row = h('span', 'line ' + cls);
      row.append(h('span', 'ln', l.old_no != null ? String(l.old_no) : ''),
        h('span', 'ln', l.new_no != null ? String(l.new_no) : ''),
        h('span', 'code', mark + l.text));
      lines.append(row);
    }
    pre.append(lines);
    return pre;
  };
  const renderDiff = (r) => {
    diffInfo = r;
    $('diff-title').textContent = r.branch ? `${r.branch} → ${r.base_branch || r.diff && r.diff.base || ''}` : 'Diff';
    const files = (r.diff && r.diff.files) || [];
    const out = files.map((f) => {
      const box = h('section', 'file');
      const head = h('div', 'file-head');
      head.append(h('span', 'fstatus fs-' + tok(f.status), f.status),
        h('span', 'path', f.old_path && f.old_path !== f.path ? `${f.old_path} → ${f.path}` : f.path),
        h('span', 'n-add', '+' + (f.added || 0)), h('span', 'n-del', '−' + (f.removed || 0)));
      box.append(head);
      if (f.binary) box.append(h('p', 'empty', 'Binary file.'));
      else for (const hk of f.hunks || []) box.append(hunkEl(hk));
      return box;
    });
    $('diff-files').replaceChildren(...(out.length ? out : [h('p', 'empty', 'No changes.')]));
  };
  $('show-diff').addEventListener('click', async () => {
    const id = st.open;
    if (!id) return;
    st.diffOpen = true;
    diffInfo = null;
    renderHead();
    $('diff-title').textContent = 'Diff';
    $('diff-files').replaceChildren(h('p', 'empty', 'Loading…'));
    const r = await quiet(call('session.diff', { session_id: id }));
    if (st.open !== id || !st.diffOpen) return;
    if (r) renderDiff(r);
    else $('diff-files').replaceChildren(h('p', 'empty', 'No diff.'));
  });
  $('close-diff').addEventListener('click', () => {
    st.diffOpen = false;
    renderHead();
    stick();
  });
  $('merge').addEventListener('click', async () => {
    const id = st.open;
    const s = st.sessions.get(id);
    if (!s || st.ro) return;
    const branch = (diffInfo && diffInfo.branch) || s.branch || s.display_name;
    const base = (diffInfo && diffInfo.base_branch) || s.base_branch || 'the base branch';
    if (!confirm(`Merge ${branch} into ${base}?`)) return;
    $('merge').disabled = true;
    let r = null;
    try {
      r = await call('session.merge', { session_id: id }, true);
    } catch (e) {
      // An agent that does not commit (codex, a command agent) leaves its work in the
      // worktree: say what would be committed, and commit it and merge on a yes.
      const pending = /worktree has (\d+) uncommitted change\(s\)(?: \(([^)]*)\))?/.exec(e.message || '');
      if (!pending) {
        status(e.message, true);
      } else if (confirm(`${pending[1]} change(s) in the worktree are in no commit` +
          `${pending[2] ? ' (' + pending[2] + (Number(pending[1]) > 3 ? ', …' : '') + ')' : ''}.\n` +
          `Commit them (the message: the session's task) and merge ${branch} into ${base}?`)) {
        const c = await quiet(call('session.commit', { session_id: id }));
        if (c) r = await quiet(call('session.merge', { session_id: id }));
      }
    }
    $('merge').disabled = false;
    if (r) status(`Merged into ${r.into} at ${String(r.head || '').slice(0, 8)}.`);
  });

  // ---- new session ----
  const nsForm = $('new-session-form');
  $('new-session').addEventListener('click', () => {
    nsForm.hidden = !nsForm.hidden;
    if (nsForm.hidden) return;
    // Through the hub: in the kiln of the session in view, else the first.
    const open = st.open && st.sessions.get(st.open);
    if (st.kilns && open && open.kiln) $('ns-kiln').value = open.kiln;
    $('ns-task').focus();
  });
  $('ns-cancel').addEventListener('click', () => {
    nsForm.reset();
    nsForm.hidden = true;
  });
  nsForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    if (st.ro) return;
    const params = { agent: $('ns-agent').value };
    if (st.kilns) params.kiln = $('ns-kiln').value;
    const branch = $('ns-branch').value.trim();
    const task = $('ns-task').value.trim();
    const driver = $('ns-driver').value;
    if (branch) params.worktree = branch;
    if (task) params.task = task;
    if (driver && driver !== 'local') params.driver = { driver };
    $('ns-create').disabled = true;
    const r = await quiet(call('session.create', params));
    $('ns-create').disabled = false;
    if (!r) return;
    nsForm.reset();
    nsForm.hidden = true;
    if (r.session) {
      st.sessions.set(r.session.id, r.session);
      renderSessions();
    }
    if (r.session_id) openSession(r.session_id, true);
  });
  const fillSelect = (sel, items, def) => {
    sel.replaceChildren(...items.map((v) => {
      const o = h('option', null, v);
      o.value = v;
      o.defaultSelected = o.selected = v === def;
      return o;
    }));
  };

  // ---- inbox ----
  $('mark-read').addEventListener('click', async () => {
    const ids = [...st.messages.values()].filter((m) => !m.read && !isWaiting(m)).map((m) => m.id);
    if (!ids.length) return;
    if (await quiet(call('inbox.mark_read', { ids }))) {
      for (const id of ids) {
        const m = st.messages.get(id);
        if (m) st.messages.set(id, { ...m, read: true });
      }
      renderInbox();
    }
  });
  const msgEls = new Map(); // id → {key, el}
  const TYPES = {
    decision_needed: 'decision', approval_required: 'approval', task_complete: 'done', error: 'error', info: 'info',
  };
  const msgItem = (m) => {
    const w = isWaiting(m);
    const el = h('article', `message type-${tok(m.msg_type)}${w ? ' waiting' : ''}` +
      `${m.responded || m.withdrawn ? ' done' : ''}${m.read ? '' : ' unread'}`);
    el.dataset.messageId = m.id;
    const head = h('div', 'msg-head');
    const link = btn('session-link', m.session_name || m.session_id);
    link.dataset.open = m.session_id;
    head.append(h('span', 'msg-type', TYPES[m.msg_type] || m.msg_type));
    if (st.kilns && m.kiln) head.append(h('span', 'tag kiln', m.kiln));
    head.append(link, h('time', 'msg-time', shortTime(m.timestamp)));
    el.append(head, h('div', 'msg-title', m.title));
    if (m.msg_type === 'approval_required' && m.rule) el.append(h('div', 'rule', `Approval required [rule: ${m.rule}]`));
    if (m.body) el.append(h('div', 'body', m.body));
    if (m.operation) el.append(h('pre', 'operation', m.operation));
    if (w && !st.ro) {
      const opts = h('div', 'options');
      const kinds = m.options && m.option_kinds;
      answers(m).forEach((o, i) => {
        const b = btn('option', o);
        b.dataset.option = o;
        b.dataset.index = m.options && m.options.length ? i : -1;
        const kind = kinds && kinds[i] ? kinds[i] : isAllow(m, o, -1) ? 'allow' : /^\s*(deny|reject|no)/i.test(o) ? 'reject' : '';
        if (kind) b.classList.add(kind.startsWith('allow') ? 'allow' : 'reject');
        opts.append(b);
      });
      if (opts.children.length) el.append(opts);
      // A plan under review also takes comments on its steps.
      const plan = m.purpose && m.purpose.kind === 'plan_review';
      if (m.msg_type === 'decision_needed' || plan) {
        const f = h('form', 'answer-text');
        const input = h('input', 'answer-input');
        input.placeholder = plan ? 'Comment on steps: 2: use the view; 3: …' : 'Your answer';
        input.autocomplete = 'off';
        const send = h('button', 'answer', 'Answer');
        send.type = 'submit';
        f.append(input, send);
        el.append(f);
      }
    }
    if (m.withdrawn) el.append(h('div', 'answered', 'Withdrawn' + (m.response ? ': ' + m.response : '')));
    else if (m.responded) el.append(h('div', 'answered', 'Answered' + (m.response ? ': ' + m.response : '') + (m.answered_by ? ' (by ' + m.answered_by + ')' : '')));
    return el;
  };
  // The cards of `list` from `cache` (id → {key, el}): made again only for a message
  // that changed, keeping what was typed in its answer field; the rest of `cache` dropped.
  const cards = (cache, list) => {
    const els = list.map((m) => {
      const key = JSON.stringify(m) + st.ro;
      let c = cache.get(m.id);
      if (!c || c.key !== key) {
        const el = msgItem(m);
        const old = c && c.el.querySelector('.answer-input');
        const now = el.querySelector('.answer-input');
        if (old && now) now.value = old.value;
        cache.set(m.id, (c = { key, el }));
      }
      return c.el;
    });
    const kept = new Set(list.map((m) => m.id));
    for (const id of cache.keys()) if (!kept.has(id)) cache.delete(id);
    return els;
  };
  const renderInbox = () => {
    const list = [...st.messages.values()].sort((a, b) =>
      isWaiting(b) - isWaiting(a) || time(b.timestamp) - time(a.timestamp));
    const els = cards(msgEls, list);
    place($('inbox'), els);
    $('inbox-empty').hidden = els.length > 0;
    // What needs you: unread or waiting for an answer.
    const n = list.filter((m) => !m.withdrawn && (!m.read || isWaiting(m))).length;
    $('inbox-count').textContent = n;
    // What was only to be read (done, errors, notes) can be marked read at once.
    $('mark-read').hidden = st.ro || !list.some((m) => !m.read && !isWaiting(m));
    $('inbox-heading-count').textContent = n ? `(${n})` : '';
    document.title = (n ? `(${n}) ` : '') + 'crucible' + (st.kiln ? ' — ' + st.kiln : '');
    renderAsks();
  };
  // The open session's questions, with their answers, above its message box: the same
  // cards as the inbox's (their own elements, so both can be on screen).
  const askEls = new Map(); // id → {key, el}
  const renderAsks = () => {
    const box = $('session-asks');
    const list = st.open ? [...st.messages.values()]
      .filter((m) => m.session_id === st.open && isWaiting(m))
      .sort((a, b) => time(a.timestamp) - time(b.timestamp)) : [];
    const els = cards(askEls, list);
    place(box, els);
    box.hidden = els.length === 0;
  };
  const respond = async (id, option, idx, el) => {
    const m = st.messages.get(id);
    if (!m || !isWaiting(m) || st.ro || !option) return;
    if (m.rule && isAllow(m, option, idx) &&
        !confirm('Approve this operation?\n\n' + (m.operation || m.title))) return;
    for (const b of el.querySelectorAll('button')) b.disabled = true;
    const r = await quiet(call('inbox.respond', { id, response: option, asked: m.digest }));
    if (r && r.message) {
      st.messages.set(r.message.id, r.message);
      renderInbox();
      renderSessions();
    } else if (!r) {
      for (const b of el.querySelectorAll('button')) b.disabled = false;
    }
  };
  // The inbox and the open session's questions answer alike.
  for (const box of [$('inbox'), $('session-asks')]) {
    box.addEventListener('click', (ev) => {
      const el = ev.target.closest('.message');
      if (!el) return;
      const id = el.dataset.messageId;
      const link = ev.target.closest('.session-link');
      const opt = ev.target.closest('button.option');
      if (opt) return respond(id, opt.dataset.option, +opt.dataset.index, el);
      if (link) openSession(link.dataset.open, true);
      // Looking at a message marks it read (answering does too, on the daemon's side).
      const m = st.messages.get(id);
      if (m && !m.read && !st.ro) quiet(call('inbox.mark_read', { ids: [id] }, true));
    });
    box.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const el = ev.target.closest('.message');
      const input = ev.target.querySelector('.answer-input');
      if (el && input) respond(el.dataset.messageId, input.value.trim(), -1, el);
    });
  }

  // ---- loading and events ----
  const renderAll = () => {
    renderInbox();
    renderSessions();
    renderHead();
  };

  const reload = async () => {
    if (st.loading) {
      st.again = true;
      return;
    }
    st.loading = true;
    try {
      const [sl, il] = await Promise.all([call('session.list', {}), call('inbox.list', { limit: 200 })]);
      // A kiln the hub does not reach now answers for nothing: its sessions stay, drawn
      // as away, until it is back.
      const kept = [...st.sessions.values()].filter((s) => s.kiln && awayWord(s.kiln));
      st.sessions = new Map([...kept, ...(sl.sessions || [])].map((s) => [s.id, s]));
      st.messages = new Map((il.messages || []).map((m) => [m.id, m]));
      st.stream = []; // streamed text may be stale after a reconnect
      if (st.streamBox) st.streamBox.replaceChildren();
      if (st.open && !st.sessions.has(st.open)) closeSession();
      if (!st.started) {
        st.started = true;
        const m = /^#s=(.+)$/.exec(location.hash);
        const want = m && decodeURIComponent(m[1]);
        const waiting = [...st.messages.values()].some(isWaiting);
        renderAll();
        const first = $('sessions').firstElementChild;
        const id = want && st.sessions.has(want) ? want : first && first.dataset.sessionId;
        setTab(waiting ? 'inbox' : want && st.sessions.has(want) ? 'session' : 'sessions');
        if (id) await openSession(id, false);
      } else {
        renderAll();
        await loadTranscript();
      }
      document.body.dataset.ready = '1';
    } catch (_) { /* shown in the status line */ }
    st.loading = false;
    const queued = st.queue;
    st.queue = [];
    for (const [name, d] of queued) apply(name, d);
    if (st.again) {
      st.again = false;
      await reload();
    }
  };

  const apply = (name, d) => {
    switch (name) {
      case 'session.registered':
      case 'session.updated':
        st.sessions.set(d.id, d);
        renderSessions();
        if (d.id === st.open) renderHead();
        break;
      case 'session.deregistered':
        st.sessions.delete(d.session_id);
        if (d.session_id === st.open) {
          status('The session ended' + (d.reason ? ': ' + d.reason : '.'));
          closeSession();
        }
        renderSessions();
        break;
      case 'inbox.created':
      case 'inbox.updated':
        st.messages.set(d.id, d);
        renderInbox();
        renderSessions();
        break;
      case 'inbox.deleted':
        for (const id of d.ids || []) st.messages.delete(id);
        renderInbox();
        renderSessions();
        break;
      case 'session.transcript':
        if (d.session_id !== st.open) break;
        if (st.tLoading) st.tBuf.push(d);
        else stick(() => addEntry(d));
        break;
      case 'session.output':
        if (d.session_id === st.open && st.streamBox) stick(() => addChunk(d));
        break;
      case 'hub.kiln':
        // (The hub then asks for everything to be read again, kept as away meanwhile.)
        st.reach.set(d.kiln, d);
        renderReach();
        renderSessions();
        break;
      default:
    }
    applied();
  };

  const EVENTS = ['session.registered', 'session.updated', 'session.deregistered', 'inbox.created',
    'inbox.updated', 'inbox.deleted', 'session.transcript', 'session.output', 'hub.kiln'];
  const setConn = (on) => {
    $('conn').classList.toggle('on', on);
    $('conn').title = on ? 'connected' : 'reconnecting…';
  };
  const connect = () => {
    const es = new EventSource('/api/events');
    st.es = es;
    es.onopen = () => setConn(true);
    es.onerror = () => {
      setConn(false);
      // The browser retries by itself unless the answer was an error status; then check
      // whether this browser is still paired and try again a little later.
      if (es.readyState === EventSource.CLOSED) {
        es.close();
        if (st.es === es) st.es = null;
        setTimeout(async () => {
          try {
            if ((await fetch('/api/me', { credentials: 'same-origin' })).status === 401) return toPair();
          } catch (_) { /* daemon down: try again */ }
          connect();
        }, 3000);
      }
    };
    const again = () => {
      setConn(true);
      reload().then(applied);
    };
    es.addEventListener('ready', again);
    es.addEventListener('events.lagged', again);
    for (const name of EVENTS) {
      es.addEventListener(name, (ev) => {
        let d;
        try { d = JSON.parse(ev.data); } catch (_) { return; }
        if (st.loading) st.queue.push([name, d]);
        else apply(name, d);
      });
    }
  };

  // A page kept in the back-forward cache closes its stream, and opens it again when it
  // is shown: a browser keeps six connections to one host, and streams held by pages no
  // one sees would starve the next page load.
  addEventListener('pagehide', () => {
    if (st.es) st.es.close();
    st.es = null;
  });
  addEventListener('pageshow', (ev) => {
    if (ev.persisted && !st.es) connect();
  });

  $('logout').addEventListener('click', async (ev) => {
    ev.preventDefault();
    try {
      await fetch('/api/logout', {
        method: 'POST', headers: { 'X-Crucible-Csrf': st.csrf }, credentials: 'same-origin',
      });
    } catch (_) { /* go anyway */ }
    toPair();
  });

  const start = async () => {
    let me;
    try {
      const r = await fetch('/api/me', { credentials: 'same-origin' });
      if (r.status === 401) return toPair();
      if (!r.ok) throw new Error(String(r.status));
      me = await r.json();
    } catch (_) {
      status('Cannot reach the crucible daemon; trying again…', true);
      setTimeout(start, 3000);
      return;
    }
    st.csrf = me.csrf || '';
    st.ro = ((me.device && me.device.kind) || me.kind) !== 'full';
    st.kiln = me.kiln || '';
    st.kilns = Array.isArray(me.kilns) ? me.kilns : null;
    st.reach = new Map((me.kiln_states || []).map((r) => [r.kiln, r]));
    renderReach();
    if (st.kilns) {
      st.kiln = 'every kiln';
      $('ns-kiln-label').hidden = false;
      fillSelect($('ns-kiln'), st.kilns, st.kilns[0]);
    }
    st.agents = me.agents || [];
    st.drivers = me.drivers && me.drivers.length ? me.drivers : ['local'];
    document.body.classList.toggle('ro', st.ro);
    $('ro-badge').hidden = !st.ro;
    $('new-session').hidden = st.ro;
    $('prompt').disabled = st.ro;
    $('send').disabled = st.ro;
    if (st.kiln) $('kiln').textContent = st.kiln;
    document.title = 'crucible' + (st.kiln ? ' — ' + st.kiln : '');
    fillSelect($('ns-agent'), st.agents, me.default_agent || st.agents[0]);
    fillSelect($('ns-driver'), st.drivers, st.drivers.includes('local') ? 'local' : st.drivers[0]);
    resetTranscript();
    renderHead();
    connect();
  };
  start();
})();
