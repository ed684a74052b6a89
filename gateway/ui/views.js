// The five views. Each has `load()` (the admin API calls it needs) and `render(data, act)`
// (DOM nodes from that data; `act` holds the confirmed actions main.js provides).

import { call } from './api.js';
import { h, ext, table, badge, count, ratio, ms, cost, rps, time, fromNow, dash } from './dom.js';

const button = (label, key, onclick, attrs) => h('button', { type: 'button', 'data-focus-key': key, ...(attrs || {}), on: { click: onclick } }, label);

function healthTone(p) {
  if (p.effective_weight > 0 && p.health >= 0.8) return 'good';
  if (p.effective_weight > 0) return 'warn';
  return 'bad';
}

function healthWord(p) {
  if (p.breaker === 'open') return 'breaker open';
  if (p.cooling_ms) return 'cooling';
  if (p.weight === 0) return 'weight 0';
  if (p.health < 0.5) return 'unhealthy';
  if (p.effective_weight === 0) return 'no traffic';
  if (p.health < 0.8) return 'degraded';
  return 'healthy';
}

export const routes = {
  title: 'Routes',
  load: () => call('GET', '/admin/routes'),
  render(data, act) {
    if (!data.routes.length) return [h('p', {}, 'No routes are configured.')];
    return data.routes.map((r) => h('section', { class: 'card', 'data-route': r.route },
      h('h2', {}, 'Route ', ext(r.route), h('span', { class: 'muted' }, ` · ${r.strategy}`)),
      table(`Providers of route ${r.route.length > 60 ? r.route.slice(0, 60) + '…' : r.route}`,
        ['Provider', 'Model', 'Weight', 'Effective', 'Health', 'Success', 'Latency (EWMA)', 'In flight', 'Breaker', 'Cooling', 'Last error', 'Cost today', 'Actions'],
        r.providers.map((p) => {
          const key = JSON.stringify([r.route, p.id]);
          const row = [
            h('span', { 'data-provider': p.id }, ext(p.id), h('br'), h('span', { class: 'muted' }, 'service ', ext(p.service))),
            ext(p.model ?? dash),
            h('span', { 'data-field': 'weight' }, count(p.weight)),
            count(p.effective_weight),
            h('span', { 'data-field': 'health', 'data-health': healthWord(p) }, badge(healthWord(p), healthTone(p)), ' ', ratio(p.health)),
            ratio(p.success_rate),
            ms(p.latency_ewma_ms),
            count(p.in_flight, 'req'),
            badge(p.breaker),
            p.cooling_ms ? `${ms(p.cooling_ms)} left` : dash,
            p.last_error ? ext(p.last_error, 'error') : dash,
            h('span', { 'data-field': 'cost' }, cost(p.cost_today)),
            h('span', { class: 'actions' },
              button('Set weight', `weight:${key}`, () => act.setWeight(r.route, p.id, p.weight), { 'data-action': 'weight' }),
              button('Test', `test:${key}`, () => act.test(r.route, p.id), { 'data-action': 'test' })),
          ];
          return row;
        }))));
  },
};

function breakerRows(list, act) {
  return list.map((b) => {
    const key = JSON.stringify([b.service, b.method, b.endpoint]);
    const open = b.state === 'open';
    return [
      h('span', {}, ext(b.method), ' ', ext(b.endpoint)),
      h('span', { 'data-field': 'breaker', 'data-state': b.state }, badge(b.state)),
      b.phase,
      ratio(b.admit_ratio),
      count(b.calls, 'calls'),
      ratio(b.failure_rate),
      ratio(b.slow_call_rate),
      button(open ? 'Close breaker' : 'Open breaker', `breaker:${key}`, () => act.breaker(b.service, b.method, b.endpoint, !open), { 'data-action': open ? 'close' : 'open' }),
    ];
  });
}

const breakerColumns = ['Endpoint', 'State', 'Phase', 'Admitted', 'Window', 'Failures', 'Slow calls', 'Action'];

// A limiter's live state: a downstream 429's pause left here, and what it refused or held.
function rateLimitNow(st) {
  const paused = st.paused_ms > 0;
  return h('dd', { 'data-field': 'rate_limit_state', 'data-paused': String(paused) },
    paused ? badge('paused', 'warn') : badge('admitting', 'good'),
    paused ? ` ${ms(st.paused_ms)} left after a 429 · ` : ' · ',
    `${count(st.refused, 'req')} refused, ${count(st.waited, 'req')} waited since the limit was set`);
}

