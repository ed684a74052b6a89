// The admin API from the browser. The key lives in this module's closure only: never in
// web storage, a cookie or the URL, and it is gone when the tab reloads.

let key = null;

export function signIn(k) {
  key = k;
}

export function signOut() {
  key = null;
}

export function signedIn() {
  return key !== null;
}

/// Thrown for any answer that is not 2xx; `status` and `body` as the gateway sent them.
export class ApiError extends Error {
  constructor(status, body) {
    const message = body && body.error && typeof body.error.message === 'string' ? body.error.message : `HTTP ${status}`;
    super(message);
    this.status = status;
    this.body = body;
  }
}

/// One call with the key as a Bearer header, same origin only, never cached.
export async function call(method, path, body) {
  if (key === null) throw new ApiError(401, null);
  const headers = { Authorization: `Bearer ${key}` };
  let payload;
  if (body !== undefined) {
    if (typeof body === 'string') {
      headers['Content-Type'] = 'application/yaml';
      payload = body;
    } else {
      headers['Content-Type'] = 'application/json';
      payload = JSON.stringify(body);
    }
  }
  const resp = await fetch(path, { method, headers, body: payload, cache: 'no-store', credentials: 'omit', redirect: 'error', referrerPolicy: 'no-referrer' });
  let data = null;
  try {
    data = await resp.json();
  } catch {
    data = null;
  }
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

/// A path segment from an outside string (a route or provider id).
export const seg = (s) => encodeURIComponent(s);
