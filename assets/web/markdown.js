// An agent's Markdown as page elements: paragraphs (their line breaks kept), emphasis,
// strong, struck and inline code, fenced and indented code blocks, headings, bullet and
// numbered lists, block quotes, rules, and links to http, https and mailto addresses only.
// Every piece of text goes in through textContent or a text node: nothing is parsed as
// HTML, so a <script> in a message is shown as text and a javascript: link is no link.
(() => {
  'use strict';

  const el = (tag, cls) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    return e;
  };

  const FENCE = /^ {0,3}(`{3,}|~{3,})(.*)$/;
  const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
  const QUOTE = /^ {0,3}> ?(.*)$/;
  const ITEM = /^( {0,3})([-*+]|\d{1,9}[.)])(?:[ \t]+(.*))?$/;
  const RULE = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const INDENTED = /^(?: {4}|\t)(.*)$/;

  // The address a link may go to, or null: absolute http(s) and mailto only.
  const safeUrl = (raw) => {
    let u;
    try {
      u = new URL(raw.trim());
    } catch (_) {
      return null;
    }
    return ['http:', 'https:', 'mailto:'].includes(u.protocol) ? u.href : null;
  };

  const link = (href, label) => {
    const a = el('a');
    a.href = href;
    a.rel = 'noopener noreferrer';
    a.target = '_blank';
    if (typeof label === 'string') a.textContent = label;
    else a.append(label);
    return a;
  };

  // ---- inline ----

  // The end of the `[text]` that opens at `i`, brackets balanced, or -1.
  const closeBracket = (s, i) => {
    let depth = 0;
    for (let j = i; j < s.length; j += 1) {
      if (s[j] === '\\') j += 1;
      else if (s[j] === '[') depth += 1;
      else if (s[j] === ']' && (depth -= 1) === 0) return j;
    }
    return -1;
  };

  // `(address "title")` at `i`: the address and where it ends, or null.
  const destination = (s, i) => {
    if (s[i] !== '(') return null;
    let depth = 0;
    for (let j = i; j < s.length; j += 1) {
      if (s[j] === '\\') j += 1;
      else if (s[j] === '(') depth += 1;
      else if (s[j] === ')' && (depth -= 1) === 0) {
        let url = s.slice(i + 1, j).trim().replace(/\s+("[^"]*"|'[^']*')$/, '');
        if (url.startsWith('<') && url.endsWith('>')) url = url.slice(1, -1);
        return { url, end: j + 1 };
      }
    }
    return null;
  };

  const PUNCT = /[!-/:-@[-`{-~]/;
  const WORD = /[\p{L}\p{N}]/u;

  // Where the delimiter `d` opened at `i` closes, or -1: not after a space, and for `_`
  // not inside a word.
  const closing = (s, i, d) => {
    if (i + d.length >= s.length || /\s/.test(s[i + d.length])) return -1;
    if (d[0] === '_' && i > 0 && WORD.test(s[i - 1])) return -1;
    for (let j = i + d.length + 1; j <= s.length - d.length; j += 1) {
      if (s[j] === '\\') { j += 1; continue; }
      if (s[j] === '`') { // code spans hide delimiters
        const run = /^`+/.exec(s.slice(j))[0];
        const end = s.indexOf(run, j + run.length);
        if (end > 0) j = end + run.length - 1;
        continue;
      }
      if (!s.startsWith(d, j)) continue;
      if (d.length === 1 && s[j + 1] === d) { j += 1; continue; } // `**` inside `*…*`
      if (/\s/.test(s[j - 1])) continue;
      if (d[0] === '_' && WORD.test(s[j + d.length] || '')) continue;
      return j;
    }
    return -1;
  };

  const MARKS = [['**', 'strong'], ['__', 'strong'], ['~~', 's'], ['*', 'em'], ['_', 'em']];
  const BARE_URL = /^(?:https?:\/\/|mailto:)[^\s<>]*[^\s<>.,;:!?'")\]]/i;

  // Appends the inline Markdown `s` to `parent` (in a link's text: no links inside).
  const inline = (parent, s, inLink) => {
    let text = '';
    const put = (node) => {
      if (text) parent.append(text);
      text = '';
      parent.append(node);
    };
    let i = 0;
    while (i < s.length) {
      const c = s[i];
      const rest = s.slice(i);
      if (c === '\\' && PUNCT.test(s[i + 1] || '')) {
        text += s[i + 1];
        i += 2;
        continue;
      }
      if (c === '`') {
        const run = /^`+/.exec(rest)[0];
        const end = s.indexOf(run, i + run.length);
        if (end < 0) {
          text += run;
          i += run.length;
          continue;
        }
        let code = s.slice(i + run.length, end);
        if (/^ .*[^ ].* $/.test(code)) code = code.slice(1, -1);
        const e = el('code');
        e.textContent = code;
        put(e);
        i = end + run.length;
        continue;
      }
      if (!inLink && (c === '[' || (c === '!' && s[i + 1] === '['))) {
        const open = c === '!' ? i + 1 : i;
        const close = closeBracket(s, open);
        const dest = close > 0 ? destination(s, close + 1) : null;
        if (dest) {
          const label = document.createDocumentFragment();
          inline(label, s.slice(open + 1, close), true);
          const href = safeUrl(dest.url);
          put(href ? link(href, label) : label);
          i = dest.end;
          continue;
        }
      }
      if (!inLink && c === '<') {
        const auto = /^<([a-z][a-z0-9+.-]{1,31}:[^\s<>]*)>/i.exec(rest);
        const mail = /^<([^\s<>@]+@[^\s<>@]+\.[^\s<>@]+)>/.exec(rest);
        const href = auto ? safeUrl(auto[1]) : mail ? safeUrl('mailto:' + mail[1]) : null;
        if (href) {
          put(link(href, (auto || mail)[1]));
          i += (auto || mail)[0].length;
          continue;
        }
      }
      if (!inLink && (c === 'h' || c === 'm') && (i === 0 || !WORD.test(s[i - 1]))) {
        const bare = BARE_URL.exec(rest);
        const href = bare && safeUrl(bare[0]);
        if (href) {
          put(link(href, bare[0]));
          i += bare[0].length;
          continue;
        }
      }
      const mark = MARKS.find(([d]) => rest.startsWith(d));
      const end = mark ? closing(s, i, mark[0]) : -1;
      if (end > 0) {
        const e = el(mark[1]);
        inline(e, s.slice(i + mark[0].length, end), inLink);
        put(e);
        i = end + mark[0].length;
        continue;
      }
      text += c;
      i += 1;
    }
    if (text) parent.append(text);
  };

  // A paragraph's lines, each break kept as the agent wrote it.
  const paragraph = (tag, lines) => {
    const p = el(tag);
    lines.forEach((line, n) => {
      if (n) p.append(el('br'));
      inline(p, line.trim());
    });
    return p;
  };

  // ---- blocks ----

  const startsBlock = (line) =>
    FENCE.test(line) || HEADING.test(line) || QUOTE.test(line) || RULE.test(line) ||
    (ITEM.test(line) && ITEM.exec(line)[3] !== undefined);

  const codeBlock = (lines) => {
    const pre = el('pre');
    const code = el('code');
    code.textContent = lines.join('\n');
    pre.append(code);
    return pre;
  };

  // A list starting at `lines[i]`: its element and the line after it.
  const list = (lines, i) => {
    const first = ITEM.exec(lines[i]);
    const ordered = /\d/.test(first[2]);
    const ul = el(ordered ? 'ol' : 'ul');
    if (ordered && parseInt(first[2], 10) !== 1) ul.start = parseInt(first[2], 10);
    let loose = false;
    while (i < lines.length) {
      const m = ITEM.exec(lines[i]);
      if (!m || /\d/.test(m[2]) !== ordered) break;
      const indent = m[1].length + m[2].length + 1;
      const body = [m[3] || ''];
      i += 1;
      while (i < lines.length) {
        const line = lines[i];
        if (!line.trim()) {
          const next = lines[i + 1];
          if (next === undefined || (next.search(/\S/) < indent && !ITEM.test(next))) break;
          if (next.search(/\S/) < indent) { loose = true; i += 1; break; }
          body.push('');
        } else if (line.search(/\S/) >= indent) {
          body.push(line.slice(indent));
        } else if (ITEM.test(line) || startsBlock(line) || body[body.length - 1] === '') {
          break;
        } else {
          body.push(line.trim()); // a lazy continuation of the item's text
        }
        i += 1;
      }
      const li = el('li');
      li.append(blocks(body));
      ul.append(li);
    }
    if (!loose) ul.classList.add('tight');
    return [ul, i];
  };

  // The block elements of `lines`, in a fragment.
  const blocks = (lines) => {
    const out = document.createDocumentFragment();
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      let m;
      if (!line.trim()) {
        i += 1;
      } else if ((m = FENCE.exec(line))) {
        const fence = m[1];
        const body = [];
        const indent = line.search(/\S/);
        i += 1;
        while (i < lines.length && !new RegExp('^ {0,3}' + fence[0] + '{' + fence.length + ',}\\s*$').test(lines[i])) {
          body.push(lines[i].replace(new RegExp('^ {0,' + indent + '}'), ''));
          i += 1;
        }
        i += 1;
        out.append(codeBlock(body));
      } else if ((m = HEADING.exec(line))) {
        out.append(paragraph('h' + Math.min(m[1].length + 2, 6), [m[2] || '']));
        i += 1;
      } else if (RULE.test(line)) {
        out.append(el('hr'));
        i += 1;
      } else if (QUOTE.test(line)) {
        const body = [];
        while (i < lines.length && lines[i].trim()) {
          const q = QUOTE.exec(lines[i]);
          body.push(q ? q[1] : lines[i]);
          i += 1;
        }
        const bq = el('blockquote');
        bq.append(blocks(body));
        out.append(bq);
      } else if (ITEM.test(line)) {
        const [ul, next] = list(lines, i);
        out.append(ul);
        i = next;
      } else if (INDENTED.test(line)) {
        const body = [];
        while (i < lines.length && (INDENTED.test(lines[i]) || !lines[i].trim())) {
          body.push(lines[i].trim() ? INDENTED.exec(lines[i])[1] : '');
          i += 1;
        }
        while (body.length && !body[body.length - 1]) body.pop();
        out.append(codeBlock(body));
      } else {
        const body = [];
        while (i < lines.length && lines[i].trim() && (!body.length || !startsBlock(lines[i]))) {
          body.push(lines[i]);
          i += 1;
        }
        out.append(paragraph('p', body));
      }
    }
    return out;
  };

  // The Markdown `text` as a fragment of elements.
  window.cruMarkdown = (text) => blocks(String(text).replace(/\r\n?/g, '\n').split('\n'));
})();