export const services = {
  title: 'Services',
  load: () => call('GET', '/admin/services'),
  render(data, act) {
    const out = [h('section', { class: 'card' },
      h('h2', {}, 'Open a breaker by hand'),
      h('p', { class: 'muted' }, 'For an endpoint without traffic yet; a route\'s provider is the service route:<route>/<provider>.'),
      h('div', { class: 'row' },
        button('Open a breaker…', 'breaker:new', () => act.breakerByHand(data.services.map((s) => s.service)), { 'data-action': 'open-by-hand' })))];
    for (const s of data.services) {
      const rl = s.rate_limit;
      out.push(h('section', { class: 'card', 'data-service': s.service },
        h('h2', {}, 'Service ', ext(s.service)),
        h('dl', { class: 'facts' },
          h('dt', {}, 'Bulkhead'), h('dd', { 'data-field': 'bulkhead' }, `${count(s.bulkhead.in_use)} of ${count(s.bulkhead.limit)} in use`),
          h('dt', {}, 'Rate limit'), h('dd', {}, rl ? `${rps(rl.rps)}, burst ${count(rl.burst, 'req')}, waits up to ${ms(rl.max_wait_ms)}${rl.shared ? ', shared by the fleet' : ''}` : 'none'),
          ...(rl && rl.state ? [h('dt', {}, 'Rate limit now'), rateLimitNow(rl.state)] : [])),
        s.endpoints.length
          ? table(`Breakers of service ${s.service.slice(0, 60)}`, breakerColumns, breakerRows(s.endpoints.map((b) => ({ ...b, service: s.service })), act))
          : h('p', { class: 'muted' }, 'No endpoint has breaker state yet.')));
    }
    if (data.provider_breakers.length) {
      out.push(h('section', { class: 'card', 'data-service': 'providers' },
        h('h2', {}, 'Route providers'),
        table('Breakers of route providers', ['Provider', ...breakerColumns], data.provider_breakers.map((b, i) => [ext(b.service), ...breakerRows([b], act)[0]]))));
    }
    return out;
  },
};

export const callers = {
  title: 'Callers',
  load: () => call('GET', '/admin/callers'),
  render(data) {
    if (!data.callers.length) return [h('p', {}, 'No callers are configured.')];
    return [h('section', { class: 'card' },
      h('p', { class: 'muted' }, 'Today is the UTC day; costs are in the routes\' price unit.'),
      table('Callers today', ['Caller', 'Requests', 'Errors', 'Rate-limit refusals', 'Budget refusals', 'Cost today', 'Budget per day', 'Budget left', 'Rate limit'],
        data.callers.map((c) => [
          h('span', { 'data-caller': c.name }, ext(c.name)),
          count(c.requests, 'req'),
          count(c.errors, 'req'),
          h('span', { 'data-field': 'rate_limited' }, count(c.rate_limited, 'req')),
          count(c.budget_refused, 'req'),
          cost(c.cost_today),
          c.budget_per_day == null ? 'unlimited' : cost(c.budget_per_day),
          c.budget_left == null ? dash : cost(c.budget_left),
          c.rate_limit ? `${rps(c.rate_limit.rps)}, burst ${count(c.rate_limit.burst)}` : 'none',
        ])))];
  },
};

export const credentials = {
  title: 'Credentials',
  load: () => call('GET', '/admin/credentials'),
  render(data) {
    if (!data.credentials.length) return [h('p', {}, 'No service holds a credential.')];
    return [h('section', { class: 'card' }, table('Credentials per service (never a secret)', ['Service', 'Type', 'Status', 'Expires', 'Last refresh', 'Last error', 'Keys'],
      data.credentials.map((c) => [
        ext(c.service),
        c.type,
        badge(c.status, c.status === 'valid' ? 'good' : c.status === 'refreshing' ? 'warn' : 'bad'),
        c.expires_at_ms ? `${time(c.expires_at_ms)} (${fromNow(c.expires_at_ms)})` : 'never',
        c.last_refresh_ms ? `${time(c.last_refresh_ms)} (${fromNow(c.last_refresh_ms)})` : dash,
        c.last_error ? ext(c.last_error, 'error') : dash,
        c.keys && c.keys.length ? `${count(c.keys.length, c.keys.length === 1 ? 'key' : 'keys')}` : dash,
      ])))];
  },
};

