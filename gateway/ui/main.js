// The console's shell: sign-in, the view switcher, the 2 s refresh, and the confirmed actions.

import { call, signIn, signOut, signedIn, seg, ApiError } from './api.js';
import { h, clockNow } from './dom.js';
import { all } from './views.js';

const REFRESH_MS = 2000;
const $ = (id) => document.getElementById(id);

let current = 'routes';
let paused = false;
let timer = null;
let generation = 0; // a view switch or sign-out makes answers still in flight stale

// ---- sign-in ----

$('login').addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const input = $('key');
  const k = input.value;
  input.value = '';
  $('login-error').textContent = '';
  signIn(k);
  try {
    await call('GET', '/admin/routes');
  } catch (e) {
    signOut();
    $('login-error').textContent = e instanceof ApiError && e.status === 401 ? 'That admin key was refused.' : `Cannot sign in: ${e.message}`;
    input.focus();
    return;
  }
  $('login').hidden = true;
  $('console').hidden = false;
  $('signout').hidden = false;
  $('pause').hidden = false;
  show(current);
});

function toLogin(message) {
  signOut();
  generation++;
  clearTimeout(timer);
  $('console').hidden = true;
  $('signout').hidden = true;
  $('pause').hidden = true;
  $('view').replaceChildren();
  $('status').textContent = '';
  $('login').hidden = false;
  $('login-error').textContent = message || '';
  $('key').focus();
}

$('signout').addEventListener('click', () => toLogin('Signed out: the key is forgotten.'));

$('pause').addEventListener('click', () => {
  paused = !paused;
  $('pause').setAttribute('aria-pressed', String(paused));
  $('pause').textContent = paused ? 'Resume updates' : 'Pause updates';
  if (!paused) refresh();
});

// ---- views ----

for (const b of document.querySelectorAll('nav button')) {
  b.addEventListener('click', () => show(b.dataset.view));
}

// Keys 1-5 switch views (not while typing, nor with a dialog open).
document.addEventListener('keydown', (ev) => {
  if (!signedIn() || ev.ctrlKey || ev.metaKey || ev.altKey || $('confirm').open) return;
  if (ev.target instanceof HTMLInputElement || ev.target instanceof HTMLTextAreaElement) return;
  const names = Object.keys(all);
  const i = Number(ev.key) - 1;
  if (i >= 0 && i < names.length) show(names[i]);
});

function show(name) {
  current = name;
  generation++;
  for (const b of document.querySelectorAll('nav button')) {
    if (b.dataset.view === name) b.setAttribute('aria-current', 'page');
    else b.removeAttribute('aria-current');
  }
  document.title = `${all[name].title} · Harness console`;
  $('view').dataset.view = name;
  $('view').replaceChildren(h('p', { class: 'muted' }, 'Loading…'));
  refresh();
}

/// Loads and renders the current view, then again in 2 s; keeps keyboard focus on the same
/// control across the re-render.
async function refresh() {
  clearTimeout(timer);
  const mine = ++generation;
  const view = all[current];
  try {
    const data = await view.load();
    if (mine !== generation) return;
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.focusKey : undefined;
    $('view').replaceChildren(...view.render(data, actions));
    if (focused !== undefined) {
      const again = [...$('view').querySelectorAll('[data-focus-key]')].find((el) => el.dataset.focusKey === focused);
      if (again) again.focus();
    }
    $('status').textContent = `Updated ${clockNow()}`;
    $('status').dataset.updatedAt = String(Date.now());
  } catch (e) {
    if (mine !== generation) return;
    if (e instanceof ApiError && e.status === 401) return toLogin('The admin key is no longer accepted.');
    $('status').textContent = `Update failed at ${clockNow()}: ${e.message}`;
  }
  if (!paused && signedIn()) timer = setTimeout(refresh, REFRESH_MS);
}

// ---- confirmation ----

/// Asks before an action. With `field`, also asks for a value (`check` refuses a bad one);
/// resolves to the value (or true), or null when cancelled.
function confirmAction({ title, text, ok, field }) {
  const dialog = $('confirm');
  $('confirm-title').textContent = title;
  $('confirm-text').textContent = text;
  $('confirm-ok').textContent = ok || 'Confirm';
  $('confirm-error').textContent = '';
  const input = $('confirm-input');
  $('confirm-field').hidden = !field;
  if (field) {
    $('confirm-label').textContent = field.label;
    input.value = field.value ?? '';
    input.type = field.type || 'text';
    input.inputMode = field.type === 'number' ? 'numeric' : 'text';
  }
  return new Promise((resolve) => {
    const onClose = () => {
      dialog.removeEventListener('close', onClose);
      dialog.removeEventListener('submit', onSubmit, true);
      if (dialog.returnValue !== 'ok') return resolve(null);
      resolve(field ? field.parse(input.value) : true);
    };
    const onSubmit = (ev) => {
      if (!field || ev.submitter?.value !== 'ok') return;
      const why = field.check ? field.check(input.value) : null;
      if (why) {
        ev.preventDefault();
        $('confirm-error').textContent = why;
      }
    };
    dialog.addEventListener('submit', onSubmit, true);
    dialog.addEventListener('close', onClose);
    dialog.returnValue = '';
    dialog.showModal();
    if (field) input.focus();
  });
}

