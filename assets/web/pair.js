// The pairing page: sends the code (from #code=… in the link, or typed) to /api/pair.
(() => {
  'use strict';
  const form = document.getElementById('pair-form');
  const input = document.getElementById('code');
  const button = document.getElementById('pair');
  const error = document.getElementById('pair-error');

  // A short device label guessed from the user agent: "Chrome on Android".
  const label = () => {
    const ua = navigator.userAgent || '';
    const browser =
      /Edg(e|A|iOS)?\//.test(ua) ? 'Edge' :
      /OPR\/|Opera/.test(ua) ? 'Opera' :
      /Firefox\/|FxiOS/.test(ua) ? 'Firefox' :
      /SamsungBrowser/.test(ua) ? 'Samsung Internet' :
      /Chrome\/|CriOS/.test(ua) ? 'Chrome' :
      /Safari\//.test(ua) ? 'Safari' : 'Browser';
    const os =
      /iPhone/.test(ua) ? 'iPhone' :
      /iPad/.test(ua) ? 'iPad' :
      /Android/.test(ua) ? 'Android' :
      /CrOS/.test(ua) ? 'ChromeOS' :
      /Windows/.test(ua) ? 'Windows' :
      /Macintosh|Mac OS X/.test(ua) ? 'macOS' :
      /Linux/.test(ua) ? 'Linux' : '';
    return os ? `${browser} on ${os}` : browser;
  };

  let busy = false;
  const pair = async () => {
    const code = input.value.trim();
    if (!code || busy) return;
    busy = true;
    button.disabled = true;
    error.textContent = '';
    try {
      const res = await fetch('/api/pair', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ code, label: label() }),
        credentials: 'same-origin',
      });
      if (res.ok) {
        location.replace('/');
        return;
      }
      let msg = `Pairing failed (${res.status}).`;
      try {
        const body = await res.json();
        if (body && body.error) msg = typeof body.error === 'string' ? body.error : body.error.message || msg;
      } catch (_) { /* not JSON */ }
      error.textContent = msg;
    } catch (e) {
      error.textContent = 'Cannot reach the crucible daemon.';
    }
    busy = false;
    button.disabled = false;
    input.focus();
  };

  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    pair();
  });

  // A link like /pair#code=ABCD: take the code, drop it from the address and history.
  const m = /(?:^#|&)code=([^&]*)/.exec(location.hash);
  if (m) {
    history.replaceState(null, '', location.pathname + location.search);
    input.value = decodeURIComponent(m[1].replace(/\+/g, ' '));
    pair();
  } else {
    input.focus();
  }
})();