export const config = {
  title: 'Config',
  async load() {
    const [cfg, audit] = await Promise.all([call('GET', '/admin/config'), call('GET', '/admin/audit')]);
    let fleet = null;
    if (cfg.config_source) {
      try {
        fleet = await call('GET', '/admin/fleet');
      } catch (e) {
        fleet = e.body || { error: e.message };
      }
    }
    return { cfg, audit, fleet };
  },
  render({ cfg, audit, fleet }, act) {
    const out = [h('section', { class: 'card' },
      h('h2', {}, 'Active version'),
      h('p', {}, h('code', { 'data-field': 'version' }, cfg.version)),
      h('div', { class: 'row' },
        button('Reload from the config file', 'reload:file', () => act.reload(null), { 'data-action': 'reload-file' }),
        button('Reload with a config…', 'reload:text', () => act.reloadText(), { 'data-action': 'reload-text' })))];
    out.push(h('section', { class: 'card', id: 'reloads' },
      h('h2', {}, 'Reload history'),
      cfg.reloads.length
        ? table('Reloads through the admin API, newest first', ['When', 'Source', 'By', 'Result', 'Version in force', 'Field', 'Error'],
          cfg.reloads.map((r) => [
            time(r.at_ms), r.source, ext(r.principal),
            badge(r.accepted ? 'accepted' : 'rejected', r.accepted ? 'good' : 'bad'),
            h('code', {}, r.version),
            r.field_path ? h('code', { 'data-field': 'field_path' }, ext(r.field_path)) : dash,
            r.error ? ext(r.error, 'error') : dash,
          ]))
        : h('p', { class: 'muted' }, 'No reload since the gateway started.')));
    if (fleet) out.push(fleetCard(cfg.config_source, fleet, act));
    out.push(h('section', { class: 'card', id: 'audit' },
      h('h2', {}, 'Admin actions'),
      audit.audit.length
        ? table('Admin actions on this gateway, newest first', ['When', 'By', 'Action', 'Target', 'Result', 'Detail'],
          audit.audit.map((a) => [time(a.at_ms), ext(a.principal), a.action, ext(a.target), badge(a.ok ? 'ok' : 'failed', a.ok ? 'good' : 'bad'), ext(JSON.stringify(a.detail), 'detail')]))
        : h('p', { class: 'muted' }, 'No admin action yet.')));
    return out;
  },
};

function fleetCard(mine, fleet, act) {
  const parts = [h('h2', {}, 'Fleet ', ext(mine.name))];
  parts.push(h('dl', { class: 'facts' },
    h('dt', {}, 'This instance'), h('dd', {}, ext(mine.instance), ` runs version ${count(mine.version)} (from ${mine.applied_from}${mine.applied_at_ms ? `, ${time(mine.applied_at_ms)}` : ''})`),
    h('dt', {}, 'Target'), h('dd', {}, count(mine.target)),
    mine.rejected_version ? [h('dt', {}, 'Rejected'), h('dd', {}, `version ${count(mine.rejected_version)}: `, ext(mine.rejected_reason, 'error'))] : null,
    h('dt', {}, 'Redis'), h('dd', {}, mine.connected ? 'connected' : 'not answering', mine.last_error ? [' · ', ext(mine.last_error, 'error')] : null)));
  if (fleet.error && !fleet.versions) {
    parts.push(h('p', { class: 'error' }, 'The fleet could not be read: ', ext(typeof fleet.error === 'string' ? fleet.error : fleet.error.message)));
    return h('section', { class: 'card', id: 'fleet' }, parts);
  }
  parts.push(h('dl', { class: 'facts' },
    h('dt', {}, 'Stable'), h('dd', {}, count(fleet.stable)),
    h('dt', {}, 'Canary'), h('dd', {}, fleet.canary ? `version ${count(fleet.canary)} on ${ratio(fleet.canary_percent / 100)} of instances` : 'none'),
    fleet.guard ? [h('dt', {}, 'Guard'), h('dd', {}, `error rate +${fleet.guard.error_rate_points ?? dash} points, p99 +${fleet.guard.p99_percent ?? dash} %, over ${ms(fleet.guard.window_ms)}, at least ${count(fleet.guard.min_requests, 'req')}`)] : null));
  parts.push(table('Versions across the fleet', ['Version', 'Instances', 'Requests', 'Errors', 'p99'],
    fleet.versions.map((v) => [count(v.version), count(v.instances), count(v.requests, 'req'), count(v.errors, 'req'), ms(v.p99_ms)])));
  parts.push(table('Instances', ['Instance', 'Version', 'Last beat'],
    fleet.instances.map((i) => [ext(i.instance), count(i.version), time(i.at_ms)])));
  parts.push(h('div', { class: 'row' },
    button('Promote the canary…', 'fleet:promote', () => act.promote(fleet.canary), { 'data-action': 'promote', disabled: !fleet.canary }),
    button('Roll back…', 'fleet:rollback', () => act.rollback(fleet), { 'data-action': 'rollback' })));
  if (fleet.stragglers && fleet.stragglers.length) parts.push(h('p', { class: 'error' }, 'Stragglers: ', fleet.stragglers.map((s, i) => [i ? ', ' : '', ext(s)])));
  parts.push(table('Fleet history (last 50)', ['When', 'Action', 'Version', 'Author', 'Message'],
    fleet.history.slice().reverse().map((e) => [time(e.at_ms), e.action, count(e.version), ext(e.author), ext(e.message)])));
  return h('section', { class: 'card', id: 'fleet' }, parts);
}

export const all = { routes, services, callers, credentials, config };