function result(title, body, ok) {
  $('result-title').textContent = title;
  $('result-body').textContent = typeof body === 'string' ? body : JSON.stringify(body, null, 2);
  $('result').dataset.ok = String(ok);
  $('result').hidden = false;
}

$('result-close').addEventListener('click', () => {
  $('result').hidden = true;
  $('view').focus();
});

/// Runs a confirmed call and shows what came back.
async function perform(title, method, path, body) {
  try {
    const answer = await call(method, path, body);
    result(title, answer, true);
  } catch (e) {
    if (e instanceof ApiError && e.status === 401) return toLogin('The admin key is no longer accepted.');
    result(`${title}: refused`, e.body || e.message, false);
  }
  refresh();
}

const actions = {
  async setWeight(route, provider, weight) {
    const w = await confirmAction({
      title: 'Set a provider\'s weight',
      text: `Route “${route}”, provider “${provider}”: its share of new requests changes at once (a new config version).`,
      ok: 'Set weight',
      field: { label: 'New weight (an integer, 0 takes it out of rotation)', value: String(weight), type: 'number',
        check: (v) => (/^\d+$/.test(v.trim()) ? null : 'Enter an integer, 0 or more.'), parse: (v) => Number(v.trim()) },
    });
    if (w === null) return;
    await perform(`Weight of ${provider} on ${route} set to ${w}`, 'POST', `/admin/routes/${seg(route)}/providers/${seg(provider)}/weight`, { weight: w });
  },
  async test(route, provider) {
    const go = await confirmAction({ title: 'Test a provider', text: `Send one short request straight to provider “${provider}” of route “${route}”, whatever its weight?`, ok: 'Send test request' });
    if (!go) return;
    await perform(`Test of ${provider} on ${route}`, 'POST', `/admin/routes/${seg(route)}/providers/${seg(provider)}/test`);
  },
  async breaker(service, method, endpoint, open) {
    const go = await confirmAction({
      title: open ? 'Open a breaker' : 'Close a breaker',
      text: open ? `Open the breaker of ${method} ${endpoint} on “${service}”? Calls to it fail fast until it is closed by hand.` : `Close the breaker of ${method} ${endpoint} on “${service}”? Calls go through again at once.`,
      ok: open ? 'Open breaker' : 'Close breaker',
    });
    if (!go) return;
    await perform(`Breaker of ${method} ${endpoint} on ${service} ${open ? 'opened' : 'closed'}`, 'POST', `/admin/breakers/${open ? 'open' : 'close'}`, { service, method, endpoint });
  },
  async breakerByHand(services) {
    const spec = await confirmAction({
      title: 'Open a breaker by hand',
      text: `Service, method and endpoint, separated by spaces (services: ${services.join(', ')}).`,
      ok: 'Open breaker',
      field: { label: 'For example: orders GET /orders/{id}', value: '',
        check: (v) => (v.trim().split(/\s+/).length === 3 ? null : 'Three words: service, method, endpoint.'),
        parse: (v) => v.trim().split(/\s+/) },
    });
    if (!spec) return;
    const [service, method, endpoint] = spec;
    await perform(`Breaker of ${method} ${endpoint} on ${service} opened`, 'POST', '/admin/breakers/open', { service, method, endpoint });
  },
  async reload() {
    const go = await confirmAction({ title: 'Reload', text: 'Read the config file again and apply it if it is valid? An invalid one is refused and the current config stays.', ok: 'Reload' });
    if (!go) return;
    await perform('Reload from the config file', 'POST', '/admin/reload');
  },
  async reloadText() {
    const text = await confirmAction({
      title: 'Reload with a config',
      text: 'The whole config, as YAML or JSON. It is validated first: an invalid one is refused with the field at fault, and the current config stays.',
      ok: 'Validate and apply',
      field: { label: 'Config (YAML or JSON, one line is fine)', value: '', check: (v) => (v.trim() ? null : 'Paste a config.'), parse: (v) => v },
    });
    if (text === null) return;
    await perform('Reload with the config given', 'POST', '/admin/reload', text);
  },
  async promote(canary) {
    const p = await confirmAction({
      title: 'Promote the canary',
      text: `Widen canary version ${canary} to a share of the fleet; 100 makes it the stable version everywhere.`,
      ok: 'Promote',
      field: { label: 'Share of instances (%)', value: '100', type: 'number',
        check: (v) => (Number(v) > 0 && Number(v) <= 100 ? null : 'A share above 0 and at most 100.'), parse: (v) => Number(v) },
    });
    if (p === null) return;
    await perform(`Canary ${canary} promoted to ${p} %`, 'POST', '/admin/fleet/promote', { percent: p });
  },
  async rollback(fleet) {
    const what = fleet.canary ? `Withdraw canary version ${fleet.canary}` : `Return the fleet from version ${fleet.stable} to ${fleet.previous || 'the previous one'}`;
    const reason = await confirmAction({
      title: 'Roll back', text: `${what}?`, ok: 'Roll back',
      field: { label: 'Reason (kept in the fleet log)', value: '', check: (v) => (v.trim() ? null : 'Say why, for the log.'), parse: (v) => v.trim() },
    });
    if (reason === null) return;
    await perform('Roll back', 'POST', '/admin/fleet/rollback', { reason });
  },
};

$('key').focus();
