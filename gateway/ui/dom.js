// Building the page: elements from code, text from data. Outside strings (route, provider,
// caller and model names, error texts) only ever become text nodes, inside <bdi> so that a
// right-to-left override in one cannot reorder what is around it.

/// `h('td', {class: 'num'}, 'text', child)`: attribute names are always literals in our code;
/// children are nodes or strings (strings become text nodes, never markup).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'on') {
      for (const [event, fn] of Object.entries(value)) el.addEventListener(event, fn);
    } else if (value === true) {
      el.setAttribute(name, '');
    } else {
      el.setAttribute(name, String(value));
    }
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/// An outside string, as isolated text; the full text is also its tooltip when it is long.
export function ext(s, cls) {
  const text = s === undefined || s === null ? '' : String(s);
  return h('bdi', { class: cls ? `ext ${cls}` : 'ext', title: text.length > 40 ? text : undefined, 'data-ext': '' }, text);
}

const locale = undefined; // the viewer's own

const fmt = (opts) => new Intl.NumberFormat(locale, opts);
const integer = fmt({ maximumFractionDigits: 0 });
const decimal = fmt({ maximumFractionDigits: 2 });
const precise = fmt({ maximumSignificantDigits: 4 });
const percent = fmt({ style: 'percent', maximumFractionDigits: 1 });

export const dash = '–';
const known = (n) => typeof n === 'number' && Number.isFinite(n);

export const count = (n, unit) => (known(n) ? `${integer.format(n)}${unit ? ` ${unit}` : ''}` : dash);
export const ratio = (n) => (known(n) ? percent.format(n) : dash);
export const ms = (n) => (known(n) ? (n >= 10_000 ? `${decimal.format(n / 1000)} s` : `${decimal.format(n)} ms`) : dash);
/// An amount in the routes' price unit (whatever currency the prices were written in).
export const cost = (n) => (known(n) ? precise.format(n) : dash);
export const rps = (n) => (known(n) ? `${decimal.format(n)} req/s` : dash);

const stamp = new Intl.DateTimeFormat(locale, { dateStyle: 'medium', timeStyle: 'medium' });
const clock = new Intl.DateTimeFormat(locale, { timeStyle: 'medium' });
const zone = new Intl.DateTimeFormat(locale, { timeZoneName: 'short' }).formatToParts(new Date()).find((p) => p.type === 'timeZoneName');
/// The viewer's time zone, as shown beside times (e.g. `CET`, `GMT+5:30`).
export const zoneName = zone ? zone.value : Intl.DateTimeFormat().resolvedOptions().timeZone;

/// A time (ms since the epoch) in the viewer's time zone.
export const time = (at) => (known(at) && at > 0 ? `${stamp.format(new Date(at))} ${zoneName}` : dash);
export const clockNow = () => `${clock.format(new Date())} ${zoneName}`;

/// How long ago or from now, in words (`in 5 min`, `3 h ago`).
const relative = new Intl.RelativeTimeFormat(locale, { numeric: 'auto', style: 'short' });
export function fromNow(at) {
  if (!known(at) || at <= 0) return '';
  const s = Math.round((at - Date.now()) / 1000);
  const a = Math.abs(s);
  if (a < 60) return relative.format(s, 'second');
  if (a < 3600) return relative.format(Math.round(s / 60), 'minute');
  if (a < 86400) return relative.format(Math.round(s / 3600), 'hour');
  return relative.format(Math.round(s / 86400), 'day');
}

/// A table whose cells carry their column's name (the narrow layout shows it beside each value).
export function table(caption, columns, rows) {
  const head = h('thead', {}, h('tr', {}, columns.map((c) => h('th', { scope: 'col' }, c))));
  const body = h('tbody', {}, rows.map((cells) => h('tr', {}, cells.map((cell, i) => {
    const td = h('td', { 'data-label': columns[i] });
    td.append(cell instanceof Node ? cell : document.createTextNode(String(cell ?? dash)));
    return td;
  }))));
  return h('table', {}, h('caption', {}, caption), head, body);
}

/// A state word as a badge (`healthy`, `open`, ...): the word is ours or the API's enum.
export const badge = (word, tone) => h('span', { class: `badge ${tone || word}` }, String(word));
