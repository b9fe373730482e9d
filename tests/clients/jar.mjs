// What one browser profile does for the better-auth client in these suites: an Origin header on every request, and
// a cookie jar that sends what the server set and forgets what it cleared.

/** A `customFetchImpl` for `createAuthClient` keeping its cookies in `jar` (name → value). */
export function jarFetch(base, jar) {
  return async (input, init = {}) => {
    const headers = new Headers(init.headers);
    headers.set("origin", base);
    if (jar.size) headers.set("cookie", [...jar].map(([k, v]) => `${k}=${v}`).join("; "));
    const response = await fetch(input, { ...init, headers });
    for (const line of response.headers.getSetCookie()) {
      const [pair, ...attrs] = line.split(";").map((s) => s.trim());
      const [name, value] = [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)];
      if (attrs.some((a) => a.toLowerCase() === "max-age=0")) jar.delete(name);
      else jar.set(name, value);
    }
    return response;
  };
}
